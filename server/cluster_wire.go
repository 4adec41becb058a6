package server

import (
	"encoding/binary"
	"errors"
)

// The byte encoding of the queue RPCs between nodes (cluster_remote.go,
// cluster_home.go): unsigned varints, and length-prefixed byte strings.

type wbuf struct{ b []byte }

func (w *wbuf) u8(v byte)      { w.b = append(w.b, v) }
func (w *wbuf) uv(v uint64)    { w.b = binary.AppendUvarint(w.b, v) }
func (w *wbuf) bytes(p []byte) { w.uv(uint64(len(p))); w.b = append(w.b, p...) }
func (w *wbuf) str(s string)   { w.uv(uint64(len(s))); w.b = append(w.b, s...) }
func (w *wbuf) flag(v bool)    { w.u8(b2u(v)) }
func (w *wbuf) raw(p []byte)   { w.b = append(w.b, p...) }
func (w *wbuf) strs(s []string) {
	w.uv(uint64(len(s)))
	for _, x := range s {
		w.str(x)
	}
}

func b2u(v bool) byte {
	if v {
		return 1
	}
	return 0
}

var errShortRPC = errors.New("cluster: short or damaged queue RPC")

type rbuf struct {
	b   []byte
	err error
}

func (r *rbuf) fail() { r.err, r.b = errShortRPC, nil }

func (r *rbuf) done() bool { return r.err != nil || len(r.b) == 0 }

func (r *rbuf) u8() byte {
	if len(r.b) < 1 {
		r.fail()
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *rbuf) uv() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

// bytes returns a copy: the request buffer is the RPC layer's.
func (r *rbuf) bytes() []byte {
	n := r.uv()
	if r.err != nil || uint64(len(r.b)) < n {
		r.fail()
		return nil
	}
	out := make([]byte, n)
	copy(out, r.b[:n])
	r.b = r.b[n:]
	return out
}

func (r *rbuf) str() string {
	n := r.uv()
	if r.err != nil || uint64(len(r.b)) < n {
		r.fail()
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *rbuf) flag() bool { return r.u8() == 1 }

func (r *rbuf) strs() []string {
	n := r.uv()
	if r.err != nil || n > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	out := make([]string, 0, n)
	for range n {
		out = append(out, r.str())
	}
	return out
}
