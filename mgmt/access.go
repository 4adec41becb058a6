package mgmt

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/warrenmq/warren/auth"
)

// Users, vhost records, permissions, topic permissions and limits, with
// RabbitMQ 3.10's shapes, status codes and error reasons (captured in
// testdata/rabbitmq).

type topicPermissionJSON struct {
	User     string `json:"user"`
	VHost    string `json:"vhost"`
	Exchange string `json:"exchange"`
	Write    string `json:"write"`
	Read     string `json:"read"`
}

type vhostLimitsJSON struct {
	VHost string           `json:"vhost"`
	Value map[string]int64 `json:"value"`
}

type userLimitsJSON struct {
	User  string           `json:"user"`
	Value map[string]int64 `json:"value"`
}

// The limits RabbitMQ 3.10 accepts.
var (
	vhostLimitNames = []string{"max-connections", "max-queues"}
	userLimitNames  = []string{"max-connections", "max-channels"}
)

func userFromAuth(u auth.User) userJSON {
	tags := u.Tags
	if tags == nil {
		tags = []string{}
	}
	limits := table{}
	for k, v := range u.Limits {
		limits[k] = v
	}
	alg := u.Hashing
	if alg == "" {
		alg = auth.HashSHA256
	}
	return userJSON{Name: u.Name, PasswordHash: auth.EncodeHash(u.PasswordHash), HashingAlgorithm: alg, Tags: tags, Limits: limits}
}

func permFromAuth(p auth.Permission) permissionJSON {
	return permissionJSON{User: p.User, VHost: p.VHost, Configure: p.Configure, Write: p.Write, Read: p.Read}
}

func topicFromAuth(p auth.TopicPermission) topicPermissionJSON {
	return topicPermissionJSON{User: p.User, VHost: p.VHost, Exchange: p.Exchange, Write: p.Write, Read: p.Read}
}

