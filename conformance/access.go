package conformance

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Access control: users, vhosts and permissions. These cases need
// Target.Admin; each makes its own user (and vhost) and removes it.

// acVHost returns the vhost of the target's URL ("/" by default).
func acVHost(tg Target) string {
	u, err := url.Parse(tg.URL)
	if err != nil || u.Path == "" || u.Path == "/" {
		return "/"
	}
	v, _ := url.PathUnescape(strings.TrimPrefix(u.Path, "/"))
	return v
}

// acURL returns the target's URL with other credentials and vhost.
func acURL(tg Target, user, pass, vhost string) string {
	u, _ := url.Parse(tg.URL)
	u.User = url.UserPassword(user, pass)
	u.Path = "/" + vhost
	u.RawPath = "/" + url.PathEscape(vhost)
	return u.String()
}

// acUser creates a fresh user with the given permissions in the target's
// vhost (no permissions when perms is nil) and returns a target that logs
// in as that user.
func acUser(t T, tg Target, perms []string, tags ...string) (Target, string) {
	t.Helper()
	name := clUniq("user")
	pass := "pw-" + name
	if err := tg.Admin.AddUser(name, pass, tags...); err != nil {
		t.Fatalf("add user: %v", err)
	}
	t.Cleanup(func() { tg.Admin.DeleteUser(name) })
	if perms != nil {
		if err := tg.Admin.SetPermissions(acVHost(tg), name, perms[0], perms[1], perms[2]); err != nil {
			t.Fatalf("set permissions: %v", err)
		}
	}
	out := tg
	out.URL = acURL(tg, name, pass, acVHost(tg))
	return out, name
}

// acNewVHost creates a fresh vhost where the target's user has full
// permissions, removed when the case ends, and returns a target that
// connects to it.
func acNewVHost(t T, tg Target) (Target, string) {
	t.Helper()
	vh := clUniq("vhost")
	if err := tg.Admin.AddVHost(vh); err != nil {
		t.Fatalf("add vhost: %v", err)
	}
	t.Cleanup(func() { tg.Admin.DeleteVHost(vh) })
	if err := tg.Admin.SetPermissions(vh, clUrlUser(tg), ".*", ".*", ".*"); err != nil {
		t.Fatalf("set permissions: %v", err)
	}
	u, _ := url.Parse(tg.URL)
	pw, _ := u.User.Password()
	other := tg
	other.URL = acURL(tg, clUrlUser(tg), pw, vh)
	return other, vh
}

// acExpectRefused checks a channel-level 403 with RabbitMQ's text
// "ACCESS_REFUSED - access to <kind> '<name>' in vhost '<vhost>' refused
// for user '<user>'" (perm is which permission was missing; RabbitMQ's text
// does not say).
func acExpectRefused(t T, conn *amqp.Connection, err error, perm, kind, name, vhost, user string) {
	t.Helper()
	ae := clExpectErr(t, conn, err, clCodeAccessRefused, clChanClose)
	t.Logf("missing %s permission", perm)
	want := fmt.Sprintf("ACCESS_REFUSED - access to %s '%s' in vhost '%s' refused for user '%s'", kind, name, vhost, user)
	if ae.Reason != want {
		t.Errorf("reply text %q, want %q", ae.Reason, want)
	}
}

// acCase registers an access case that is skipped without Target.Admin.
func acCase(name string, run func(t T, tg Target)) Case {
	return Case{Name: "access/" + name, Run: func(t T, tg Target) {
		if tg.Admin == nil {
			return
		}
		run(t, tg)
	}}
}

