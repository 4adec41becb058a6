package conformance

import (
	"slices"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// clTxChan opens a channel and puts it in tx mode.
func clTxChan(t T, conn *amqp.Connection) *amqp.Channel {
	t.Helper()
	ch := clOpenChan(t, conn)
	if err := ch.Tx(); err != nil {
		t.Fatalf("tx.select: %v", err)
	}
	return ch
}

func init() {
	register(
		Case{
			// Messages published in a transaction are invisible until tx.commit, then enqueued in order.
			Name: "tx/publish-invisible-until-commit",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				tx := clTxChan(t, conn)
				clPublish(t, tx, "", q, clBody("1"))
				clPublish(t, tx, "", q, clBody("2"))
				clSyncChan(t, tx)
				clGetEmpty(t, ch, q)
				if err := tx.TxCommit(); err != nil {
					t.Fatalf("tx.commit: %v", err)
				}
				if got := clGetAll(t, ch, q); !slices.Equal(got, []string{"1", "2"}) {
					t.Fatalf("after commit got %q", got)
				}
			},
		},
		Case{
			// tx.rollback discards uncommitted publishes; later commits are unaffected.
			Name: "tx/rollback-discards-publishes",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				tx := clTxChan(t, conn)
				clPublish(t, tx, "", q, clBody("dropped"))
				if err := tx.TxRollback(); err != nil {
					t.Fatalf("tx.rollback: %v", err)
				}
				clPublish(t, tx, "", q, clBody("kept"))
				if err := tx.TxCommit(); err != nil {
					t.Fatalf("tx.commit: %v", err)
				}
				if got := clGetAll(t, ch, q); !slices.Equal(got, []string{"kept"}) {
					t.Fatalf("got %q, want [kept]", got)
				}
			},
		},
		Case{
			// An ack inside a transaction takes effect at commit: after commit and channel close nothing is requeued.
			Name: "tx/ack-applied-at-commit",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				clFill(t, conn, q, 1)
				tx := clTxChan(t, conn)
				d := clGetWait(t, tx, q, false)
				if err := d.Ack(false); err != nil {
					t.Fatalf("ack: %v", err)
				}
				if err := tx.TxCommit(); err != nil {
					t.Fatalf("tx.commit: %v", err)
				}
				if err := tx.Close(); err != nil {
					t.Fatalf("close: %v", err)
				}
				clGetEmpty(t, ch, q)
			},
		},
		Case{
			// An uncommitted ack is not applied: closing the channel requeues the message (Redelivered=true).
			Name: "tx/ack-not-applied-before-commit",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				clFill(t, conn, q, 1)
				tx := clTxChan(t, conn)
				d := clGetWait(t, tx, q, false)
				if err := d.Ack(false); err != nil {
					t.Fatalf("ack: %v", err)
				}
				clSyncChan(t, tx)
				if err := tx.Close(); err != nil {
					t.Fatalf("close: %v", err)
				}
				clExpectGet(t, ch, q, "1", true)
			},
		},
		Case{
			// tx.rollback discards a pending ack; the message stays unacked (not requeued) until the channel closes.
			Name: "tx/rollback-discards-ack",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				clFill(t, conn, q, 1)
				tx := clTxChan(t, conn)
				d := clGetWait(t, tx, q, false)
				if err := d.Ack(false); err != nil {
					t.Fatalf("ack: %v", err)
				}
				if err := tx.TxRollback(); err != nil {
					t.Fatalf("tx.rollback: %v", err)
				}
				clGetEmpty(t, ch, q) // still unacked on tx, not requeued
				if err := tx.Close(); err != nil {
					t.Fatalf("close: %v", err)
				}
				clExpectGet(t, ch, q, "1", true)
			},
		},
		Case{
			// After a rollback the same delivery tag can be acked again and committed.
			Name: "tx/ack-again-after-rollback",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				clFill(t, conn, q, 1)
				tx := clTxChan(t, conn)
				d := clGetWait(t, tx, q, false)
				_ = d.Ack(false)
				if err := tx.TxRollback(); err != nil {
					t.Fatalf("tx.rollback: %v", err)
				}
				_ = d.Ack(false)
				if err := tx.TxCommit(); err != nil {
					t.Fatalf("tx.commit: %v", err)
				}
				if err := tx.Close(); err != nil {
					t.Fatalf("close: %v", err)
				}
				clGetEmpty(t, ch, q)
			},
		},
		Case{
			// tx.commit without tx.select: channel.close 406 PRECONDITION_FAILED.
			Name: "tx/commit-without-select-406",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				clExpectErr(t, conn, ch.TxCommit(), clCodePreconditionFailed, clChanClose)
			},
		},
		Case{
			// tx.rollback without tx.select: channel.close 406 PRECONDITION_FAILED.
			Name: "tx/rollback-without-select-406",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				clExpectErr(t, conn, ch.TxRollback(), clCodePreconditionFailed, clChanClose)
			},
		},
		Case{
			// tx.select twice, and empty commits/rollbacks, are fine.
			Name: "tx/select-twice-and-empty-commit-ok",
			Run: func(t T, tg Target) {
				conn := clDial(t, tg)
				tx := clTxChan(t, conn)
				if err := tx.Tx(); err != nil {
					t.Fatalf("second tx.select: %v", err)
				}
				for i := 0; i < 2; i++ {
					if err := tx.TxCommit(); err != nil {
						t.Fatalf("empty commit: %v", err)
					}
					if err := tx.TxRollback(); err != nil {
						t.Fatalf("empty rollback: %v", err)
					}
				}
			},
		},
		Case{
			// mandatory + unroutable inside a transaction: the basic.return is sent at commit, not at publish.
			Name: "tx/return-sent-at-commit",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				x := clDeclareExchange(t, tg, ch, "direct", nil)
				tx := clTxChan(t, conn)
				returns := tx.NotifyReturn(make(chan amqp.Return, 1))
				clPublishOpts(t, tx, x, "nowhere", true, clBody("m"))
				clSyncChan(t, tx)
				select {
				case <-returns:
					t.Fatalf("basic.return before tx.commit")
				case <-time.After(clQuietPeriod):
				}
				if err := tx.TxCommit(); err != nil {
					t.Fatalf("tx.commit: %v", err)
				}
				select {
				case r := <-returns:
					if r.ReplyCode != clCodeNoRoute {
						t.Fatalf("return code %d", r.ReplyCode)
					}
				default:
					t.Fatalf("no basic.return before commit-ok")
				}
			},
		},
	)
}
