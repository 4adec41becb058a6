package cluster

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
)

// Every inter-node connection starts with this handshake, after TLS when
// it is on. It proves to each side that the other knows the cluster
// secret without sending it (HMAC-SHA256 over both sides' fresh nonces),
// tells each side the other's node name, and names the channel the
// connection carries ("rpc" or "raft/<group>"). The dialler D and the
// acceptor A exchange:
//
//	D -> A  "WRNC" version nonceD[32]
//	A -> D  "WRNC" version nonceA[32] instanceA[16] name(A) macA[32]
//	D -> A  0 instanceD[16] name(D) channel macD[32]   | 1 reason
//	A -> D  0                                          | 1 reason
//
// where a name, channel or reason is one length byte and its bytes,
// macA = HMAC(secret, "warren-cluster acceptor" nonceD nonceA instanceA
// name(A)) and macD = HMAC(secret, "warren-cluster dialer" nonceA nonceD
// instanceD name(D) channel name(A)). Each MAC covers the other side's
// fresh nonce, under its own role's label, so neither can be replayed or
// reflected. A side that refuses the other says why (status 1) and both
// log it. instance is random per process: a node that dials itself knows
// it, and two processes with one name are told apart.

const (
	handshakeMagic   = "WRNC"
	handshakeVersion = 2 // 2: the shared Raft connection (raftmux.go)
	nonceLen         = 32
	macLen           = sha256.Size
	instanceLen      = 16
)

// ErrRefused is wrapped by the error of a connection refused in the
// handshake, by either side.
var ErrRefused = errors.New("cluster: connection refused")

// peer is what a handshake tells about the other side.
type peer struct {
	name     string
	instance [instanceLen]byte
}

type instanceID = [instanceLen]byte

func newInstance() instanceID {
	var id instanceID
	_, _ = rand.Read(id[:]) // never fails (crypto/rand)
	return id
}

// refusal is a refusal sent or received in the handshake.
type refusal struct {
	byPeer bool   // the peer refused us (else we refused it)
	reason string // what was said
}

func (r *refusal) Error() string {
	if r.byPeer {
		return "refused by the peer: " + r.reason
	}
	return "refused: " + r.reason
}

func (r *refusal) Unwrap() error { return ErrRefused }

const (
	reasonSecret  = "the nodes' cluster secrets differ"
	labelAcceptor = "warren-cluster acceptor"
	labelDialler  = "warren-cluster dialer"
)

func mac(secret []byte, label string, parts ...[]byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(label))
	for _, p := range parts {
		h.Write([]byte{byte(len(p) >> 8), byte(len(p))})
		h.Write(p)
	}
	return h.Sum(nil)
}

// clientHandshake runs the dialler's side on c for channel. The caller
// sets c's deadline.
func clientHandshake(c net.Conn, secret []byte, self peer, channel string) (peer, error) {
	var p peer
	w := bufio.NewWriter(c)
	r := bufio.NewReader(c)
	nonceD := make([]byte, nonceLen)
	_, _ = rand.Read(nonceD)
	w.WriteString(handshakeMagic)
	w.WriteByte(handshakeVersion)
	w.Write(nonceD)
	if err := w.Flush(); err != nil {
		return p, err
	}
	hdr := make([]byte, len(handshakeMagic)+1+nonceLen+instanceLen)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return p, fmt.Errorf("reading the peer's greeting: %w", err)
	}
	if string(hdr[:4]) != handshakeMagic {
		return p, &refusal{reason: "the peer is not a Warren cluster listener"}
	}
	if hdr[4] != handshakeVersion {
		return p, &refusal{reason: fmt.Sprintf("the peer speaks cluster protocol version %d, this node %d", hdr[4], handshakeVersion)}
	}
	nonceA := hdr[5 : 5+nonceLen]
	copy(p.instance[:], hdr[5+nonceLen:])
	name, err := readShort(r)
	if err != nil {
		return p, err
	}
	p.name = name
	macA := make([]byte, macLen)
	if _, err := io.ReadFull(r, macA); err != nil {
		return p, err
	}
	if !hmac.Equal(macA, mac(secret, labelAcceptor, nonceD, nonceA, p.instance[:], []byte(p.name))) {
		w.WriteByte(1)
		writeShort(w, reasonSecret)
		_ = w.Flush()
		return p, &refusal{reason: reasonSecret}
	}
	w.WriteByte(0)
	w.Write(self.instance[:])
	writeShort(w, self.name)
	writeShort(w, channel)
	w.Write(mac(secret, labelDialler, nonceA, nonceD, self.instance[:], []byte(self.name), []byte(channel), []byte(p.name)))
	if err := w.Flush(); err != nil {
		return p, err
	}
	status, err := r.ReadByte()
	if err != nil {
		return p, fmt.Errorf("reading the peer's answer: %w", err)
	}
	if status != 0 {
		reason, err := readShort(r)
		if err != nil {
			return p, err
		}
		return p, &refusal{byPeer: true, reason: reason}
	}
	if r.Buffered() > 0 {
		return p, errors.New("the peer sent data before the handshake ended")
	}
	return p, nil
}

