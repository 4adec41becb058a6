package server

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/warrenmq/warren/auth"
)

// OpenSystemAdmin opens an admin session on vhost with full permissions
// there, whoever asked: definitions imports (at start-up, or by an
// administrator through the management API) create objects in vhosts that
// the importing user may have no permissions in, as RabbitMQ's import does.
// The session runs as a transient internal user with no password, removed
// by the returned close function, which must be called instead of the
// session's Close.
func (s *Server) OpenSystemAdmin(vhost string) (*AdminSession, func(), error) {
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, nil, err
	}
	name := "warren-internal-" + hex.EncodeToString(rnd[:])
	if err := s.auth.PutUser(auth.User{Name: name}); err != nil {
		return nil, nil, err
	}
	drop := func() {
		if err := s.auth.DeleteUser(name); err != nil {
			s.log.Warn().Err(err).Str("user", name).Msg("removing the internal import user")
		}
	}
	err := s.auth.SetPermission(auth.Permission{User: name, VHost: vhost, Configure: ".*", Write: ".*", Read: ".*"})
	if err != nil {
		drop()
		return nil, nil, err
	}
	a, err := s.OpenAdmin(name, vhost)
	if err != nil {
		drop()
		return nil, nil, err
	}
	return a, func() { a.Close(); drop() }, nil
}
