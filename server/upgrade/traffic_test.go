//go:build upgrade

package upgrade_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/rabbitmq/amqp091-go"
)

// The queues' kinds, in the order they are filled and checked.
const (
	classicKind = "classic"
	quorumKind  = "quorum"
	streamKind  = "stream"
)

var kinds = []string{classicKind, quorumKind, streamKind}

const (
	bodySize  = 1024
	published = 3000 // confirmed messages per queue
	acked     = 1000 // of them consumed and acked on the old broker (classic, quorum)
	held      = 200  // then delivered and left unacked on a channel open at the stop
	added     = 100  // published to each queue on the new broker
	window    = 256  // publishes in flight before the oldest confirm is awaited

	// snapshotThreshold is the quorum type's raft SnapshotThreshold in
	// the old builds (quorum.Config): a snapshot is taken once a group's
	// log has that many entries after its last one.
	snapshotThreshold = 8192
	// snapshotPublished are the quorum queue's messages in a snapshot
	// case, each its own entry (one publish in flight at a time).
	snapshotPublished = snapshotThreshold + 800

	opTimeout = 3 * time.Minute // one phase of traffic
)

// queueState is what the test knows of one queue.
type queueState struct {
	kind, name string
	n          int          // confirmed on the old broker: ids 0..n-1
	acked      map[int]bool // acked on the old broker
	held       map[int]bool // delivered, unacked at the stop
	present    []int        // what the new broker had at its first start, sorted
	added      int          // confirmed on the new broker: ids n..n+added-1
}

// body is message id of queue q: distinct, about 1 KB, its own check.
func body(q string, id int) []byte {
	b := make([]byte, bodySize)
	head := fmt.Sprintf("%s %07d ", q, id)
	copy(b, head)
	for i := len(head); i < len(b); i++ {
		b[i] = byte('a' + (id*7+i*13)%26)
	}
	return b
}

// idOf is the id of a delivery from q, checking its body whole.
func idOf(q string, d amqp091.Delivery) (int, error) {
	id, err := strconv.Atoi(d.MessageId)
	if err != nil {
		return 0, fmt.Errorf("delivery with message-id %q", d.MessageId)
	}
	if string(d.Body) != string(body(q, id)) {
		return 0, fmt.Errorf("message %d of %s: body of %d bytes is not the one published (starts %.20q)", id, q, len(d.Body), d.Body)
	}
	return id, nil
}

func dial(t *testing.T, b *broker) *amqp091.Connection {
	t.Helper()
	conn, err := amqp091.DialConfig(b.url(), amqp091.Config{
		Heartbeat: 10 * time.Second,
		Dial:      amqp091.DefaultDial(10 * time.Second),
	})
	if err != nil {
		t.Fatalf("%s: dial: %v", b.name, err)
	}
	return conn
}

// declare declares q of kind on a channel of its own.
func declare(conn *amqp091.Connection, kind, q string) error {
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	var args amqp091.Table
	if kind != classicKind {
		args = amqp091.Table{"x-queue-type": kind}
	}
	_, err = ch.QueueDeclare(q, true, false, false, false, args)
	return err
}

// publish publishes ids [from, from+n) to q with confirms, at most win in
// flight; every one must be confirmed.
func publish(ctx context.Context, t *testing.T, conn *amqp091.Connection, q string, from, n, win int) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	var pending []*amqp091.DeferredConfirmation
	await := func(dc *amqp091.DeferredConfirmation) {
		ok, err := dc.WaitContext(ctx)
		if err != nil || !ok {
			t.Fatalf("%s: publish %d of [%d, %d) not confirmed: ack %v, %v", q, dc.DeliveryTag, from, from+n, ok, err)
		}
	}
	for id := from; id < from+n; id++ {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", q, false, false, amqp091.Publishing{
			DeliveryMode: amqp091.Persistent,
			MessageId:    strconv.Itoa(id),
			Body:         body(q, id),
		})
		if err != nil {
			t.Fatalf("%s: publish %d: %v", q, id, err)
		}
		pending = append(pending, dc)
		if len(pending) >= win {
			await(pending[0])
			pending = pending[1:]
		}
	}
	for _, dc := range pending {
		await(dc)
	}
}

// count is q's message count from a passive declare (ready messages;
// a stream's retained ones).
func count(conn *amqp091.Connection, q string) (int, error) {
	ch, err := conn.Channel()
	if err != nil {
		return 0, err
	}
	defer ch.Close()
	st, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
	return st.Messages, err
}

