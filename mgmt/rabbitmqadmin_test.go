package mgmt_test

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRabbitmqadmin drives the access-control endpoints with RabbitMQ's own
// client, rabbitmqadmin (Debian's rabbitmq-server ships it), when it is
// installed.
func TestRabbitmqadmin(t *testing.T) {
	bin, err := exec.LookPath("rabbitmqadmin")
	if err != nil {
		t.Skip("rabbitmqadmin not installed")
	}
	e := start(t)
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(e.base, "http://"))
	admin := func(user, pass string, args ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{"-H", host, "-P", port, "-u", user, "-p", pass}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	run := func(args ...string) string {
		t.Helper()
		out, err := admin("guest", "guest", args...)
		if err != nil {
			t.Fatalf("rabbitmqadmin %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	run("declare", "vhost", "name=shop")
	run("declare", "user", "name=carol", "password=pw", "tags=management")
	run("declare", "permission", "vhost=shop", "user=carol", "configure=^carol-", "write=.*", "read=.*")
	var users []map[string]any
	if err := json.Unmarshal([]byte(run("-f", "raw_json", "list", "users")), &users); err != nil {
		t.Fatal(err)
	}
	if len(users) != 2 || users[0]["name"] != "carol" || users[0]["tags"].([]any)[0] != "management" {
		t.Fatalf("users = %v", users)
	}
	if out := run("list", "permissions"); !strings.Contains(out, "^carol-") {
		t.Fatalf("permissions:\n%s", out)
	}
	if out := run("list", "vhosts", "name"); !strings.Contains(out, "shop") {
		t.Fatalf("vhosts:\n%s", out)
	}
	// carol may declare her queues in shop and nothing of the administrator's.
	if out, err := admin("carol", "pw", "-V", "shop", "declare", "queue", "name=carol-q"); err != nil {
		t.Fatalf("carol declares her queue: %v\n%s", err, out)
	}
	if out, err := admin("carol", "pw", "-V", "shop", "declare", "queue", "name=other"); err == nil || !strings.Contains(out, "Access refused") {
		t.Fatalf("carol declares another queue: %v\n%s", err, out)
	}
	if out, err := admin("carol", "pw", "list", "users"); err == nil || !strings.Contains(out, "Access refused: /api/users") {
		t.Fatalf("carol lists users: %v\n%s", err, out)
	}
	// export and import.
	file := filepath.Join(t.TempDir(), "defs.json")
	run("export", file)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"carol"`) || !strings.Contains(string(data), `"shop"`) {
		t.Fatalf("export: %s", data)
	}
	run("delete", "user", "name=carol")
	run("delete", "vhost", "name=shop")
	run("import", file)
	if c, err := e.dialAs("carol", "pw", "shop"); err != nil {
		t.Fatalf("carol after import: %v", err)
	} else {
		c.Close()
	}
	// A file RabbitMQ 3.10.8 exported: its user logs in with its password.
	run("import", filepath.Join("testdata", "rabbitmq", "export_definitions.json"))
	if c, err := e.dialAs("wcap-user", "s3cret", "wcap-vh"); err != nil {
		t.Fatalf("user imported from RabbitMQ: %v", err)
	} else {
		c.Close()
	}
}
