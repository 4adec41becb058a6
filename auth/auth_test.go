package auth

import (
	"errors"
	"strings"
	"testing"
)

// A hash that RabbitMQ 3.10 wrote for the password "s3cret"
// (rabbitmqctl add_user, then export_definitions).
const rabbitHash = "+jMzQ2205MqPAHeo5n6chk9xCrVur17N31c3lUDMTTsEslOl"

func TestRabbitMQHashImports(t *testing.T) {
	h, err := DecodeHash(rabbitHash)
	if err != nil {
		t.Fatal(err)
	}
	db := New(nil)
	if err := db.PutUser(User{Name: "u", PasswordHash: h, Hashing: HashSHA256}); err != nil {
		t.Fatal(err)
	}
	if _, ok := db.Authenticate("u", "s3cret"); !ok {
		t.Fatal("RabbitMQ's hash of s3cret did not authenticate s3cret")
	}
	if _, ok := db.Authenticate("u", "s3cre"); ok {
		t.Fatal("wrong password authenticated")
	}
}

func TestHashRoundTripAllAlgorithms(t *testing.T) {
	for _, alg := range []string{HashSHA256, HashSHA512, HashMD5} {
		h, err := HashPassword(alg, "pw")
		if err != nil {
			t.Fatal(err)
		}
		h2, _ := HashPassword(alg, "pw")
		if EncodeHash(h) == EncodeHash(h2) {
			t.Fatalf("%s: two hashes of one password are equal: no salt", alg)
		}
		if !checkHash(alg, h, "pw") || checkHash(alg, h, "px") {
			t.Fatalf("%s: check does not tell the right password from a wrong one", alg)
		}
	}
	if _, err := HashPassword("rabbit_password_hashing_rot13", "pw"); err == nil {
		t.Fatal("unknown algorithm accepted")
	}
}

func TestPermissionMatching(t *testing.T) {
	db := New(nil)
	must(t, db.Seed(map[string]string{"admin": "x"}))
	must(t, db.SetPassword("bob", "pw", nil))
	if db.CanAccessVHost("bob", "/") {
		t.Fatal("a user without permissions may open the vhost")
	}
	must(t, db.SetPermission(Permission{User: "bob", VHost: "/", Configure: "^bob-", Write: "", Read: "amq\\.|bob"}))
	cases := []struct {
		p    Perm
		name string
		want bool
	}{
		{Configure, "bob-q", true},
		{Configure, "q-bob-", false}, // anchored by the pattern
		{Write, "", true},            // empty pattern grants the empty name only
		{Write, "x", false},
		{Read, "amq.topic", true},
		{Read, "my-bob-q", true}, // unanchored search
		{Read, "other", false},
	}
	for _, c := range cases {
		if got := db.Check("bob", "/", c.p, c.name); got != c.want {
			t.Errorf("Check(%s, %q) = %v, want %v", c.p, c.name, got, c.want)
		}
	}
	if db.Check("bob", "other", Read, "bob") {
		t.Error("permission leaked to another vhost")
	}
	if err := db.SetPermission(Permission{User: "bob", VHost: "/", Configure: "(", Write: "", Read: ""}); err == nil {
		t.Error("invalid pattern accepted")
	}
	if err := db.SetPermission(Permission{User: "nobody", VHost: "/"}); !errors.Is(err, ErrNoUser) {
		t.Errorf("permission for a missing user: %v", err)
	}
}

func TestTopicPermissions(t *testing.T) {
	db := New(nil)
	must(t, db.Seed(map[string]string{"bob": "pw"}))
	if !db.CheckTopic("bob", "/", "amq.topic", Write, "anything", Vars{}) {
		t.Fatal("no topic permission must allow everything")
	}
	must(t, db.SetTopicPermission(TopicPermission{User: "bob", VHost: "/", Exchange: "amq.topic", Write: "^{username}\\.", Read: "^public\\."}))
	vars := Vars{Username: "bob", VHost: "/"}
	for _, c := range []struct {
		p    Perm
		key  string
		want bool
	}{
		{Write, "bob.x", true},
		{Write, "alice.x", false},
		{Read, "public.x", true},
		{Read, "bob.x", false},
	} {
		if got := db.CheckTopic("bob", "/", "amq.topic", c.p, c.key, vars); got != c.want {
			t.Errorf("CheckTopic(%s, %q) = %v, want %v", c.p, c.key, got, c.want)
		}
	}
	if !db.CheckTopic("bob", "/", "other.topic", Write, "alice.x", vars) {
		t.Error("a topic permission on one exchange restricted another")
	}
	must(t, db.ClearTopicPermission("/", "bob", "amq.topic"))
	if !db.CheckTopic("bob", "/", "amq.topic", Write, "alice.x", vars) {
		t.Error("cleared topic permission still applies")
	}
}

func TestSnapshotRoundTripAndRollback(t *testing.T) {
	var saved []byte
	fail := false
	db := New(func(b []byte) error {
		if fail {
			return errors.New("disk full")
		}
		saved = b
		return nil
	})
	must(t, db.Seed(map[string]string{"guest": "guest"}))
	must(t, db.PutVHost(VHost{Name: "v1", Description: "d"}))
	must(t, db.SetPermission(Permission{User: "guest", VHost: "v1", Configure: ".*", Write: ".*", Read: ".*"}))
	must(t, db.SetVHostLimits("v1", map[string]int64{"max-queues": 3, "max-connections": -1}))
	fail = true
	if err := db.DeleteVHost("v1"); err == nil {
		t.Fatal("a change whose save failed reported success")
	}
	if _, ok := db.VHost("v1"); !ok || !db.CanAccessVHost("guest", "v1") {
		t.Fatal("a failed save did not roll the change back")
	}
	fail = false

	db2 := New(nil)
	must(t, db2.Load(saved))
	v, ok := db2.VHost("v1")
	if !ok || v.Description != "d" || v.Limits["max-queues"] != 3 {
		t.Fatalf("reloaded vhost = %+v", v)
	}
	if _, set := v.Limits["max-connections"]; set {
		t.Fatal("a negative limit was kept instead of meaning no limit")
	}
	if _, ok := db2.Authenticate("guest", "guest"); !ok {
		t.Fatal("reloaded user does not authenticate")
	}
	if !db2.Check("guest", "v1", Configure, "q") {
		t.Fatal("reloaded permission lost")
	}
	must(t, db2.DeleteUser("guest"))
	if db2.CanAccessVHost("guest", "/") {
		t.Fatal("deleting a user kept its permissions")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestNamesMustSurviveJSON(t *testing.T) {
	db := New(nil)
	long := strings.Repeat("v", 256)
	if err := db.PutVHost(VHost{Name: long}); err == nil || !strings.Contains(err.Error(), "longer than 255") {
		t.Fatalf("256-byte vhost name: %v", err)
	}
	if err := db.PutVHost(VHost{Name: long[:255]}); err != nil {
		t.Fatalf("255-byte vhost name: %v", err)
	}
	if err := db.PutVHost(VHost{Name: "bad\xff"}); err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Fatalf("vhost name not UTF-8: %v", err)
	}
	if err := db.PutUser(User{Name: "bad\xc3"}); err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Fatalf("user name not UTF-8: %v", err)
	}
	if err := db.PutVHost(VHost{Name: "Zürich"}); err != nil {
		t.Fatalf("UTF-8 vhost name: %v", err)
	}
}
