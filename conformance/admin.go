package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"time"
)

// Admin manages users, vhosts and permissions on the target, as
// rabbitmqctl or the management HTTP API do. The access cases need it.
type Admin interface {
	AddUser(name, password string, tags ...string) error
	DeleteUser(name string) error
	AddVHost(name string) error
	DeleteVHost(name string) error
	SetPermissions(vhost, user, configure, write, read string) error
	SetTopicPermissions(vhost, user, exchange, write, read string) error
	// SetVHostLimit sets a vhost limit ("max-connections", "max-queues");
	// a negative value removes it.
	SetVHostLimit(vhost, name string, value int) error
}

// RabbitmqctlAdmin drives a broker through the rabbitmqctl command at path.
type RabbitmqctlAdmin string

func (a RabbitmqctlAdmin) run(args ...string) error {
	out, err := exec.Command(string(a), args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", a, strings.Join(args, " "), err, out)
	}
	return nil
}

func (a RabbitmqctlAdmin) AddUser(name, password string, tags ...string) error {
	if err := a.run("add_user", name, password); err != nil {
		return err
	}
	return a.run(append([]string{"set_user_tags", name}, tags...)...)
}
func (a RabbitmqctlAdmin) DeleteUser(name string) error  { return a.run("delete_user", name) }
func (a RabbitmqctlAdmin) AddVHost(name string) error    { return a.run("add_vhost", name) }
func (a RabbitmqctlAdmin) DeleteVHost(name string) error { return a.run("delete_vhost", name) }
func (a RabbitmqctlAdmin) SetPermissions(vhost, user, configure, write, read string) error {
	return a.run("set_permissions", "-p", vhost, user, configure, write, read)
}
func (a RabbitmqctlAdmin) SetTopicPermissions(vhost, user, exchange, write, read string) error {
	return a.run("set_topic_permissions", "-p", vhost, user, exchange, write, read)
}
func (a RabbitmqctlAdmin) SetVHostLimit(vhost, name string, value int) error {
	if value < 0 {
		return a.run("clear_vhost_limits", "-p", vhost)
	}
	return a.run("set_vhost_limits", "-p", vhost, fmt.Sprintf(`{"%s": %d}`, name, value))
}

// HTTPAdmin drives a broker through RabbitMQ's management HTTP API (which
// Warren serves too) at Base, e.g. "http://guest:guest@127.0.0.1:15672".
type HTTPAdmin struct{ Base string }

func (a HTTPAdmin) do(method, path string, body any) error {
	u, err := url.Parse(a.Base)
	if err != nil {
		return err
	}
	var rd io.Reader
	if body != nil {
		js, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(js)
	}
	req, err := http.NewRequest(method, strings.TrimSuffix(u.Scheme+"://"+u.Host, "/")+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if u.User != nil {
		pw, _ := u.User.Password()
		req.SetBasicAuth(u.User.Username(), pw)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, msg)
	}
	return nil
}

func esc(s string) string { return url.PathEscape(s) }

func (a HTTPAdmin) AddUser(name, password string, tags ...string) error {
	return a.do("PUT", "/api/users/"+esc(name), map[string]string{"password": password, "tags": strings.Join(tags, ",")})
}
func (a HTTPAdmin) DeleteUser(name string) error { return a.do("DELETE", "/api/users/"+esc(name), nil) }
func (a HTTPAdmin) AddVHost(name string) error   { return a.do("PUT", "/api/vhosts/"+esc(name), nil) }
func (a HTTPAdmin) DeleteVHost(name string) error {
	return a.do("DELETE", "/api/vhosts/"+esc(name), nil)
}
func (a HTTPAdmin) SetPermissions(vhost, user, configure, write, read string) error {
	return a.do("PUT", "/api/permissions/"+esc(vhost)+"/"+esc(user),
		map[string]string{"configure": configure, "write": write, "read": read})
}
func (a HTTPAdmin) SetTopicPermissions(vhost, user, exchange, write, read string) error {
	return a.do("PUT", "/api/topic-permissions/"+esc(vhost)+"/"+esc(user),
		map[string]string{"exchange": exchange, "write": write, "read": read})
}
func (a HTTPAdmin) SetVHostLimit(vhost, name string, value int) error {
	if value < 0 {
		return a.do("DELETE", "/api/vhost-limits/"+esc(vhost)+"/"+esc(name), nil)
	}
	return a.do("PUT", "/api/vhost-limits/"+esc(vhost)+"/"+esc(name), map[string]int{"value": value})
}
