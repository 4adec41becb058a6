package conformance

import (
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Flow control: while a memory alarm is raised, a connection that
// publishes is sent connection.blocked and no longer read from; when the
// alarm clears it gets connection.unblocked and its messages go through.
// Needs a target whose alarm can be driven (rabbitmqctl on RabbitMQ).

func init() {
	register(Case{
		Name: "flow/memory-alarm-blocks-publisher",
		Run: func(t T, tg Target) {
			if tg.MemoryAlarm == nil {
				return
			}
			conn, ch := clDialChan(t, tg)
			q := clDeclareQueue(t, tg, ch, "flow", nil)
			blocked := conn.NotifyBlocked(make(chan amqp.Blocking, 4))
			if err := tg.MemoryAlarm(true); err != nil {
				t.Fatalf("raise the memory alarm: %v", err)
			}
			cleared := false
			t.Cleanup(func() {
				if !cleared {
					tg.MemoryAlarm(false)
				}
			})
			// The alarm takes effect with the broker's next memory check;
			// publish until the connection is blocked.
			deadline := time.After(10 * time.Second)
			sent := 0
		wait:
			for {
				if err := ch.Publish("", q, false, false, clBody("m")); err != nil {
					t.Fatalf("publish: %v", err)
				}
				sent++
				select {
				case b := <-blocked:
					if !b.Active {
						t.Fatalf("got unblocked before blocked")
					}
					break wait
				case <-time.After(50 * time.Millisecond):
				case <-deadline:
					t.Fatalf("no connection.blocked within 10s of the memory alarm")
				}
			}
			if err := tg.MemoryAlarm(false); err != nil {
				t.Fatalf("clear the memory alarm: %v", err)
			}
			cleared = true
			select {
			case b := <-blocked:
				if b.Active {
					t.Fatalf("got blocked again, want unblocked")
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("no connection.unblocked within 10s of clearing the alarm")
			}
			// Everything published arrives once unblocked.
			_, ch2 := clDialChan(t, tg)
			clEventually(t, "all published messages queued", func() bool {
				qq, err := ch2.QueueDeclarePassive(q, false, false, false, false, nil)
				return err == nil && qq.Messages == sent
			})
		},
	})
}