// waitCount waits until q's count is want (or, with atLeast, want or
// more) and returns it.
func waitCount(t *testing.T, conn *amqp091.Connection, q string, want int, atLeast bool) int {
	t.Helper()
	var n int
	err := within(time.Minute, func() error {
		var err error
		if n, err = count(conn, q); err != nil {
			return err
		}
		if n == want || atLeast && n > want {
			return nil
		}
		return fmt.Errorf("%d messages", n)
	})
	if err != nil {
		cmp := ""
		if atLeast {
			cmp = "at least "
		}
		t.Fatalf("%s: want %s%d messages: %v", q, cmp, want, err)
	}
	return n
}

// receive takes n deliveries from q on ch with prefetch, manual acks,
// consumer args; with ack it acks each.
func receive(ctx context.Context, t *testing.T, ch *amqp091.Channel, q string, n, prefetch int, ack bool, args amqp091.Table) []amqp091.Delivery {
	t.Helper()
	if err := ch.Qos(prefetch, 0, false); err != nil {
		t.Fatalf("%s: qos: %v", q, err)
	}
	ds, err := ch.ConsumeWithContext(ctx, q, "", false, false, false, false, args)
	if err != nil {
		t.Fatalf("%s: consume: %v", q, err)
	}
	out := make([]amqp091.Delivery, 0, n)
	for len(out) < n {
		select {
		case d, ok := <-ds:
			if !ok {
				t.Fatalf("%s: the consumer ended after %d of %d deliveries", q, len(out), n)
			}
			if ack {
				if err := d.Ack(false); err != nil {
					t.Fatalf("%s: ack: %v", q, err)
				}
			}
			out = append(out, d)
		case <-ctx.Done():
			t.Fatalf("%s: %d of %d deliveries: %v", q, len(out), n, ctx.Err())
		}
	}
	return out
}

// fill declares the three queues on the old broker (a kind it refuses is
// left out and logged), publishes to each, acks part of the classic and
// quorum ones and leaves part delivered and unacked on a channel of the
// returned connection, which stays open.
func fill(t *testing.T, b *broker, snapshot bool) (map[string]*queueState, *amqp091.Connection) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout+3*time.Minute)
	defer cancel()
	conn := dial(t, b)
	qs := map[string]*queueState{}
	for _, k := range kinds {
		s := &queueState{kind: k, name: "upgrade-" + k, n: published, acked: map[int]bool{}, held: map[int]bool{}}
		if err := declare(conn, k, s.name); err != nil {
			t.Logf("%s does not declare a %s queue, left out: %v", b.name, k, err)
			continue
		}
		win := window
		if snapshot && k == quorumKind {
			s.n, win = snapshotPublished, 1
		}
		start := time.Now()
		publish(ctx, t, conn, s.name, 0, s.n, win)
		t.Logf("%s: %d confirmed to %s in %s", b.name, s.n, s.name, time.Since(start).Round(10*time.Millisecond))
		qs[k] = s
	}
	for _, k := range []string{classicKind, quorumKind} {
		s := qs[k]
		if s == nil {
			continue
		}
		// Acked: the channel closes after the acks, which returns what
		// its prefetch took beyond them.
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range receive(ctx, t, ch, s.name, acked, 100, true, nil) {
			id, err := idOf(s.name, d)
			if err != nil {
				t.Fatal(err)
			}
			s.acked[id] = true
		}
		ch.Close()
		waitCount(t, conn, s.name, s.n-acked, false)
		// Held: delivered, never acked; the channel stays open.
		ch, err = conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range receive(ctx, t, ch, s.name, held, held, false, nil) {
			id, err := idOf(s.name, d)
			if err != nil {
				t.Fatal(err)
			}
			if s.acked[id] {
				t.Fatalf("%s: message %d delivered again after its ack", s.name, id)
			}
			s.held[id] = true
		}
		waitCount(t, conn, s.name, s.n-acked-held, false)
	}
	return qs, conn
}

