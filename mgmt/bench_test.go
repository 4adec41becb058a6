package mgmt

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/server/servertest"
)

// discard is a ResponseWriter that throws the body away.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return io.Discard.Write(b) }
func (d *discard) WriteHeader(int)             {}

// BenchmarkListQueues is GET /api/queues over 10,000 queues, as an
// administrator: per op, the allocations of one whole list.
func BenchmarkListQueues(b *testing.B) {
	br := servertest.StartBroker(b, server.Config{}).Server()
	a, err := br.OpenAdmin("guest", "/")
	if err != nil {
		b.Fatal(err)
	}
	for i := range 10000 {
		if err := a.DeclareQueue(server.QueueDecl{Name: fmt.Sprintf("bench-%05d", i)}); err != nil {
			b.Fatal(err)
		}
	}
	a.Close()
	s := New(br, Options{})
	for _, path := range []string{"/api/queues", "/api/queues?page=1&sort=name"} {
		b.Run(path, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest("GET", path, nil)
				req.RemoteAddr, req.Host = "127.0.0.1:1", "localhost:15672"
				req.SetBasicAuth("guest", "guest")
				w := &discard{h: http.Header{}}
				s.ServeHTTP(w, req)
			}
		})
	}
}
