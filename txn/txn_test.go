package txn

import (
	"testing"

	"github.com/warrenmq/warren/ack"
	"github.com/warrenmq/warren/queue"
)

func TestTakeAndRollback(t *testing.T) {
	var tx Tx[string]
	tx.Publish("a")
	tx.Publish("b")
	tx.Settle(Settle{Deliveries: []ack.Delivery{{Tag: 1}, {Tag: 2}}, Op: queue.Ack})
	pubs, settles := tx.Take()
	if len(pubs) != 2 || pubs[0] != "a" || len(settles) != 1 || len(settles[0].Deliveries) != 2 {
		t.Fatalf("take = %v %v", pubs, settles)
	}
	if p, s := tx.Take(); len(p) != 0 || len(s) != 0 {
		t.Fatalf("a second take returned %v %v", p, s)
	}
	tx.Publish("c")
	tx.Settle(Settle{Deliveries: []ack.Delivery{{Tag: 3}}})
	tx.Settle(Settle{Deliveries: []ack.Delivery{{Tag: 4}}, Op: queue.Requeue})
	back := tx.Rollback()
	if len(back) != 2 || back[0].Tag != 3 || back[1].Tag != 4 {
		t.Fatalf("rollback returned %v, want tags 3 and 4", back)
	}
	if p, s := tx.Take(); len(p) != 0 || len(s) != 0 {
		t.Fatalf("rollback left %v %v", p, s)
	}
}
