// Package auth is the broker's access-control model: users with salted
// password hashes and tags, vhosts with their limits, and per-vhost
// permissions and topic permissions with RabbitMQ's matching rules. It
// keeps everything in memory and hands a JSON snapshot to a save function
// after every change; the server stores that snapshot durably.
package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// Perm is a kind of access to a resource.
type Perm int

// The three kinds, in RabbitMQ's order.
const (
	Configure Perm = iota
	Write
	Read
)

func (p Perm) String() string {
	switch p {
	case Configure:
		return "configure"
	case Write:
		return "write"
	}
	return "read"
}

// User is a login. PasswordHash is nil for a user that cannot log in with
// a password (EXTERNAL only).
type User struct {
	Name         string
	PasswordHash []byte
	Hashing      string // HashSHA256 when empty
	Tags         []string
	// Limits are RabbitMQ's user limits: "max-connections", "max-channels".
	Limits map[string]int64
}

// HasTag reports whether u carries tag.
func (u User) HasTag(tag string) bool { return slices.Contains(u.Tags, tag) }

// VHost is a virtual host's record.
type VHost struct {
	Name             string
	Description      string
	Tags             []string
	DefaultQueueType string
	// Limits are RabbitMQ's vhost limits: "max-connections", "max-queues".
	Limits map[string]int64
}

// Permission is one user's regular expressions in one vhost.
type Permission struct {
	User, VHost            string
	Configure, Write, Read string
}

// TopicPermission restricts the routing keys one user may publish with
// (Write) or bind with (Read) on one topic exchange of a vhost.
type TopicPermission struct {
	User, VHost, Exchange string
	Write, Read           string
}

// Errors returned by changes.
var (
	ErrNoUser  = errors.New("no such user")
	ErrNoVHost = errors.New("no such vhost")
)

type pkey struct{ vhost, user string }

// compiledPerm is a Permission with its expressions compiled; immutable.
type compiledPerm struct {
	Permission
	re [3]*regexp.Regexp
}

type compiledTopic struct {
	TopicPermission
	re [3]*regexp.Regexp // Write and Read slots; nil when it has variables
}

// DB is the access-control database. Reads are safe from any goroutine;
// changes are serialized and saved before they return.
type DB struct {
	mu     sync.RWMutex
	users  map[string]*User
	vhosts map[string]*VHost
	perms  map[pkey]*compiledPerm
	topics map[pkey][]*compiledTopic
	save   func([]byte) error
	gen    atomic.Uint64
	// anyTopics is set while some topic permission exists, so that topic
	// publishes skip the lock when none does (the common case).
	anyTopics atomic.Bool
	// repl carries changes to a cluster's nodes (replicate.go).
	repl atomic.Pointer[replicatorBox]
}

// New returns an empty database that calls save with a snapshot after each
// change (nil: keep nothing).
func New(save func([]byte) error) *DB {
	if save == nil {
		save = func([]byte) error { return nil }
	}
	db := &DB{save: save}
	db.reset()
	return db
}

func (db *DB) reset() {
	db.users = map[string]*User{}
	db.vhosts = map[string]*VHost{}
	db.perms = map[pkey]*compiledPerm{}
	db.topics = map[pkey][]*compiledTopic{}
}

// Gen changes whenever the database does; callers cache checks under it.
func (db *DB) Gen() uint64 { return db.gen.Load() }

// snapshot is the saved form.
type snapshot struct {
	Users            []User            `json:"users"`
	VHosts           []VHost           `json:"vhosts"`
	Permissions      []Permission      `json:"permissions"`
	TopicPermissions []TopicPermission `json:"topic_permissions"`
}

// Load replaces the contents with a snapshot that save was given before.
func (db *DB) Load(data []byte) error {
	var s snapshot
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("decode access-control snapshot: %w", err)
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.apply(s)
}

func (db *DB) apply(s snapshot) error {
	db.reset()
	for i := range s.Users {
		u := s.Users[i]
		db.users[u.Name] = &u
	}
	for i := range s.VHosts {
		v := s.VHosts[i]
		db.vhosts[v.Name] = &v
	}
	for _, p := range s.Permissions {
		cp, err := compilePerm(p)
		if err != nil {
			return err
		}
		db.perms[pkey{p.VHost, p.User}] = cp
	}
	for _, p := range s.TopicPermissions {
		ct, err := compileTopic(p)
		if err != nil {
			return err
		}
		k := pkey{p.VHost, p.User}
		db.topics[k] = append(db.topics[k], ct)
	}
	db.anyTopics.Store(len(db.topics) > 0)
	db.gen.Add(1)
	return nil
}

