package server

// systemUser names the broker's own admin sessions in logs and the
// firehose; it is not a user in the access-control database.
const systemUser = "warren-internal"

// OpenSystemAdmin opens an admin session on vhost that no permission
// check applies to: definitions imports (at start-up, or by an
// administrator through the management API) create objects in vhosts that
// the importing user may have no permissions in, as RabbitMQ's import does.
// The returned function closes it.
func (s *Server) OpenSystemAdmin(vhost string) (*AdminSession, func(), error) {
	a, err := s.openAdmin(Actor{User: systemUser, System: true}, vhost)
	if err != nil {
		return nil, nil, err
	}
	return a, func() { a.Close() }, nil
}
