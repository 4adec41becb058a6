package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// streamBroker starts a broker with stream st of partitions partitions (1:
// no x-stream-partitions) holding n confirmed messages, and a classic
// queue cq.
func streamBroker(t *testing.T, partitions, n int) (base string, conn *amqp091.Connection) {
	t.Helper()
	base, amqpURL := broker(t)
	conn, err := amqp091.Dial(amqpURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	args := amqp091.Table{"x-queue-type": "stream"}
	if partitions > 1 {
		args["x-stream-partitions"] = int32(partitions)
	}
	if _, err := ch.QueueDeclare("st", true, false, false, false, args); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("cq", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		dc, err := ch.PublishWithDeferredConfirm("", "st", false, false, amqp091.Publishing{
			Body: []byte("m"), Headers: amqp091.Table{"x-stream-partition-key": string(rune('a' + i))},
		})
		if err != nil {
			t.Fatal(err)
		}
		if !dc.Wait() {
			t.Fatal("nacked")
		}
	}
	return base, conn
}

func TestStreamCommands(t *testing.T) {
	base, _ := streamBroker(t, 1, 5)
	out := ctl(t, base, "stream_status", "st")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || lines[0] != "Status of stream st in vhost / ..." ||
		lines[1] != "partition\tfirst_offset\tnext_offset\tmessages\tsegments\tbytes" || !strings.HasPrefix(lines[2], "0\t0\t5\t5\t1\t") {
		t.Fatalf("stream_status:\n%s", out)
	}
	var parts []map[string]any
	if err := json.Unmarshal([]byte(ctl(t, base, "stream_status", "st", "--formatter", "json")), &parts); err != nil {
		t.Fatal(err)
	}
	if len(parts) != 1 || parts[0]["next_offset"] != 5.0 || parts[0]["bytes"].(float64) <= 0 {
		t.Fatalf("stream_status json: %v", parts)
	}
	if out := ctl(t, base, "-q", "list_stream_groups", "st"); out != "" {
		t.Fatalf("list_stream_groups of a stream without groups: %q", out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"stream_status", "nope"}, "stream 'nope' in vhost '/' does not exist"},
		{[]string{"stream_status", "cq"}, "queue 'cq' in vhost '/' is not a stream"},
		{[]string{"-p", "nov", "stream_status", "st"}, "vhost 'nov' does not exist"},
		{[]string{"list_stream_groups", "cq"}, "queue 'cq' in vhost '/' is not a stream"},
		{[]string{"list_stream_groups", "nope"}, "stream 'nope' in vhost '/' does not exist"},
		{[]string{"delete_stream_group", "st", "g"}, "consumer group 'g' of stream 'st' in vhost '/' does not exist"},
		{[]string{"reset_stream_group", "st", "g", "--to", "first"}, "consumer group 'g' of stream 'st' in vhost '/' does not exist"},
		{[]string{"reset_stream_group", "st", "g", "--to", "yesterday"}, `not "yesterday"`},
		{[]string{"reset_stream_group", "st", "g", "--to", "-1"}, `not "-1"`},
		{[]string{"reset_stream_group", "st", "g"}, `required flag(s) "to" not set`},
	} {
		out, err := ctlErr(base, "", c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("warrenctl %s: %v (%s), want an error with %q", strings.Join(c.args, " "), err, out, c.want)
		}
	}
}

// TestStreamGroupCommands runs once the broker's streams have consumer
// groups (issue 13, section 3).
func TestStreamGroupCommands(t *testing.T) {
	base, conn := streamBroker(t, 2, 6)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Qos(100, 0, false); err != nil {
		t.Fatal(err)
	}
	dels, err := ch.Consume("st", "w1", false, false, false, false, amqp091.Table{"x-stream-group": "g", "x-stream-offset": "first"})
	if err != nil {
		t.Skipf("no consumer groups in this broker's streams yet: %v", err)
	}
	var gs []map[string]any
	if err := json.Unmarshal([]byte(ctl(t, base, "list_stream_groups", "st", "--formatter", "json")), &gs); err != nil {
		t.Fatal(err)
	}
	if len(gs) == 0 {
		t.Skip("no consumer groups in this broker's streams yet")
	}
	for range 6 {
		if err := (<-dels).Ack(false); err != nil {
			t.Fatal(err)
		}
	}
	want := "Listing consumer groups of stream st in vhost / ...\ngroup\tpartition\towner\tcommitted\tlag\n"
	var out string
	deadline := time.Now().Add(5 * time.Second)
	for {
		out = ctl(t, base, "list_stream_groups", "st")
		rows := strings.Split(strings.TrimPrefix(out, want), "\n")
		if strings.HasPrefix(out, want) && len(rows) == 3 && strings.HasPrefix(rows[0], "g\t0\tw1\t") && strings.HasSuffix(rows[0], "\t0") &&
			strings.HasPrefix(rows[1], "g\t1\tw1\t") && strings.HasSuffix(rows[1], "\t0") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("list_stream_groups, w1 owning both partitions with lag 0, not in 5 s:\n%s", out)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := ctlErr(base, "", "delete_stream_group", "st", "g"); err == nil || !strings.Contains(err.Error(), "has members") {
		t.Fatalf("delete_stream_group with a member: %v", err)
	}
	if err := ch.Cancel("w1", false); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(5 * time.Second)
	for {
		_, err := ctlErr(base, "", "reset_stream_group", "st", "g", "--to", "first")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reset_stream_group after the cancel: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	out = ctl(t, base, "-q", "list_stream_groups", "st")
	lag := 0
	for _, r := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		f := strings.Split(r, "\t")
		if f[2] != "" {
			t.Errorf("row %q has an owner after the cancel", r)
		}
		n, err := strconv.Atoi(f[4])
		if err != nil {
			t.Fatalf("row %q: lag %v", r, err)
		}
		lag += n
	}
	if lag != 6 {
		t.Errorf("after reset to first the lags sum to %d, want 6:\n%s", lag, out)
	}
	ctl(t, base, "delete_stream_group", "st", "g")
	if out := ctl(t, base, "-q", "list_stream_groups", "st"); out != "" {
		t.Errorf("list_stream_groups after the delete: %q", out)
	}
}