func (db *DB) snapshot() snapshot {
	var s snapshot
	for _, u := range db.users {
		s.Users = append(s.Users, *u)
	}
	for _, v := range db.vhosts {
		s.VHosts = append(s.VHosts, *v)
	}
	for _, p := range db.perms {
		s.Permissions = append(s.Permissions, p.Permission)
	}
	for _, ts := range db.topics {
		for _, t := range ts {
			s.TopicPermissions = append(s.TopicPermissions, t.TopicPermission)
		}
	}
	slices.SortFunc(s.Users, func(a, b User) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(s.VHosts, func(a, b VHost) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(s.Permissions, func(a, b Permission) int {
		return cmpPair(a.VHost, a.User, b.VHost, b.User)
	})
	slices.SortFunc(s.TopicPermissions, func(a, b TopicPermission) int {
		if c := cmpPair(a.VHost, a.User, b.VHost, b.User); c != 0 {
			return c
		}
		return strings.Compare(a.Exchange, b.Exchange)
	})
	return s
}

func cmpPair(a1, a2, b1, b2 string) int {
	if c := strings.Compare(a1, b1); c != 0 {
		return c
	}
	return strings.Compare(a2, b2)
}

// change runs f under the write lock, saves the result, and rolls back to
// the previous state when f or the save fails.
func (db *DB) change(f func() error) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	before := db.snapshot()
	if err := f(); err != nil {
		db.apply(before)
		return err
	}
	data, err := json.Marshal(db.snapshot())
	if err == nil {
		err = db.save(data)
	}
	if err != nil {
		db.apply(before)
		return fmt.Errorf("save access control: %w", err)
	}
	db.anyTopics.Store(len(db.topics) > 0)
	db.gen.Add(1)
	return nil
}

// Seed sets up a first start as RabbitMQ does: vhost "/" and each given
// user as an administrator with full permissions on it.
func (db *DB) Seed(users map[string]string) error {
	return db.change(func() error {
		db.vhosts["/"] = &VHost{Name: "/", Description: "Default virtual host"}
		for name, pass := range users {
			h, err := HashPassword(HashSHA256, pass)
			if err != nil {
				return err
			}
			db.users[name] = &User{Name: name, PasswordHash: h, Hashing: HashSHA256, Tags: []string{"administrator"}}
			cp, _ := compilePerm(Permission{User: name, VHost: "/", Configure: ".*", Write: ".*", Read: ".*"})
			db.perms[pkey{"/", name}] = cp
		}
		return nil
	})
}

// Authenticate returns the user if name exists and password matches its
// hash.
func (db *DB) Authenticate(name, password string) (User, bool) {
	u, ok := db.User(name)
	if !ok || u.PasswordHash == nil {
		return User{}, false
	}
	if !checkHash(u.Hashing, u.PasswordHash, password) {
		return User{}, false
	}
	return u, true
}

// User returns the named user.
func (db *DB) User(name string) (User, bool) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	u, ok := db.users[name]
	if !ok {
		return User{}, false
	}
	return *u, true
}

// Users lists every user, sorted by name.
func (db *DB) Users() []User {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return db.snapshot().Users
}

// putUser creates or replaces a user (its permissions stay).
func (db *DB) putUser(u User) error {
	if err := checkName("user", u.Name, 0); err != nil {
		return err
	}
	if u.Hashing == "" {
		u.Hashing = HashSHA256
	}
	if _, err := hasher(u.Hashing); err != nil {
		return err
	}
	return db.change(func() error {
		db.users[u.Name] = &u
		return nil
	})
}

// SetPassword replaces a user's password, creating the user with tags if
// it does not exist.
func (db *DB) SetPassword(name, password string, tags []string) error {
	h, err := HashPassword(HashSHA256, password)
	if err != nil {
		return err
	}
	u, ok := db.User(name)
	if !ok {
		u = User{Name: name, Tags: tags}
	}
	u.PasswordHash, u.Hashing = h, HashSHA256
	return db.PutUser(u)
}

// deleteUser removes a user with its permissions.
func (db *DB) deleteUser(name string) error {
	return db.change(func() error {
		if _, ok := db.users[name]; !ok {
			return ErrNoUser
		}
		delete(db.users, name)
		for k := range db.perms {
			if k.user == name {
				delete(db.perms, k)
			}
		}
		for k := range db.topics {
			if k.user == name {
				delete(db.topics, k)
			}
		}
		return nil
	})
}

