package main

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// dialAs logs in over AMQP to vhost of the broker at amqpURL as user.
func dialAs(amqpURL, user, pass, vhost string) (*amqp091.Connection, error) {
	u, err := url.Parse(amqpURL)
	if err != nil {
		return nil, err
	}
	u.User = url.UserPassword(user, pass)
	u.Path = "/" + url.PathEscape(vhost)
	return amqp091.Dial(u.String())
}

func TestAccessCommands(t *testing.T) {
	base, amqpURL := broker(t)

	ctl(t, base, "add_vhost", "shop", "--description", "the shop", "--tags", "prod,eu")
	ctl(t, base, "add_user", "alice", "s3cret", "--tags", "management")
	if _, err := ctlErr(base, "", "add_user", "alice", "x"); err == nil {
		t.Fatal("add_user of an existing user succeeded")
	}
	if _, err := dialAs(amqpURL, "alice", "s3cret", "shop"); err == nil {
		t.Fatal("alice logged in to shop without permissions")
	}
	ctl(t, base, "set_permissions", "-p", "shop", "alice", "^alice-", ".*", ".*")
	conn, err := dialAs(amqpURL, "alice", "s3cret", "shop")
	if err != nil {
		t.Fatalf("alice with permissions: %v", err)
	}
	conn.Close()

	ctl(t, base, "trace_on", "-p", "shop")
	vh := vhostJSON(t, base, "shop")
	if vh["tracing"] != true || vh["description"] != "the shop" {
		t.Fatalf("after trace_on: %v", vh)
	}
	ctl(t, base, "trace_off", "-p", "shop")
	if vh = vhostJSON(t, base, "shop"); vh["tracing"] != false || vh["description"] != "the shop" {
		t.Fatalf("after trace_off: %v", vh)
	}

	out := ctl(t, base, "list_users")
	if !strings.Contains(out, "alice") || !strings.Contains(out, "management") {
		t.Fatalf("list_users:\n%s", out)
	}
	out = ctl(t, base, "list_vhosts")
	if !strings.Contains(out, "shop") || !strings.Contains(out, "the shop") || !strings.Contains(out, "prod,eu") {
		t.Fatalf("list_vhosts:\n%s", out)
	}
	out = ctl(t, base, "list_permissions", "-p", "shop")
	if !strings.Contains(out, "alice") || !strings.Contains(out, "^alice-") {
		t.Fatalf("list_permissions:\n%s", out)
	}
	var perms []map[string]any
	if err := json.Unmarshal([]byte(ctl(t, base, "--format", "json", "list_permissions", "--vhost", "shop")), &perms); err != nil {
		t.Fatal(err)
	}
	if len(perms) != 2 { // guest got full permissions by creating the vhost
		t.Fatalf("permissions in shop: %v", perms)
	}

	// Tags change keeps the password; a password change keeps the tags.
	ctl(t, base, "set_user_tags", "alice", "monitoring", "policymaker")
	if conn, err := dialAs(amqpURL, "alice", "s3cret", "shop"); err != nil {
		t.Fatalf("after set_user_tags: %v", err)
	} else {
		conn.Close()
	}
	ctl(t, base, "change_password", "alice", "n3w")
	if _, err := dialAs(amqpURL, "alice", "s3cret", "shop"); err == nil {
		t.Fatal("old password still works")
	}
	out = ctl(t, base, "--user", "alice", "--password", "n3w", "--format", "json", "list_vhosts")
	if !strings.Contains(out, `"shop"`) {
		t.Fatalf("alice's vhosts: %s", out)
	}
	if out, err := ctlErr(base, "", "--user", "alice", "--password", "n3w", "list_users"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("non-administrator list_users: %v %s", err, out)
	}

	ctl(t, base, "set_topic_permissions", "-p", "shop", "alice", "amq.topic", "^orders\\.", ".*")
	out = ctl(t, base, "list_topic_permissions", "-p", "shop")
	if !strings.Contains(out, "amq.topic") || !strings.Contains(out, `^orders\.`) {
		t.Fatalf("list_topic_permissions:\n%s", out)
	}
	ctl(t, base, "clear_topic_permissions", "-p", "shop", "alice")
	if out := ctl(t, base, "list_topic_permissions", "-p", "shop"); strings.Contains(out, "alice") {
		t.Fatalf("after clear_topic_permissions:\n%s", out)
	}

	ctl(t, base, "set_vhost_limits", "-p", "shop", `{"max-connections": 1, "max-queues": 10}`)
	out = ctl(t, base, "list_vhost_limits", "-p", "shop")
	if !strings.Contains(out, `"max-connections":1`) || !strings.Contains(out, `"max-queues":10`) {
		t.Fatalf("list_vhost_limits:\n%s", out)
	}
	c1, err := dialAs(amqpURL, "alice", "n3w", "shop")
	if err != nil {
		t.Fatal(err)
	}
	if c2, err := dialAs(amqpURL, "alice", "n3w", "shop"); err == nil {
		c2.Close()
		t.Fatal("second connection admitted past max-connections 1")
	}
	c1.Close()
	ctl(t, base, "set_vhost_limits", "-p", "shop", `{"max-connections": -1}`)
	if out := ctl(t, base, "list_vhost_limits", "-p", "shop"); strings.Contains(out, "max-connections") || !strings.Contains(out, "max-queues") {
		t.Fatalf("after removing max-connections:\n%s", out)
	}
	ctl(t, base, "clear_vhost_limits", "-p", "shop")
	if out := ctl(t, base, "list_vhost_limits", "--global"); strings.Contains(out, "shop") {
		t.Fatalf("after clear_vhost_limits:\n%s", out)
	}

	ctl(t, base, "clear_permissions", "-p", "shop", "alice")
	if _, err := dialAs(amqpURL, "alice", "n3w", "shop"); err == nil {
		t.Fatal("login after clear_permissions")
	}
	ctl(t, base, "delete_vhost", "shop")
	ctl(t, base, "delete_user", "alice")
	if out := ctl(t, base, "list_users"); strings.Contains(out, "alice") {
		t.Fatalf("after delete_user:\n%s", out)
	}
	if _, err := ctlErr(base, "", "delete_user", "alice"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("deleting a missing user: %v", err)
	}
}

// vhostJSON returns vhost name as list_vhosts --format json shows it.
func vhostJSON(t *testing.T, base, name string) map[string]any {
	t.Helper()
	var vs []map[string]any
	if err := json.Unmarshal([]byte(ctl(t, base, "--format", "json", "list_vhosts")), &vs); err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if v["name"] == name {
			return v
		}
	}
	t.Fatalf("no vhost %s in %v", name, vs)
	return nil
}
