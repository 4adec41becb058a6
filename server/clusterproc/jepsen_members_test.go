package clusterproc

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// membershipChanges: under confirmed publishing and consuming on every
// node, each node in turn is deleted as a member of the quorum queue and
// added back (rabbitmq-queues delete_member, add_member), through the
// management API of another node. Every confirmed message is delivered,
// and no consumer is cancelled: a consumer's node losing or gaining its
// replica moves the consumer, as a RabbitMQ quorum queue's consumers
// stay. A classic queue alongside is not touched.
func membershipChanges(t *testing.T, c *procCluster, kinds []queueKind, sc scale) {
	r := newRun(t, c, kinds, sc, c.nodes[0])
	var qs []*jqueue
	for _, q := range r.qs {
		if q.kind.replicated() {
			qs = append(qs, q)
		}
	}
	if len(qs) == 0 {
		t.Skip("no replicated queue kind")
	}
	r.consume(c.nodes...)
	r.publish(c.nodes...)
	r.progress(50)
	for round := range sc.rounds {
		for _, nd := range c.nodes {
			via := c.others(nd)[0]
			for _, q := range qs {
				time.Sleep(sc.phase)
				r.fault("round %d: delete_member %s of %s", round, nd.name, q.name)
				if code, body := c.mgmtCall(via, "DELETE", "/api/quorum-queues/%2F/"+q.name+"/members/"+nd.name, ""); code != 204 {
					t.Fatalf("delete_member %s: %d %s", nd.name, code, body)
				}
				r.progressReplicated(50)
				r.fault("round %d: add_member %s of %s", round, nd.name, q.name)
				waitFor(t, waitTimeout, "add_member "+nd.name, func() (bool, string) {
					code, body := c.mgmtCall(via, "POST", "/api/quorum-queues/%2F/"+q.name+"/members", `{"node":"`+nd.name+`"}`)
					return code == 201, fmt.Sprint(code, " ", body)
				})
				r.progressReplicated(50)
			}
		}
	}
	r.finish()
	for _, q := range qs {
		for _, ev := range q.h.Events() {
			if strings.HasPrefix(ev.What, "consumer ") {
				t.Errorf("%s: a consumer's session ended: %s", q.name, ev.What)
			}
		}
	}
}
