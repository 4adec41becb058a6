package auth

import (
	"encoding/json"
	"errors"
	"slices"
)

// Replication (a cluster's metadata group, issue 14): with a Replicator
// set, each change is handed to it as an Op instead of being made; the
// Replicator carries the Op to every node, where Apply makes it. Apply is
// deterministic: an Op carries everything the change needs (a password
// is hashed, with its salt, before it becomes an Op).

// Op is one change of the database.
type Op struct {
	Kind     OpKind           `json:"kind"`
	User     *User            `json:"user,omitempty"`
	VHost    *VHost           `json:"vhost,omitempty"`
	Perm     *Permission      `json:"perm,omitempty"`
	Topic    *TopicPermission `json:"topic,omitempty"`
	Name     string           `json:"name,omitempty"`
	Other    string           `json:"other,omitempty"` // the user of ClearPermission, ClearTopicPermission
	Exchange string           `json:"exchange,omitempty"`
	Limits   map[string]int64 `json:"limits,omitempty"`
	// Seed: the users of a first start, hashed.
	Seed []User `json:"seed,omitempty"`
}

// OpKind names a change.
type OpKind string

// The changes.
const (
	OpPutUser     OpKind = "put_user"
	OpDeleteUser  OpKind = "delete_user"
	OpPutVHost    OpKind = "put_vhost"
	OpDeleteVHost OpKind = "delete_vhost"
	OpVHostLimits OpKind = "vhost_limits"
	OpUserLimits  OpKind = "user_limits"
	OpSetPerm     OpKind = "set_permission"
	OpClearPerm   OpKind = "clear_permission"
	OpSetTopic    OpKind = "set_topic_permission"
	OpClearTopic  OpKind = "clear_topic_permission"
	OpSeed        OpKind = "seed"
)

// Replicator carries an Op to every node and returns the result of its
// Apply on this one.
type Replicator func(Op) error

type replicatorBox struct{ r Replicator }

// SetReplicator makes every later change an Op handed to r (nil: changes
// are made here again).
func (db *DB) SetReplicator(r Replicator) {
	if r == nil {
		db.repl.Store(nil)
		return
	}
	db.repl.Store(&replicatorBox{r})
}

func (db *DB) replicate(op Op) (error, bool) {
	b := db.repl.Load()
	if b == nil {
		return nil, false
	}
	return b.r(op), true
}

// Apply makes op here, as the change it names would without a
// Replicator.
func (db *DB) Apply(op Op) error {
	switch op.Kind {
	case OpPutUser:
		return db.putUser(*op.User)
	case OpDeleteUser:
		return db.deleteUser(op.Name)
	case OpPutVHost:
		return db.putVHost(*op.VHost)
	case OpDeleteVHost:
		return db.deleteVHost(op.Name)
	case OpVHostLimits:
		return db.setVHostLimits(op.Name, op.Limits)
	case OpUserLimits:
		return db.setUserLimits(op.Name, op.Limits)
	case OpSetPerm:
		return db.setPermission(*op.Perm)
	case OpClearPerm:
		return db.clearPermission(op.Name, op.Other)
	case OpSetTopic:
		return db.setTopicPermission(*op.Topic)
	case OpClearTopic:
		return db.clearTopicPermission(op.Name, op.Other, op.Exchange)
	case OpSeed:
		return db.seedHashed(op.Seed)
	}
	return errUnknownOp
}

var errUnknownOp = errors.New("unknown access-control change")

// SeedOp is the Op of Seed: users hashed here, each an administrator
// with full permissions on vhost "/".
func SeedOp(users map[string]string) (Op, error) {
	op := Op{Kind: OpSeed}
	for _, name := range sortedKeys(users) {
		h, err := HashPassword(HashSHA256, users[name])
		if err != nil {
			return Op{}, err
		}
		op.Seed = append(op.Seed, User{Name: name, PasswordHash: h, Hashing: HashSHA256, Tags: []string{"administrator"}})
	}
	return op, nil
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func (db *DB) seedHashed(users []User) error {
	return db.change(func() error {
		db.vhosts["/"] = &VHost{Name: "/", Description: "Default virtual host"}
		for i := range users {
			u := users[i]
			db.users[u.Name] = &u
			cp, _ := compilePerm(Permission{User: u.Name, VHost: "/", Configure: ".*", Write: ".*", Read: ".*"})
			db.perms[pkey{"/", u.Name}] = cp
		}
		return nil
	})
}

// Export is the whole database as Load reads it.
func (db *DB) Export() ([]byte, error) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return json.Marshal(db.snapshot())
}