// VHost returns the named vhost's record.
func (db *DB) VHost(name string) (VHost, bool) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	v, ok := db.vhosts[name]
	if !ok {
		return VHost{}, false
	}
	return *v, true
}

// VHosts lists every vhost, sorted by name.
func (db *DB) VHosts() []VHost {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return db.snapshot().VHosts
}

// putVHost creates or updates a vhost's record.
func (db *DB) putVHost(v VHost) error {
	if err := checkName("vhost", v.Name, 255); err != nil {
		return err
	}
	return db.change(func() error {
		db.vhosts[v.Name] = &v
		return nil
	})
}

// checkName refuses an empty name, one longer than limit bytes (when
// limit > 0: a vhost name travels in AMQP's connection.open as a short
// string) and one that is not UTF-8, which JSON (the management API, a
// definitions export) could not carry unchanged.
func checkName(kind, name string, limit int) error {
	switch {
	case name == "":
		return fmt.Errorf("%s name is empty", kind)
	case limit > 0 && len(name) > limit:
		return fmt.Errorf("%s name is %d bytes long, longer than %d", kind, len(name), limit)
	case !utf8.ValidString(name):
		return fmt.Errorf("%s name is not valid UTF-8", kind)
	}
	return nil
}

// deleteVHost removes a vhost's record and every permission in it.
func (db *DB) deleteVHost(name string) error {
	return db.change(func() error {
		if _, ok := db.vhosts[name]; !ok {
			return ErrNoVHost
		}
		delete(db.vhosts, name)
		for k := range db.perms {
			if k.vhost == name {
				delete(db.perms, k)
			}
		}
		for k := range db.topics {
			if k.vhost == name {
				delete(db.topics, k)
			}
		}
		return nil
	})
}

// setVHostLimits replaces a vhost's limits; a negative value means none.
func (db *DB) setVHostLimits(name string, limits map[string]int64) error {
	return db.change(func() error {
		v, ok := db.vhosts[name]
		if !ok {
			return ErrNoVHost
		}
		v.Limits = cleanLimits(limits)
		return nil
	})
}

// setUserLimits replaces a user's limits; a negative value means none.
func (db *DB) setUserLimits(name string, limits map[string]int64) error {
	return db.change(func() error {
		u, ok := db.users[name]
		if !ok {
			return ErrNoUser
		}
		u.Limits = cleanLimits(limits)
		return nil
	})
}