// tagList reads RabbitMQ's "tags": a comma-separated string or a list.
func tagList(v any) ([]string, error) {
	var out []string
	switch t := v.(type) {
	case nil:
		return []string{}, nil
	case []string:
		for _, s := range t {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	case string:
		for _, s := range strings.Split(t, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	case []any:
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				return nil, badRequest("tags must be strings")
			}
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	default:
		return nil, badRequest("tags must be a comma-separated string or a list")
	}
	if out == nil {
		out = []string{}
	}
	return out, nil
}

func (s *Server) getUsers(q *request) error {
	out := []userJSON{}
	for _, u := range s.broker.Auth().Users() {
		out = append(out, userFromAuth(u))
	}
	return q.replyList(out)
}

func (s *Server) getUsersWithoutPermissions(q *request) error {
	db := s.broker.Auth()
	has := map[string]bool{}
	for _, p := range db.Permissions() {
		has[p.User] = true
	}
	out := []userJSON{}
	for _, u := range db.Users() {
		if !has[u.Name] {
			out = append(out, userFromAuth(u))
		}
	}
	return q.replyList(out)
}

func (s *Server) getUser(q *request) error {
	u, ok := s.broker.Auth().User(q.param("user"))
	if !ok {
		return notFound()
	}
	return q.reply(userFromAuth(u))
}

// putUser creates or updates a user: {"password": ...} or
// {"password_hash": ..., "hashing_algorithm": ...}, and "tags" (required,
// as in RabbitMQ). With neither password nor hash the user cannot log in
// with a password.
func (s *Server) putUser(q *request) error {
	if err := checkName("user", q.param("user"), 0); err != nil {
		return err
	}
	var body map[string]any
	if err := q.decode(&body); err != nil {
		return err
	}
	tagsRaw, ok := body["tags"]
	if !ok {
		return badRequest("tags_not_present")
	}
	tags, err := tagList(tagsRaw)
	if err != nil {
		return err
	}
	db, name := s.broker.Auth(), q.param("user")
	old, existed := db.User(name)
	u := auth.User{Name: name, Tags: tags, Hashing: auth.HashSHA256}
	if existed {
		u.Limits = old.Limits
	}
	switch {
	case body["password"] != nil:
		pw, ok := body["password"].(string)
		if !ok {
			return badRequest("password must be a string")
		}
		if u.PasswordHash, err = auth.HashPassword(auth.HashSHA256, pw); err != nil {
			return err
		}
	case body["password_hash"] != nil:
		hs, ok := body["password_hash"].(string)
		if !ok {
			return badRequest("password_hash must be a string")
		}
		if alg, ok := body["hashing_algorithm"].(string); ok && alg != "" {
			u.Hashing = alg
		}
		if u.PasswordHash, err = auth.DecodeHash(hs); err != nil {
			return badRequest("%v", err)
		}
	}
	if err := db.PutUser(u); err != nil {
		return badRequest("%v", err)
	}
	return q.noContent(!existed)
}

func (s *Server) deleteUser(q *request) error {
	name := q.param("user")
	if _, ok := s.broker.Auth().User(name); !ok {
		return notFound()
	}
	if err := s.broker.DeleteUser(name); err != nil {
		return err
	}
	return q.noContent(false)
}

// bulkDeleteUsers deletes {"users": [...]}; like RabbitMQ it stops with 400
// at the first user that does not exist, the ones before it deleted.
func (s *Server) bulkDeleteUsers(q *request) error {
	var body struct {
		Users []string `json:"users"`
	}
	if err := q.decode(&body); err != nil {
		return err
	}
	for _, name := range body.Users {
		if _, ok := s.broker.Auth().User(name); !ok {
			return &httpError{http.StatusBadRequest, "bad_request", "", []any{"no_such_user", name}}
		}
		if err := s.broker.DeleteUser(name); err != nil {
			return err
		}
	}
	return q.noContent(false)
}

func (s *Server) getWhoami(q *request) error {
	tags := q.u.Tags
	if tags == nil {
		tags = []string{}
	}
	return q.reply(whoamiJSON{Name: q.u.Name, Tags: tags})
}

// getPermissions lists permissions, of one vhost or one user when the path
// names one (404 when it does not exist).
func (s *Server) getPermissions(q *request) error {
	db := s.broker.Auth()
	if err := s.checkNamed(q); err != nil {
		return err
	}
	out := []permissionJSON{}
	for _, p := range db.Permissions() {
		if (q.param("vhost") == "" || p.VHost == q.param("vhost")) && (q.param("user") == "" || p.User == q.param("user")) {
			out = append(out, permFromAuth(p))
		}
	}
	return q.replyList(out)
}

// checkNamed answers 404 when the path's vhost or user does not exist.
func (s *Server) checkNamed(q *request) error {
	db := s.broker.Auth()
	if v, ok := q.p["vhost"]; ok {
		if _, ok := db.VHost(v); !ok {
			return notFound()
		}
	}
	if u, ok := q.p["user"]; ok {
		if _, ok := db.User(u); !ok {
			return notFound()
		}
	}
	return nil
}

func (s *Server) getPermission(q *request) error {
	p, ok := s.broker.Auth().Permission(q.param("vhost"), q.param("user"))
	if !ok {
		return notFound()
	}
	return q.reply(permFromAuth(p))
}

// keysMissing is RabbitMQ's reason for a body without required keys.
func keysMissing(body map[string]any, keys ...string) error {
	var miss []string
	for _, k := range keys {
		if _, ok := body[k]; !ok {
			miss = append(miss, "{key_missing,"+k+"}")
		}
	}
	if miss == nil {
		return nil
	}
	return badRequest("[%s]", strings.Join(miss, ","))
}

func stringField(body map[string]any, key string) (string, error) {
	switch v := body[key].(type) {
	case string:
		return v, nil
	case nil:
		return "", nil
	default:
		return "", badRequest("%s must be a string", key)
	}
}

func (s *Server) putPermission(q *request) error {
	var body map[string]any
	if err := q.decode(&body); err != nil {
		return err
	}
	if err := keysMissing(body, "configure", "write", "read"); err != nil {
		return err
	}
	p := auth.Permission{User: q.param("user"), VHost: q.param("vhost")}
	var err error
	for _, f := range []struct {
		key string
		dst *string
	}{{"configure", &p.Configure}, {"write", &p.Write}, {"read", &p.Read}} {
		if *f.dst, err = stringField(body, f.key); err != nil {
			return err
		}
	}
	db := s.broker.Auth()
	_, existed := db.Permission(p.VHost, p.User)
	if err := db.SetPermission(p); err != nil {
		if errors.Is(err, auth.ErrNoUser) || errors.Is(err, auth.ErrNoVHost) {
			return badRequest("vhost_or_user_not_found")
		}
		return badRequest("%v", err)
	}
	return q.noContent(!existed)
}

func (s *Server) deletePermission(q *request) error {
	db := s.broker.Auth()
	if _, ok := db.Permission(q.param("vhost"), q.param("user")); !ok {
		return notFound()
	}
	if err := db.ClearPermission(q.param("vhost"), q.param("user")); err != nil {
		return err
	}
	return q.noContent(false)
}

func (s *Server) topicPermissions(vhost, user string) []topicPermissionJSON {
	out := []topicPermissionJSON{}
	for _, p := range s.broker.Auth().TopicPermissions() {
		if (vhost == "" || p.VHost == vhost) && (user == "" || p.User == user) {
			out = append(out, topicFromAuth(p))
		}
	}
	return out
}

func (s *Server) getTopicPermissions(q *request) error {
	if err := s.checkNamed(q); err != nil {
		return err
	}
	return q.replyList(s.topicPermissions(q.param("vhost"), q.param("user")))
}

// getTopicPermission lists one user's topic permissions in one vhost (a
// list, one per exchange, as in RabbitMQ); 404 when there are none.
func (s *Server) getTopicPermission(q *request) error {
	out := s.topicPermissions(q.param("vhost"), q.param("user"))
	if len(out) == 0 {
		return notFound()
	}
	return q.reply(out)
}

func (s *Server) putTopicPermission(q *request) error {
	var body map[string]any
	if err := q.decode(&body); err != nil {
		return err
	}
	if err := keysMissing(body, "exchange", "write", "read"); err != nil {
		return err
	}
	p := auth.TopicPermission{User: q.param("user"), VHost: q.param("vhost")}
	var err error
	for _, f := range []struct {
		key string
		dst *string
	}{{"exchange", &p.Exchange}, {"write", &p.Write}, {"read", &p.Read}} {
		if *f.dst, err = stringField(body, f.key); err != nil {
			return err
		}
	}
	existed := slices.ContainsFunc(s.topicPermissions(p.VHost, p.User), func(t topicPermissionJSON) bool { return t.Exchange == p.Exchange })
	if err := s.broker.Auth().SetTopicPermission(p); err != nil {
		if errors.Is(err, auth.ErrNoUser) || errors.Is(err, auth.ErrNoVHost) {
			return badRequest("vhost_or_user_not_found")
		}
		return badRequest("%v", err)
	}
	return q.noContent(!existed)
}

// deleteTopicPermission removes a user's topic permissions in a vhost: all
// of them, or those of ?exchange=NAME.
func (s *Server) deleteTopicPermission(q *request) error {
	vhost, user, x := q.param("vhost"), q.param("user"), q.r.URL.Query().Get("exchange")
	found := slices.ContainsFunc(s.topicPermissions(vhost, user), func(t topicPermissionJSON) bool { return x == "" || t.Exchange == x })
	if !found {
		return notFound()
	}
	if err := s.broker.Auth().ClearTopicPermission(vhost, user, x); err != nil {
		return err
	}
	return q.noContent(false)
}

// vhostBody is the body of PUT /api/vhosts/{vhost}.
type vhostBody struct {
	Description      string `json:"description"`
	Tags             any    `json:"tags"`
	DefaultQueueType string `json:"default_queue_type"`
	Tracing          any    `json:"tracing"`
}

// putVHost creates a vhost (granting the creating user full permissions on
// it, as RabbitMQ does) or updates its description, tags and default queue
// type.
func (s *Server) putVHost(q *request) error {
	var body vhostBody
	if err := q.decode(&body); err != nil {
		return err
	}
	tags, err := tagList(body.Tags)
	if err != nil {
		return err
	}
	name := q.param("vhost")
	if err := checkName("vhost", name, 255); err != nil {
		return err
	}
	_, existed := s.broker.Auth().VHost(name)
	rec := auth.VHost{Name: name, Description: body.Description, Tags: tags, DefaultQueueType: body.DefaultQueueType}
	if err := s.broker.AddVHost(rec); err != nil {
		return badRequest("%v", err)
	}
	if !existed {
		err := s.broker.Auth().SetPermission(auth.Permission{User: q.u.Name, VHost: name, Configure: ".*", Write: ".*", Read: ".*"})
		if err != nil {
			return err
		}
	}
	if on, ok := body.Tracing.(bool); ok {
		// The firehose, as rabbitmqctl trace_on and trace_off.
		if err := s.broker.SetTracing(name, on); err != nil {
			return err
		}
	}
	return q.noContent(!existed)
}

func (s *Server) deleteVHost(q *request) error {
	name := q.param("vhost")
	if _, ok := s.broker.Auth().VHost(name); !ok {
		return notFound()
	}
	if err := s.broker.DeleteVHost(name); err != nil {
		return err
	}
	return q.noContent(false)
}

func (s *Server) vhostLimits(vhost string) []vhostLimitsJSON {
	out := []vhostLimitsJSON{}
	for _, v := range s.broker.Auth().VHosts() {
		if (vhost == "" || v.Name == vhost) && len(v.Limits) > 0 {
			out = append(out, vhostLimitsJSON{VHost: v.Name, Value: v.Limits})
		}
	}
	return out
}

func (s *Server) getVHostLimits(q *request) error {
	if err := s.checkNamed(q); err != nil {
		return err
	}
	return q.replyList(s.vhostLimits(q.param("vhost")))
}

// limitValue reads {"value": N} for the limit called name.
func limitValue(q *request, name string, allowed []string) (int64, error) {
	var body map[string]any
	if err := q.decode(&body); err != nil {
		return 0, err
	}
	if err := keysMissing(body, "value"); err != nil {
		return 0, err
	}
	n, ok := body["value"].(json.Number)
	var v int64
	var err error
	if ok {
		v, err = n.Int64()
	}
	if !ok || err != nil {
		b, _ := json.Marshal(body["value"])
		return 0, badRequest("Validation failed\n\n%s should be a number, actually was %s\n", name, b)
	}
	if !slices.Contains(allowed, name) {
		return 0, badRequest("Validation failed\n\nUnrecognised terms [{<<\"%s\">>,%d}] in limits\n", name, v)
	}
	return v, nil
}

func (s *Server) putVHostLimit(q *request) error {
	vhost, name := q.param("vhost"), q.param("name")
	rec, ok := s.broker.Auth().VHost(vhost)
	if !ok {
		return &httpError{http.StatusNotFound, "not_found", "vhost_not_found", nil}
	}
	v, err := limitValue(q, name, vhostLimitNames)
	if err != nil {
		return err
	}
	limits := map[string]int64{name: v}
	for k, old := range rec.Limits {
		if k != name {
			limits[k] = old
		}
	}
	if err := s.broker.Auth().SetVHostLimits(vhost, limits); err != nil {
		return err
	}
	return q.noContent(false)
}

func (s *Server) deleteVHostLimit(q *request) error {
	vhost, name := q.param("vhost"), q.param("name")
	rec, ok := s.broker.Auth().VHost(vhost)
	if !ok {
		return notFound()
	}
	rest := map[string]int64{}
	for k, v := range rec.Limits {
		if k != name {
			rest[k] = v
		}
	}
	if err := s.broker.Auth().SetVHostLimits(vhost, rest); err != nil {
		return err
	}
	return q.noContent(false)
}

func (s *Server) userLimits(user string) []userLimitsJSON {
	out := []userLimitsJSON{}
	for _, u := range s.broker.Auth().Users() {
		if (user == "" || u.Name == user) && len(u.Limits) > 0 {
			out = append(out, userLimitsJSON{User: u.Name, Value: u.Limits})
		}
	}
	return out
}

func (s *Server) getUserLimits(q *request) error {
	if err := s.checkNamed(q); err != nil {
		return err
	}
	return q.replyList(s.userLimits(q.param("user")))
}

func (s *Server) putUserLimit(q *request) error {
	user, name := q.param("user"), q.param("name")
	u, ok := s.broker.Auth().User(user)
	if !ok {
		return &httpError{http.StatusBadRequest, "bad_request", "", []any{"no_such_user", user}}
	}
	v, err := limitValue(q, name, userLimitNames)
	if err != nil {
		return err
	}
	limits := map[string]int64{name: v}
	for k, old := range u.Limits {
		if k != name {
			limits[k] = old
		}
	}
	if err := s.broker.Auth().SetUserLimits(user, limits); err != nil {
		return err
	}
	return q.noContent(false)
}

func (s *Server) deleteUserLimit(q *request) error {
	user, name := q.param("user"), q.param("name")
	u, ok := s.broker.Auth().User(user)
	if !ok {
		return notFound()
	}
	rest := map[string]int64{}
	for k, v := range u.Limits {
		if k != name {
			rest[k] = v
		}
	}
	if err := s.broker.Auth().SetUserLimits(user, rest); err != nil {
		return err
	}
	return q.noContent(false)
}