// Empty reports whether the database has no user and no vhost.
func (db *DB) Empty() bool {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return len(db.users) == 0 && len(db.vhosts) == 0
}

// The changes: each an Op when a Replicator is set.

// PutUser creates or replaces a user (its permissions stay).
func (db *DB) PutUser(u User) error {
	if err := checkName("user", u.Name, 0); err != nil {
		return err
	}
	if err, ok := db.replicate(Op{Kind: OpPutUser, User: &u}); ok {
		return err
	}
	return db.putUser(u)
}

// DeleteUser removes a user with its permissions.
func (db *DB) DeleteUser(name string) error {
	if err, ok := db.replicate(Op{Kind: OpDeleteUser, Name: name}); ok {
		return err
	}
	return db.deleteUser(name)
}

// PutVHost creates or updates a vhost's record.
func (db *DB) PutVHost(v VHost) error {
	if err := checkName("vhost", v.Name, 255); err != nil {
		return err
	}
	if err, ok := db.replicate(Op{Kind: OpPutVHost, VHost: &v}); ok {
		return err
	}
	return db.putVHost(v)
}

// DeleteVHost removes a vhost's record and every permission in it.
func (db *DB) DeleteVHost(name string) error {
	if err, ok := db.replicate(Op{Kind: OpDeleteVHost, Name: name}); ok {
		return err
	}
	return db.deleteVHost(name)
}

// SetVHostLimits replaces a vhost's limits; a negative value means none.
func (db *DB) SetVHostLimits(name string, limits map[string]int64) error {
	if err, ok := db.replicate(Op{Kind: OpVHostLimits, Name: name, Limits: limits}); ok {
		return err
	}
	return db.setVHostLimits(name, limits)
}

// SetUserLimits replaces a user's limits; a negative value means none.
func (db *DB) SetUserLimits(name string, limits map[string]int64) error {
	if err, ok := db.replicate(Op{Kind: OpUserLimits, Name: name, Limits: limits}); ok {
		return err
	}
	return db.setUserLimits(name, limits)
}

// SetPermission sets a user's permissions in a vhost; both must exist.
func (db *DB) SetPermission(p Permission) error {
	if _, err := compilePerm(p); err != nil {
		return err
	}
	if err, ok := db.replicate(Op{Kind: OpSetPerm, Perm: &p}); ok {
		return err
	}
	return db.setPermission(p)
}

// ClearPermission removes a user's permissions in a vhost (absent is not
// an error).
func (db *DB) ClearPermission(vhost, user string) error {
	if err, ok := db.replicate(Op{Kind: OpClearPerm, Name: vhost, Other: user}); ok {
		return err
	}
	return db.clearPermission(vhost, user)
}

// SetTopicPermission sets a user's topic permission for one exchange of a
// vhost, replacing an earlier one for the same exchange.
func (db *DB) SetTopicPermission(p TopicPermission) error {
	if _, err := compileTopic(p); err != nil {
		return err
	}
	if err, ok := db.replicate(Op{Kind: OpSetTopic, Topic: &p}); ok {
		return err
	}
	return db.setTopicPermission(p)
}

// ClearTopicPermission removes a user's topic permissions in a vhost: for
// one exchange, or all of them when exchange is "".
func (db *DB) ClearTopicPermission(vhost, user, exchange string) error {
	if err, ok := db.replicate(Op{Kind: OpClearTopic, Name: vhost, Other: user, Exchange: exchange}); ok {
		return err
	}
	return db.clearTopicPermission(vhost, user, exchange)
}