// serverHandshake runs the acceptor's side on c; accept says whether the
// channel the dialler named is served here ("" or why not). The caller
// sets c's deadline.
func serverHandshake(c net.Conn, secret []byte, self peer, accept func(channel string) string) (peer, string, error) {
	var p peer
	w := bufio.NewWriter(c)
	r := bufio.NewReaderSize(c, 512)
	hdr := make([]byte, len(handshakeMagic)+1+nonceLen)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return p, "", fmt.Errorf("reading the greeting: %w", err)
	}
	if string(hdr[:4]) != handshakeMagic {
		return p, "", &refusal{reason: "not a Warren cluster connection"}
	}
	nonceD := hdr[5:]
	nonceA := make([]byte, nonceLen)
	_, _ = rand.Read(nonceA)
	w.WriteString(handshakeMagic)
	w.WriteByte(handshakeVersion)
	w.Write(nonceA)
	w.Write(self.instance[:])
	writeShort(w, self.name)
	w.Write(mac(secret, labelAcceptor, nonceD, nonceA, self.instance[:], []byte(self.name)))
	if err := w.Flush(); err != nil {
		return p, "", err
	}
	if hdr[4] != handshakeVersion {
		return p, "", &refusal{reason: fmt.Sprintf("the peer speaks cluster protocol version %d, this node %d", hdr[4], handshakeVersion)}
	}
	status, err := r.ReadByte()
	if err != nil {
		return p, "", err
	}
	if status != 0 {
		reason, err := readShort(r)
		if err != nil {
			return p, "", err
		}
		return p, "", &refusal{byPeer: true, reason: reason}
	}
	if _, err := io.ReadFull(r, p.instance[:]); err != nil {
		return p, "", err
	}
	if p.name, err = readShort(r); err != nil {
		return p, "", err
	}
	channel, err := readShort(r)
	if err != nil {
		return p, "", err
	}
	macD := make([]byte, macLen)
	if _, err := io.ReadFull(r, macD); err != nil {
		return p, "", err
	}
	refuse := func(reason string) (peer, string, error) {
		w.WriteByte(1)
		writeShort(w, reason)
		_ = w.Flush()
		return p, "", &refusal{reason: reason}
	}
	if !hmac.Equal(macD, mac(secret, labelDialler, nonceA, nonceD, p.instance[:], []byte(p.name), []byte(channel), []byte(self.name))) {
		return refuse(reasonSecret)
	}
	if r.Buffered() > 0 {
		return refuse("data sent before the handshake ended")
	}
	if why := accept(channel); why != "" {
		return refuse(why)
	}
	w.WriteByte(0)
	if err := w.Flush(); err != nil {
		return p, "", err
	}
	return p, channel, nil
}

func writeShort(w *bufio.Writer, s string) {
	if len(s) > 255 {
		s = s[:255]
	}
	w.WriteByte(byte(len(s)))
	w.WriteString(s)
}

func readShort(r *bufio.Reader) (string, error) {
	n, err := r.ReadByte()
	if err != nil {
		return "", err
	}
	b := make([]byte, n) // at most 255: one length byte
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return string(b), nil
}
