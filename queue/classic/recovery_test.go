package classic

import (
	"errors"
	"fmt"
	"testing"

	"github.com/warrenmq/warren/persist"
	"github.com/warrenmq/warren/queue"
)

// recoveryRig is a durable classic queue whose store outlives the type
// (a MemoryDisk): each start opens the store and recovers the queue, as
// the broker does at a start.
type recoveryRig struct {
	t      *testing.T
	disk   *persist.MemoryDisk
	window int
	msgID  uint64
	st     persist.Store
	typ    *Type
	q      *Queue
}

// start opens the store and the queue (declared on the first start);
// unclean says the last stop was not clean.
func (r *recoveryRig) start(unclean bool) int {
	r.t.Helper()
	st, err := persist.OpenMemory(r.disk)
	if err != nil {
		r.t.Fatal(err)
	}
	r.st = st
	r.typ = NewType(Config{Store: st, Window: r.window, NextMessageID: func() uint64 { r.msgID++; return r.msgID }, Unclean: unclean})
	defs, err := st.Definitions()
	if err != nil {
		r.t.Fatal(err)
	}
	d := queue.Decl{VHost: "/", Name: "q", Durable: true}
	if len(defs.Queues) == 0 {
		q, err := r.typ.New(d, queue.Limits{MaxLength: -1, MaxLengthBytes: -1}, queue.Hooks{})
		if err != nil {
			r.t.Fatal(err)
		}
		r.q = q.(*Queue)
		return 0
	}
	d.ID = defs.Queues[0].ID
	q, n, err := r.typ.Recover(d, queue.Limits{MaxLength: -1, MaxLengthBytes: -1}, queue.Hooks{})
	if err != nil {
		r.t.Fatal(err)
	}
	r.q = q.(*Queue)
	r.q.Recovered()
	return n
}

// stop closes the store (what it was given is on the disk: a kill -9
// after the confirms loses nothing either).
func (r *recoveryRig) stop() {
	r.t.Helper()
	if err := r.st.Close(); err != nil {
		r.t.Fatal(err)
	}
}

func (r *recoveryRig) publish(bodies ...string) {
	r.t.Helper()
	for _, b := range bodies {
		m := &queue.Message{Body: []byte(b), Persistent: true, StoreID: r.typ.cfg.NextMessageID()}
		done := make(chan error, 1)
		r.typ.Publish(m, []queue.Queue{r.q}, nil, func(err error) { done <- err })
		if err := <-done; err != nil {
			r.t.Fatal(err)
		}
	}
}

// gets takes every message with basic.get (unacknowledged) and lists
// them as body=redelivered.
func (r *recoveryRig) gets() string {
	var out []string
	for {
		e, _, ok := r.q.Get(false)
		if !ok {
			return fmt.Sprint(out)
		}
		out = append(out, fmt.Sprintf("%s=%v", e.Msg.Body, e.Redelivered))
	}
}

// As RabbitMQ 3.10's classic queues: after a clean stop only the
// messages delivered before it are redelivered; after an unclean one
// every message recovered is, and stays so at later restarts, unlike
// those published after that recovery; the mark goes with the queue.
// With the backlog in memory and paged to the store.
func TestRecoveryRedelivered(t *testing.T) {
	for _, window := range []int{0, 2} {
		fill := func(t *testing.T) *recoveryRig {
			r := &recoveryRig{t: t, disk: persist.NewMemoryDisk(), window: window}
			r.start(false)
			r.publish("m1", "m2", "m3", "m4")
			if e, _, ok := r.q.Get(false); !ok || string(e.Msg.Body) != "m1" {
				t.Fatalf("get: %v %q", ok, e.Msg.Body)
			}
			if err := r.st.Sync(); err != nil {
				t.Fatal(err)
			}
			r.stop()
			return r
		}
		t.Run(fmt.Sprintf("window%d/clean", window), func(t *testing.T) {
			r := fill(t)
			if n := r.start(false); n != 4 {
				t.Fatalf("recovered %d, want 4", n)
			}
			if got, want := r.gets(), "[m1=true m2=false m3=false m4=false]"; got != want {
				t.Fatalf("after a clean stop: %s, want %s", got, want)
			}
			r.stop()
		})
		t.Run(fmt.Sprintf("window%d/unclean", window), func(t *testing.T) {
			r := fill(t)
			r.start(true)
			if got, want := r.gets(), "[m1=true m2=true m3=true m4=true]"; got != want {
				t.Fatalf("after an unclean stop: %s, want %s", got, want)
			}
			r.stop()
		})
		t.Run(fmt.Sprintf("window%d/unclean-then-clean", window), func(t *testing.T) {
			r := fill(t)
			r.start(true)
			r.publish("m5")
			r.stop()
			r.start(false)
			if got, want := r.gets(), "[m1=true m2=true m3=true m4=true m5=false]"; got != want {
				t.Fatalf("a clean restart after an unclean one: %s, want %s", got, want)
			}
			id := r.q.decl.ID
			if _, _, err := r.q.Delete(false, false); err != nil {
				t.Fatal(err)
			}
			if _, err := r.st.LoadBlob(recoveryMarkKey(id)); !errors.Is(err, persist.ErrNotFound) {
				t.Fatalf("the deleted queue's recovery mark: %v, want ErrNotFound", err)
			}
			r.stop()
		})
	}
}
