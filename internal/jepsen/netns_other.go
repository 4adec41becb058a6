//go:build !linux

package jepsen

import (
	"context"
	"errors"
	"net"
	"os/exec"
)

// Netns needs Linux network namespaces; elsewhere NewNetns says so.
type Netns struct{}

var errNoNetns = errors.New("network namespaces need Linux")

// NewNetns fails off Linux.
func NewNetns(n int) (*Netns, error) { return nil, errNoNetns }

// CleanStaleNetns does nothing off Linux.
func CleanStaleNetns() {}

func (nn *Netns) Name(i int) string { return "" }
func (nn *Netns) Addr(i int) string { return "" }
func (nn *Netns) Command(i int, name string, args ...string) *exec.Cmd {
	return exec.Command(name, args...)
}
func (nn *Netns) Dial(ctx context.Context, i int, network, addr string) (net.Conn, error) {
	return nil, errNoNetns
}
func (nn *Netns) Listen(i int, network, addr string) (net.Listener, error) { return nil, errNoNetns }
func (nn *Netns) Do(i int, f func() error) error                           { return errNoNetns }
func (nn *Netns) Partition(i, j int) error                                 { return errNoNetns }
func (nn *Netns) Isolate(i int) error                                      { return errNoNetns }
func (nn *Netns) Heal() error                                              { return errNoNetns }
func (nn *Netns) Close() error                                             { return nil }
