package server

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/auth"
	"github.com/warrenmq/warren/exchange"
	"github.com/warrenmq/warren/persist"
)

// authBlobKey is where the access-control snapshot is stored.
const authBlobKey = "auth"

// defaultExchangeResource is the name permissions see for the default
// exchange, as in RabbitMQ.
const defaultExchangeResource = "amq.default"

// Auth is the broker's access-control database: users, vhost records,
// permissions and limits. Changes to vhosts go through AddVHost and
// DeleteVHost, which also build and tear down the vhost's objects.
func (s *Server) Auth() *auth.DB { return s.auth }

// loadAuth reads the access-control snapshot, or seeds a first start with
// vhost "/" and the configured users, and creates every vhost.
func (s *Server) loadAuth() error {
	if s.cfg.Cluster.Listen != "" {
		// A cluster's access control is the metadata group's, from its
		// first command on (cluster_admin.go).
		s.auth = auth.New(nil)
		return nil
	}
	s.auth = auth.New(func(b []byte) error { return s.store.SaveBlob(authBlobKey, b) })
	data, err := s.store.LoadBlob(authBlobKey)
	switch {
	case err == nil:
		if err := s.auth.Load(data); err != nil {
			return err
		}
	case errors.Is(err, persist.ErrNotFound):
		if err := s.auth.Seed(s.cfg.Users); err != nil {
			return err
		}
		s.firstStart = true
		s.log.Info().Strs("users", mapKeys(s.cfg.Users)).Msg("first start: created vhost / and the default users")
	default:
		return fmt.Errorf("read access control: %w", err)
	}
	for _, rec := range s.auth.VHosts() {
		s.vhosts[rec.Name] = newVhost(s, rec.Name)
	}
	return nil
}

// FirstStart reports whether New found no access-control state and
// created vhost / and Config.Users.
func (s *Server) FirstStart() bool { return s.firstStart }

func mapKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// AddVHost creates a vhost, or updates the record (description, tags,
// default queue type) of an existing one; its limits are kept unless rec
// sets some.
func (s *Server) AddVHost(rec auth.VHost) error {
	if old, ok := s.auth.VHost(rec.Name); ok && rec.Limits == nil {
		rec.Limits = old.Limits
	}
	if err := s.auth.PutVHost(rec); err != nil {
		return err
	}
	s.ensureVHost(rec.Name)
	return nil
}

// ensureVHost creates vhost name's objects if they are not there.
func (s *Server) ensureVHost(name string) {
	rec := auth.VHost{Name: name}
	s.vhostsMu.Lock()
	defer s.vhostsMu.Unlock()
	if s.vhosts[rec.Name] == nil {
		v := newVhost(s, rec.Name)
		s.vhosts[rec.Name] = v
		s.log.Info().Str("vhost", rec.Name).Msg("vhost created")
	}
}

// DeleteVHost removes a vhost with everything in it: its connections are
// closed with 320 CONNECTION_FORCED, its queues and exchanges deleted, its
// policies and permissions dropped. In a cluster the record's deletion is
// a command of the metadata group whose Apply tears the vhost down on
// every node.
func (s *Server) DeleteVHost(name string) error {
	if _, ok := s.auth.VHost(name); !ok {
		return auth.ErrNoVHost
	}
	if s.clustered() {
		return s.auth.DeleteVHost(name)
	}
	if err := s.auth.DeleteVHost(name); err != nil {
		return err
	}
	s.teardownVHost(name)
	return nil
}

// teardownVHost removes vhost name's objects, once its record is gone.
func (s *Server) teardownVHost(name string) {
	s.vhostsMu.Lock()
	v := s.vhosts[name]
	delete(s.vhosts, name)
	s.vhostsMu.Unlock()
	if v == nil {
		return
	}
	v.setTracing(false)
	s.closeConns(func(info *connInfo) bool { return info.VHost == name }, fmt.Sprintf("vhost '%s' is deleted", name))
	v.mu.Lock()
	queues := slices.Collect(maps.Values(v.queues))
	v.mu.Unlock()
	for _, q := range queues {
		if _, err := v.deleteQueue(q, false, false); err != nil {
			s.log.Warn().Err(err).Str("vhost", name).Str("queue", q.Decl().Name).Msg("deleting a queue of a deleted vhost")
		}
	}
	v.mu.Lock()
	for _, e := range v.exchanges {
		if e.Name != "" && e.Durable {
			v.removeExchange(e)
		}
	}
	v.mu.Unlock()
	v.logStoreErr(s.store.DeleteBlob(policyBlobKey(name)))
	s.log.Info().Str("vhost", name).Msg("vhost deleted")
}