func init() {
	register(
		acCase("login-wrong-password-403", func(t T, tg Target) {
			utg, _ := acUser(t, tg, []string{".*", ".*", ".*"})
			u, _ := url.Parse(utg.URL)
			u.User = url.UserPassword(u.User.Username(), "wrong")
			utg.URL = u.String()
			_, _, _, err := clConnect(utg, clWaitTimeout)
			if !errors.Is(err, amqp.ErrCredentials) {
				var ae *amqp.Error
				if !errors.As(err, &ae) || ae.Code != clCodeAccessRefused {
					t.Fatalf("login with a wrong password: %v, want 403 ACCESS_REFUSED", err)
				}
			}
		}),
		acCase("login-unknown-user-403", func(t T, tg Target) {
			utg := tg
			utg.URL = acURL(tg, clUniq("nobody"), "x", acVHost(tg))
			_, _, _, err := clConnect(utg, clWaitTimeout)
			if !errors.Is(err, amqp.ErrCredentials) {
				var ae *amqp.Error
				if !errors.As(err, &ae) || ae.Code != clCodeAccessRefused {
					t.Fatalf("login as an unknown user: %v, want 403 ACCESS_REFUSED", err)
				}
			}
		}),
		acCase("vhost-without-permissions-530", func(t T, tg Target) {
			utg, user := acUser(t, tg, nil)
			_, _, _, err := clConnect(utg, clWaitTimeout)
			var ae *amqp.Error
			if !errors.As(err, &ae) || ae.Code != clCodeNotAllowed {
				t.Fatalf("connection.open without permissions: %v, want 530 NOT_ALLOWED", err)
			}
			want := fmt.Sprintf("NOT_ALLOWED - access to vhost '%s' refused for user '%s'", acVHost(tg), user)
			if ae.Reason != want {
				t.Errorf("reply text %q, want %q", ae.Reason, want)
			}
		}),
		acCase("vhost-missing-530", func(t T, tg Target) {
			utg, _ := acUser(t, tg, []string{".*", ".*", ".*"})
			vh := clUniq("vhost")
			u, _ := url.Parse(utg.URL)
			pw, _ := u.User.Password()
			utg.URL = acURL(tg, u.User.Username(), pw, vh)
			_, _, _, err := clConnect(utg, clWaitTimeout)
			var ae *amqp.Error
			if !errors.As(err, &ae) || ae.Code != clCodeNotAllowed {
				t.Fatalf("connection.open to a missing vhost: %v, want 530 NOT_ALLOWED", err)
			}
			if want := fmt.Sprintf("NOT_ALLOWED - vhost %s not found", vh); ae.Reason != want {
				t.Errorf("reply text %q, want %q", ae.Reason, want)
			}
		}),
		acCase("vhost-isolation", func(t T, tg Target) {
			// A queue in one vhost is invisible from another.
			other, vh := acNewVHost(t, tg)
			oconn, och := clDialChan(t, other)
			q := clUniq("iso")
			if _, err := och.QueueDeclare(q, false, false, false, false, nil); err != nil {
				t.Fatalf("declare in the new vhost: %v", err)
			}
			clPublish(t, och, "", q, clBody("in-"+vh))
			clSyncChan(t, och)
			conn := clDial(t, tg)
			if clQueueExists(t, conn, q) {
				t.Fatalf("queue %s of vhost %s is visible in vhost %s", q, vh, acVHost(tg))
			}
			if got := clGetWait(t, och, q, true); string(got.Body) != "in-"+vh {
				t.Fatalf("got %q", got.Body)
			}
			_ = oconn
		}),
		acCase("vhost-delete-closes-connections", func(t T, tg Target) {
			other, vh := acNewVHost(t, tg)
			conn := clDial(t, other)
			closes := conn.NotifyClose(make(chan *amqp.Error, 1))
			if err := tg.Admin.DeleteVHost(vh); err != nil {
				t.Fatalf("delete vhost: %v", err)
			}
			e := <-closes
			if e == nil || e.Code != 320 {
				t.Fatalf("connection to a deleted vhost closed with %v, want 320 CONNECTION_FORCED", e)
			}
		}),

		acCase("user-delete-closes-connections", func(t T, tg Target) {
			utg, user := acUser(t, tg, []string{".*", ".*", ".*"})
			conn := clDial(t, utg)
			closes := conn.NotifyClose(make(chan *amqp.Error, 1))
			if err := tg.Admin.DeleteUser(user); err != nil {
				t.Fatalf("delete user: %v", err)
			}
			e := <-closes
			if want := fmt.Sprintf("CONNECTION_FORCED - user '%s' is deleted", user); e == nil || e.Code != 320 || e.Reason != want {
				t.Fatalf("connection of a deleted user closed with %v, want 320 %q", e, want)
			}
		}),
		acCase("permissions-cleared-keeps-connection-refuses-next-method", func(t T, tg Target) {
			utg, user := acUser(t, tg, []string{".*", ".*", ".*"})
			conn, ch := clDialChan(t, utg)
			if err := tg.Admin.SetPermissions(acVHost(tg), user, "^nothing$", "^nothing$", "^nothing$"); err != nil {
				t.Fatalf("set permissions: %v", err)
			}
			q := clUniq("q")
			_, err := ch.QueueDeclare(q, false, true, true, false, nil)
			acExpectRefused(t, conn, err, "configure", "queue", q, acVHost(tg), user)
		}),
		acCase("queue-declare-needs-configure", func(t T, tg Target) {
			utg, user := acUser(t, tg, []string{"^allowed-", ".*", ".*"})
			conn, ch := clDialChan(t, utg)
			ok := "allowed-" + clUniq("q")
			clCleanupQueue(t, tg, ok)
			if _, err := ch.QueueDeclare(ok, false, false, false, false, nil); err != nil {
				t.Fatalf("declare a permitted queue: %v", err)
			}
			bad := clUniq("q")
			_, err := ch.QueueDeclare(bad, false, false, false, false, nil)
			acExpectRefused(t, conn, err, "configure", "queue", bad, acVHost(tg), user)
		}),
		acCase("queue-declare-passive-needs-no-configure", func(t T, tg Target) {
			_, ach := clDialChan(t, tg)
			q := clDeclareQueue(t, tg, ach, "q", nil)
			utg, _ := acUser(t, tg, []string{"", "", ""})
			_, ch := clDialChan(t, utg)
			if _, err := ch.QueueDeclarePassive(q, false, false, false, false, nil); err != nil {
				t.Fatalf("passive declare without configure permission: %v", err)
			}
		}),
		acCase("queue-delete-needs-configure", func(t T, tg Target) {
			_, ach := clDialChan(t, tg)
			q := clDeclareQueue(t, tg, ach, "q", nil)
			utg, user := acUser(t, tg, []string{"", ".*", ".*"})
			conn, ch := clDialChan(t, utg)
			_, err := ch.QueueDelete(q, false, false, false)
			acExpectRefused(t, conn, err, "configure", "queue", q, acVHost(tg), user)
		}),
		acCase("queue-purge-needs-read", func(t T, tg Target) {
			_, ach := clDialChan(t, tg)
			q := clDeclareQueue(t, tg, ach, "q", nil)
			utg, user := acUser(t, tg, []string{".*", ".*", ""})
			conn, ch := clDialChan(t, utg)
			_, err := ch.QueuePurge(q, false)
			acExpectRefused(t, conn, err, "read", "queue", q, acVHost(tg), user)
		}),
		acCase("exchange-declare-needs-configure", func(t T, tg Target) {
			utg, user := acUser(t, tg, []string{"^allowed-", ".*", ".*"})
			conn, ch := clDialChan(t, utg)
			bad := clUniq("x")
			err := ch.ExchangeDeclare(bad, "direct", false, false, false, false, nil)
			acExpectRefused(t, conn, err, "configure", "exchange", bad, acVHost(tg), user)
		}),
		acCase("exchange-delete-needs-configure", func(t T, tg Target) {
			_, ach := clDialChan(t, tg)
			x := clDeclareExchange(t, tg, ach, "direct", nil)
			utg, user := acUser(t, tg, []string{"", ".*", ".*"})
			conn, ch := clDialChan(t, utg)
			err := ch.ExchangeDelete(x, false, false)
			acExpectRefused(t, conn, err, "configure", "exchange", x, acVHost(tg), user)
		}),
		acCase("exchange-declare-alternate-needs-write-and-read", func(t T, tg Target) {
			// Naming an alternate exchange needs write on it and read on
			// the declared exchange.
			_, ach := clDialChan(t, tg)
			ae := clDeclareExchange(t, tg, ach, "fanout", nil)
			utg, user := acUser(t, tg, []string{".*", "^nothing$", ".*"})
			conn, ch := clDialChan(t, utg)
			x := clUniq("x")
			clCleanupExchange(t, tg, x)
			err := ch.ExchangeDeclare(x, "direct", false, false, false, false, amqp.Table{"alternate-exchange": ae})
			acExpectRefused(t, conn, err, "write", "exchange", ae, acVHost(tg), user)
		}),
		acCase("publish-needs-write", func(t T, tg Target) {
			_, ach := clDialChan(t, tg)
			x := clDeclareExchange(t, tg, ach, "direct", nil)
			utg, user := acUser(t, tg, []string{".*", "^nothing$", ".*"})
			conn, ch := clDialChan(t, utg)
			closes := clNotifyClose(ch)
			clPublish(t, ch, x, "k", clBody("m"))
			e := clExpectAsyncClose(t, conn, closes, clCodeAccessRefused, clChanClose)
			want := fmt.Sprintf("ACCESS_REFUSED - access to exchange '%s' in vhost '%s' refused for user '%s'", x, acVHost(tg), user)
			if e.Reason != want {
				t.Errorf("reply text %q, want %q", e.Reason, want)
			}
		}),
		acCase("publish-default-exchange-is-amq-default", func(t T, tg Target) {
			// Permissions see the default exchange as "amq.default"; an
			// empty write pattern does not cover it.
			_, ach := clDialChan(t, tg)
			q := clDeclareQueue(t, tg, ach, "q", nil)
			utg, _ := acUser(t, tg, []string{"", "^amq\\.default$", ".*"})
			_, ch := clDialChan(t, utg)
			clPublish(t, ch, "", q, clBody("m"))
			if got := clGetWait(t, ch, q, true); string(got.Body) != "m" {
				t.Fatalf("got %q", got.Body)
			}
			utg2, user2 := acUser(t, tg, []string{"", "", ".*"})
			conn2, ch2 := clDialChan(t, utg2)
			closes := clNotifyClose(ch2)
			clPublish(t, ch2, "", q, clBody("m"))
			e := clExpectAsyncClose(t, conn2, closes, clCodeAccessRefused, clChanClose)
			want := fmt.Sprintf("ACCESS_REFUSED - access to exchange 'amq.default' in vhost '%s' refused for user '%s'", acVHost(tg), user2)
			if e.Reason != want {
				t.Errorf("reply text %q, want %q", e.Reason, want)
			}
		}),
		acCase("consume-needs-read", func(t T, tg Target) {
			_, ach := clDialChan(t, tg)
			q := clDeclareQueue(t, tg, ach, "q", nil)
			utg, user := acUser(t, tg, []string{".*", ".*", "^nothing$"})
			conn, ch := clDialChan(t, utg)
			_, err := ch.Consume(q, "", false, false, false, false, nil)
			acExpectRefused(t, conn, err, "read", "queue", q, acVHost(tg), user)
		}),
		acCase("get-needs-read", func(t T, tg Target) {
			_, ach := clDialChan(t, tg)
			q := clDeclareQueue(t, tg, ach, "q", nil)
			utg, user := acUser(t, tg, []string{".*", ".*", "^nothing$"})
			conn, ch := clDialChan(t, utg)
			_, _, err := ch.Get(q, false)
			acExpectRefused(t, conn, err, "read", "queue", q, acVHost(tg), user)
		}),
		acCase("queue-bind-needs-write-on-queue", func(t T, tg Target) {
			_, ach := clDialChan(t, tg)
			q := clDeclareQueue(t, tg, ach, "q", nil)
			utg, user := acUser(t, tg, []string{".*", "^nothing$", ".*"})
			conn, ch := clDialChan(t, utg)
			err := ch.QueueBind(q, "k", "amq.direct", false, nil)
			acExpectRefused(t, conn, err, "write", "queue", q, acVHost(tg), user)
		}),
		acCase("queue-bind-needs-read-on-exchange", func(t T, tg Target) {
			_, ach := clDialChan(t, tg)
			q := clDeclareQueue(t, tg, ach, "q", nil)
			utg, user := acUser(t, tg, []string{".*", ".*", "^conf-q-"})
			conn, ch := clDialChan(t, utg)
			err := ch.QueueBind(q, "k", "amq.direct", false, nil)
			acExpectRefused(t, conn, err, "read", "exchange", "amq.direct", acVHost(tg), user)
		}),
		acCase("queue-unbind-needs-write-on-queue", func(t T, tg Target) {
			_, ach := clDialChan(t, tg)
			q := clDeclareQueue(t, tg, ach, "q", nil)
			clBindQueue(t, ach, q, "k", "amq.direct", nil)
			utg, user := acUser(t, tg, []string{".*", "^nothing$", ".*"})
			conn, ch := clDialChan(t, utg)
			err := ch.QueueUnbind(q, "k", "amq.direct", nil)
			acExpectRefused(t, conn, err, "write", "queue", q, acVHost(tg), user)
		}),
		acCase("exchange-bind-needs-write-on-destination", func(t T, tg Target) {
			_, ach := clDialChan(t, tg)
			dst := clDeclareExchange(t, tg, ach, "fanout", nil)
			utg, user := acUser(t, tg, []string{".*", "^nothing$", ".*"})
			conn, ch := clDialChan(t, utg)
			err := ch.ExchangeBind(dst, "k", "amq.direct", false, nil)
			acExpectRefused(t, conn, err, "write", "exchange", dst, acVHost(tg), user)
		}),
		acCase("exchange-bind-needs-read-on-source", func(t T, tg Target) {
			_, ach := clDialChan(t, tg)
			dst := clDeclareExchange(t, tg, ach, "fanout", nil)
			utg, user := acUser(t, tg, []string{".*", ".*", "^nothing$"})
			conn, ch := clDialChan(t, utg)
			err := ch.ExchangeBind(dst, "k", "amq.direct", false, nil)
			acExpectRefused(t, conn, err, "read", "exchange", "amq.direct", acVHost(tg), user)
		}),
		acCase("queue-declare-dead-letter-exchange-needs-write", func(t T, tg Target) {
			_, ach := clDialChan(t, tg)
			dlx := clDeclareExchange(t, tg, ach, "fanout", nil)
			utg, user := acUser(t, tg, []string{".*", "^conf-q", ".*"})
			conn, ch := clDialChan(t, utg)
			q := clUniq("q")
			clCleanupQueue(t, tg, q)
			_, err := ch.QueueDeclare(q, false, false, false, false, amqp.Table{"x-dead-letter-exchange": dlx})
			acExpectRefused(t, conn, err, "write", "exchange", dlx, acVHost(tg), user)
		}),
		acCase("topic-publish-needs-routing-key-write", func(t T, tg Target) {
			_, ach := clDialChan(t, tg)
			q := clDeclareQueue(t, tg, ach, "q", nil)
			clBindQueue(t, ach, q, "#", "amq.topic", nil)
			utg, user := acUser(t, tg, []string{".*", ".*", ".*"})
			if err := tg.Admin.SetTopicPermissions(acVHost(tg), user, "amq.topic", "^allowed\\.", ".*"); err != nil {
				t.Fatalf("set topic permissions: %v", err)
			}
			conn, ch := clDialChan(t, utg)
			clPublish(t, ch, "amq.topic", "allowed.x", clBody("ok"))
			if got := clGetWait(t, ch, q, true); string(got.Body) != "ok" {
				t.Fatalf("got %q", got.Body)
			}
			closes := clNotifyClose(ch)
			clPublish(t, ch, "amq.topic", "denied.x", clBody("no"))
			e := clExpectAsyncClose(t, conn, closes, clCodeAccessRefused, clChanClose)
			want := fmt.Sprintf("ACCESS_REFUSED - access to topic 'denied.x' in exchange 'amq.topic' in vhost '%s' refused for user '%s'", acVHost(tg), user)
			if e.Reason != want {
				t.Errorf("reply text %q, want %q", e.Reason, want)
			}
		}),
		acCase("topic-bind-needs-routing-key-read", func(t T, tg Target) {
			_, ach := clDialChan(t, tg)
			q := clDeclareQueue(t, tg, ach, "q", nil)
			utg, user := acUser(t, tg, []string{".*", ".*", ".*"})
			if err := tg.Admin.SetTopicPermissions(acVHost(tg), user, "amq.topic", ".*", "^public\\."); err != nil {
				t.Fatalf("set topic permissions: %v", err)
			}
			conn, ch := clDialChan(t, utg)
			if err := ch.QueueBind(q, "public.#", "amq.topic", false, nil); err != nil {
				t.Fatalf("bind with a permitted key: %v", err)
			}
			err := ch.QueueBind(q, "secret.#", "amq.topic", false, nil)
			ae := clExpectErr(t, conn, err, clCodeAccessRefused, clChanClose)
			want := fmt.Sprintf("ACCESS_REFUSED - access to topic 'secret.#' in exchange 'amq.topic' in vhost '%s' refused for user '%s'", acVHost(tg), user)
			if ae.Reason != want {
				t.Errorf("reply text %q, want %q", ae.Reason, want)
			}
		}),
		acCase("vhost-max-queues-limit", func(t T, tg Target) {
			other, vh := acNewVHost(t, tg)
			if err := tg.Admin.SetVHostLimit(vh, "max-queues", 1); err != nil {
				t.Fatalf("set limit: %v", err)
			}
			conn, ch := clDialChan(t, other)
			if _, err := ch.QueueDeclare("q1", false, false, false, false, nil); err != nil {
				t.Fatalf("first queue: %v", err)
			}
			if _, err := ch.QueueDeclare("q1", false, false, false, false, nil); err != nil {
				t.Fatalf("redeclaring an existing queue at the limit: %v", err)
			}
			_, err := ch.QueueDeclare("q2", false, false, false, false, nil)
			ae := clExpectErr(t, conn, err, clCodePreconditionFailed, clChanClose)
			if want := fmt.Sprintf("PRECONDITION_FAILED - cannot declare queue 'q2': queue limit in vhost '%s' (1) is reached", vh); ae.Reason != want {
				t.Errorf("reply text %q, want %q", ae.Reason, want)
			}
		}),
		acCase("vhost-max-connections-limit", func(t T, tg Target) {
			other, vh := acNewVHost(t, tg)
			if err := tg.Admin.SetVHostLimit(vh, "max-connections", 1); err != nil {
				t.Fatalf("set limit: %v", err)
			}
			clDial(t, other)
			_, _, _, err := clConnect(other, clWaitTimeout)
			var ae *amqp.Error
			if !errors.As(err, &ae) || ae.Code != clCodeNotAllowed {
				t.Fatalf("connection over the vhost's limit: %v, want 530 NOT_ALLOWED", err)
			}
			want := fmt.Sprintf("NOT_ALLOWED - access to vhost '%s' refused for user '%s': connection limit (1) is reached", vh, clUrlUser(tg))
			if ae.Reason != want {
				t.Errorf("reply text %q, want %q", ae.Reason, want)
			}
		}),
		acCase("user-id-must-match", func(t T, tg Target) {
			conn, ch := clDialChan(t, tg)
			q := clDeclareQueue(t, tg, ch, "q", nil)
			closes := clNotifyClose(ch)
			msg := clBody("m")
			msg.UserId = "someone-else"
			clPublish(t, ch, "", q, msg)
			e := clExpectAsyncClose(t, conn, closes, clCodePreconditionFailed, clChanClose)
			want := fmt.Sprintf("PRECONDITION_FAILED - user_id property set to 'someone-else' but authenticated user was '%s'", clUrlUser(tg))
			if e.Reason != want {
				t.Errorf("reply text %q, want %q", e.Reason, want)
			}
		}),
	)
}