func cleanLimits(in map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range in {
		if v >= 0 {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// anchorEmpty is RabbitMQ's rule: an empty pattern grants only the empty
// name (it is read as "^$").
func anchorEmpty(p string) string {
	if p == "" {
		return "^$"
	}
	return p
}

func compilePerm(p Permission) (*compiledPerm, error) {
	cp := &compiledPerm{Permission: p}
	for i, s := range []string{p.Configure, p.Write, p.Read} {
		re, err := regexp.Compile(anchorEmpty(s))
		if err != nil {
			return nil, fmt.Errorf("invalid %s permission pattern %q: %w", Perm(i), s, err)
		}
		cp.re[i] = re
	}
	return cp, nil
}

// hasVars reports whether a topic pattern uses {username}, {vhost} or
// {client_id}, which are expanded per check.
func hasVars(p string) bool { return strings.Contains(p, "{") }

func compileTopic(p TopicPermission) (*compiledTopic, error) {
	ct := &compiledTopic{TopicPermission: p}
	for _, perm := range []Perm{Write, Read} {
		s := anchorEmpty(p.Write)
		if perm == Read {
			s = anchorEmpty(p.Read)
		}
		// Validate with the variables replaced by a plain word.
		re, err := regexp.Compile(expandVars(s, Vars{"u", "v", "c"}))
		if err != nil {
			return nil, fmt.Errorf("invalid %s topic permission pattern %q: %w", perm, s, err)
		}
		if !hasVars(s) {
			ct.re[perm] = re
		}
	}
	return ct, nil
}

// Vars are the values of the variables a topic permission pattern may
// use: {username}, {vhost} and {client_id}.
type Vars struct{ Username, VHost, ClientID string }

// expandVars replaces the variables in p with their values, quoted for a
// regular expression.
func expandVars(p string, vars Vars) string {
	return strings.NewReplacer(
		"{username}", regexp.QuoteMeta(vars.Username),
		"{vhost}", regexp.QuoteMeta(vars.VHost),
		"{client_id}", regexp.QuoteMeta(vars.ClientID),
	).Replace(p)
}

// setPermission sets a user's permissions in a vhost; both must exist.
func (db *DB) setPermission(p Permission) error {
	cp, err := compilePerm(p)
	if err != nil {
		return err
	}
	return db.change(func() error {
		if err := db.userAndVHost(p.User, p.VHost); err != nil {
			return err
		}
		db.perms[pkey{p.VHost, p.User}] = cp
		return nil
	})
}

// userAndVHost checks that both exist; db.mu is held.
func (db *DB) userAndVHost(user, vhost string) error {
	if _, ok := db.users[user]; !ok {
		return ErrNoUser
	}
	if _, ok := db.vhosts[vhost]; !ok {
		return ErrNoVHost
	}
	return nil
}

// clearPermission removes a user's permissions in a vhost (absent is not
// an error).
func (db *DB) clearPermission(vhost, user string) error {
	return db.change(func() error {
		delete(db.perms, pkey{vhost, user})
		return nil
	})
}

// Permissions lists every permission, sorted by vhost and user.
func (db *DB) Permissions() []Permission {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return db.snapshot().Permissions
}

// Permission returns a user's permissions in a vhost.
func (db *DB) Permission(vhost, user string) (Permission, bool) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	cp, ok := db.perms[pkey{vhost, user}]
	if !ok {
		return Permission{}, false
	}
	return cp.Permission, true
}

// setTopicPermission sets a user's topic permission for one exchange of a
// vhost, replacing an earlier one for the same exchange.
func (db *DB) setTopicPermission(p TopicPermission) error {
	ct, err := compileTopic(p)
	if err != nil {
		return err
	}
	return db.change(func() error {
		if err := db.userAndVHost(p.User, p.VHost); err != nil {
			return err
		}
		k := pkey{p.VHost, p.User}
		ts := slices.DeleteFunc(slices.Clone(db.topics[k]), func(t *compiledTopic) bool { return t.Exchange == p.Exchange })
		db.topics[k] = append(ts, ct)
		return nil
	})
}

// clearTopicPermission removes a user's topic permissions in a vhost: for
// one exchange, or all of them when exchange is "".
func (db *DB) clearTopicPermission(vhost, user, exchange string) error {
	return db.change(func() error {
		k := pkey{vhost, user}
		if exchange == "" {
			delete(db.topics, k)
			return nil
		}
		ts := slices.DeleteFunc(slices.Clone(db.topics[k]), func(t *compiledTopic) bool { return t.Exchange == exchange })
		if len(ts) == 0 {
			delete(db.topics, k)
		} else {
			db.topics[k] = ts
		}
		return nil
	})
}

// TopicPermissions lists every topic permission, sorted.
func (db *DB) TopicPermissions() []TopicPermission {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return db.snapshot().TopicPermissions
}

// CanAccessVHost reports whether user has any permissions in vhost, which
// is what connection.open requires.
func (db *DB) CanAccessVHost(user, vhost string) bool {
	db.mu.RLock()
	defer db.mu.RUnlock()
	_, ok := db.perms[pkey{vhost, user}]
	return ok
}

// Check reports whether user may do p to the resource called name in vhost.
// As in RabbitMQ the pattern is an unanchored regular expression search,
// and an empty pattern matches only the empty name.
func (db *DB) Check(user, vhost string, p Perm, name string) bool {
	db.mu.RLock()
	cp := db.perms[pkey{vhost, user}]
	db.mu.RUnlock()
	return cp != nil && cp.re[p].MatchString(name)
}

// CheckTopic reports whether user may publish (Write) or bind (Read) with
// routingKey on the topic exchange of vhost. Without a topic permission
// for that exchange everything is allowed. vars fills the pattern's
// variables.
func (db *DB) CheckTopic(user, vhost, exchange string, p Perm, routingKey string, vars Vars) bool {
	if !db.anyTopics.Load() {
		return true
	}
	db.mu.RLock()
	ts := db.topics[pkey{vhost, user}]
	db.mu.RUnlock()
	for _, t := range ts {
		if t.Exchange != exchange {
			continue
		}
		if re := t.re[p]; re != nil {
			return re.MatchString(routingKey)
		}
		pat := anchorEmpty(t.Write)
		if p == Read {
			pat = anchorEmpty(t.Read)
		}
		re, err := regexp.Compile(expandVars(pat, vars))
		return err == nil && re.MatchString(routingKey)
	}
	return true
}