// DeleteUser removes a user and its permissions, and closes its
// connections with 320 CONNECTION_FORCED, as RabbitMQ does (in a
// cluster, on every node: the metadata group's Apply does it).
func (s *Server) DeleteUser(name string) error {
	if err := s.auth.DeleteUser(name); err != nil {
		return err
	}
	if !s.clustered() {
		s.userDeleted(name)
	}
	return nil
}

// userDeleted closes the connections of user name, once it is deleted.
func (s *Server) userDeleted(name string) {
	s.closeConns(func(info *connInfo) bool { return info.User == name }, fmt.Sprintf("user '%s' is deleted", name))
	s.log.Info().Str("user", name).Msg("user deleted")
}

// closeConns force-closes every open connection whose negotiated state
// matches.
func (s *Server) closeConns(match func(*connInfo) bool, reason string) {
	s.connsMu.Lock()
	var conns []*conn
	for c := range s.conns {
		if info := c.info.Load(); info != nil && match(info) {
			conns = append(conns, c)
		}
	}
	s.connsMu.Unlock()
	for _, c := range conns {
		c.forceClose(reason)
	}
}

// isLoopback reports whether addr is a loopback address.
func isLoopback(addr net.Addr) bool {
	switch a := addr.(type) {
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	case *net.UnixAddr:
		return true
	case nil:
		return false
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopbackOnly reports whether user may log in from loopback addresses
// only (RabbitMQ's loopback_users, by default guest).
func (s *Server) loopbackOnly(user string) bool {
	return slices.Contains(s.cfg.LoopbackUsers, user)
}

// LoopbackOnly reports whether user may log in from loopback addresses
// only (Config.LoopbackUsers); the management API applies it too.
func (s *Server) LoopbackOnly(user string) bool { return s.loopbackOnly(user) }

// LoginThrottle is the throttle of failed logins (auth.ThrottleConfig's
// defaults; tests set their own through servertest), shared by the AMQP
// listeners and the management API.
func (s *Server) LoginThrottle() *auth.Throttle { return s.cfg.hooks.LoginThrottle }

// actor is who runs the channel's operations.
func (ch *channel) actor() Actor {
	return Actor{User: ch.c.user, Conn: ch.c.id}
}

// check refuses with 403 unless the connection's user has perm on the
// resource kind ("queue" or "exchange") called name.
func (ch *channel) check(perm auth.Perm, kind, name string) error {
	if err := ch.c.vhost.check(ch.actor(), perm, kind, name); err != nil {
		return replyError(err)
	}
	return nil
}

// checkPublish is the write check of basic.publish, cached per channel
// for the last exchange while the database is unchanged.
func (ch *channel) checkPublish(exchangeName string) error {
	gen := ch.c.srv.auth.Gen()
	if ch.pubPerm.ok && ch.pubPerm.gen == gen && ch.pubPerm.exchange == exchangeName {
		return nil
	}
	if err := ch.check(auth.Write, "exchange", exchangeName); err != nil {
		return err
	}
	ch.pubPerm.gen, ch.pubPerm.exchange, ch.pubPerm.ok = gen, exchangeName, true
	return nil
}

// checkTopic applies topic permissions to a routing key used with a topic
// exchange: Write for publishing, Read for binding.
func (ch *channel) checkTopic(e *exchange.Exchange, perm auth.Perm, key string) error {
	if err := ch.c.vhost.checkTopic(ch.actor(), e, perm, key); err != nil {
		return replyError(err)
	}
	return nil
}

// publishPermCache remembers the last exchange a channel was allowed to
// publish to.
type publishPermCache struct {
	gen      uint64
	exchange string
	ok       bool
}

// admitConnection counts a connection into v, or refuses it with 530 when
// the vhost's max-connections limit is reached.
func (v *vhost) admitConnection(user string) *amqp.Error {
	rec, _ := v.srv.auth.VHost(v.name)
	limit, ok := rec.Limits["max-connections"]
	if n := v.conns.Add(1); ok && n > limit {
		v.conns.Add(-1)
		v.log.Warn().Str("vhost", v.name).Str("user", user).Int64("limit", limit).Msg("connection refused: vhost connection limit reached")
		return amqp.Errorf(amqp.NotAllowed, amqp.ClassConnection, amqp.MethodConnectionOpen, "access to vhost '%s' refused for user '%s': connection limit (%d) is reached", v.name, user, limit)
	}
	return nil
}