// checkFirst checks the new broker's first start: every confirmed
// message not acked is there once (after a kill, an acked one may be
// back: its ack may not have been stored), unacked ones redelivered, the
// stream whole and in order; then it publishes to each queue.
func checkFirst(t *testing.T, b *broker, qs map[string]*queueState, clean bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	conn := dial(t, b)
	defer conn.Close()
	for _, k := range kinds {
		s := qs[k]
		if s == nil {
			continue
		}
		if k == streamKind {
			checkStream(ctx, t, conn, s, s.n)
			continue
		}
		want := s.n - len(s.acked)
		n := waitCount(t, conn, s.name, want, true)
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int]bool{}
		redelivered, back := 0, 0
		for _, d := range receive(ctx, t, ch, s.name, n, n+1, false, nil) {
			id, err := idOf(s.name, d)
			if err != nil {
				t.Error(err)
				continue
			}
			switch {
			case seen[id]:
				t.Errorf("%s: message %d delivered twice", s.name, id)
			case id < 0 || id >= s.n:
				t.Errorf("%s: message %d was never published", s.name, id)
			case s.acked[id] && clean:
				t.Errorf("%s: message %d, acked before a clean stop, is back", s.name, id)
			case s.acked[id]:
				back++
			case s.held[id] && !d.Redelivered:
				t.Errorf("%s: message %d, delivered and unacked at the stop, is not marked redelivered", s.name, id)
			}
			if d.Redelivered {
				redelivered++
			}
			seen[id] = true
		}
		var missing []int
		for id := range s.n {
			if !s.acked[id] && !seen[id] {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			t.Errorf("%s: %d confirmed messages not acked are lost: %s", s.name, len(missing), idRanges(missing))
		}
		for id := range seen {
			s.present = append(s.present, id)
		}
		sort.Ints(s.present)
		t.Logf("%s: %d messages (%d expected, %d acked ones back after the kill), %d redelivered", s.name, n, want, back, redelivered)
		ch.Close() // returns them all
		waitCount(t, conn, s.name, len(s.present), false)
	}
	for _, k := range kinds {
		if s := qs[k]; s != nil {
			s.added = added
			publish(ctx, t, conn, s.name, s.n, s.added, window)
		}
	}
	for _, k := range kinds {
		if s := qs[k]; s != nil {
			want := len(s.present) + s.added
			if k == streamKind {
				want = s.n + s.added
			}
			waitCount(t, conn, s.name, want, false)
		}
	}
}

// checkAgain checks the new broker's second start: the same messages and
// the new ones, each once; the classic and quorum ones are then acked.
func checkAgain(t *testing.T, b *broker, qs map[string]*queueState) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	conn := dial(t, b)
	defer conn.Close()
	for _, k := range kinds {
		s := qs[k]
		if s == nil {
			continue
		}
		if k == streamKind {
			checkStream(ctx, t, conn, s, s.n+s.added)
			continue
		}
		want := slices.Clone(s.present)
		for id := s.n; id < s.n+s.added; id++ {
			want = append(want, id)
		}
		n := waitCount(t, conn, s.name, len(want), true)
		if n != len(want) {
			t.Errorf("%s: %d messages after the restart, want %d", s.name, n, len(want))
		}
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		for _, d := range receive(ctx, t, ch, s.name, n, 500, true, nil) {
			id, err := idOf(s.name, d)
			if err != nil {
				t.Error(err)
				continue
			}
			got = append(got, id)
		}
		sort.Ints(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s after the restart: got %d messages %s, want %d %s", s.name, len(got), idRanges(got), len(want), idRanges(want))
		}
		waitCount(t, conn, s.name, 0, false)
		ch.Close()
		t.Logf("%s: %d messages after the restart, acked", s.name, len(got))
	}
}

// checkStream reads stream s from its first offset: want messages, ids
// 0..want-1 in order at offsets 0..want-1.
func checkStream(ctx context.Context, t *testing.T, conn *amqp091.Connection, s *queueState, want int) {
	t.Helper()
	if n := waitCount(t, conn, s.name, want, true); n != want {
		t.Errorf("%s: %d messages, want %d", s.name, n, want)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	bad := 0
	for i, d := range receive(ctx, t, ch, s.name, want, 200, true, amqp091.Table{"x-stream-offset": "first"}) {
		id, err := idOf(s.name, d)
		if err == nil && id != i {
			err = fmt.Errorf("%s: delivery %d from the first offset is message %d", s.name, i, id)
		}
		if off, ok := d.Headers["x-stream-offset"].(int64); err == nil && (!ok || off != int64(i)) {
			err = fmt.Errorf("%s: delivery %d has x-stream-offset %v", s.name, i, d.Headers["x-stream-offset"])
		}
		if err != nil {
			if bad++; bad <= 10 {
				t.Error(err)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d deliveries out of place", s.name, bad, want)
	} else {
		t.Logf("%s: %d messages in order from offset 0", s.name, want)
	}
}

// idRanges words sorted ids as ranges: "0-99 150 200-299".
func idRanges(ids []int) string {
	if len(ids) == 0 {
		return "none"
	}
	var out []byte
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		if len(out) > 0 {
			out = append(out, ' ')
		}
		if i == j {
			out = strconv.AppendInt(out, int64(ids[i]), 10)
		} else {
			out = fmt.Appendf(out, "%d-%d", ids[i], ids[j])
		}
		if len(out) > 400 {
			return string(out) + " ..."
		}
		i = j + 1
	}
	return string(out)
}
