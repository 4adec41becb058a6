package server

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/warrenmq/warren/amqp"
)

// Resource alarms, as RabbitMQ has them: when the broker's memory passes
// its high watermark or the free disk space under the data directory falls
// below its limit, connections that publish are blocked (told so with
// connection.blocked when they advertised the capability, and no longer
// read from) until the alarm clears; consumers keep draining meanwhile.

type alarmState struct {
	// raised mirrors memory || disk, for the readers' check of every
	// publishing frame without the mutex.
	raised   atomic.Bool
	mu       sync.Mutex
	memory   bool
	disk     bool
	clear    chan struct{} // closed while no alarm is raised
	memLimit uint64        // bytes; the effective memory high watermark
}

func newAlarmState(memLimit uint64) *alarmState {
	c := make(chan struct{})
	close(c)
	return &alarmState{clear: c, memLimit: memLimit}
}

// blocked returns nil when publishing may go on, or the reason and a
// channel closed when it may again.
func (a *alarmState) blocked() (string, <-chan struct{}) {
	if !a.raised.Load() {
		return "", nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.memory:
		return "low on memory", a.clear
	case a.disk:
		return "low on disk", a.clear
	}
	return "", nil
}

// set records the alarms' state and reports whether it changed.
func (a *alarmState) set(memory, disk bool) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	was := a.memory || a.disk
	a.memory, a.disk = memory, disk
	now := memory || disk
	a.raised.Store(now)
	switch {
	case now && !was:
		a.clear = make(chan struct{})
	case was && !now:
		close(a.clear)
	}
	return was != now
}

// SetMemoryHighWatermark changes the memory limit (bytes) at run time,
// like rabbitmqctl set_vm_memory_high_watermark; the next check applies it.
func (s *Server) SetMemoryHighWatermark(bytes uint64) {
	s.alarms.mu.Lock()
	s.alarms.memLimit = bytes
	s.alarms.mu.Unlock()
}

// runAlarms checks memory and disk every interval, and at once when
// poked, until ctx ends.
func (s *Server) runAlarms(ctx context.Context) {
	t := time.NewTicker(s.cfg.hooks.AlarmInterval)
	defer t.Stop()
	for {
		s.checkAlarms()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.alarmPoke:
		}
	}
}

// pokeAlarms has the alarm monitor check now (the store saw the disk
// filling up between two polls). It never blocks.
func (s *Server) pokeAlarms() {
	select {
	case s.alarmPoke <- struct{}{}:
	default:
	}
}

func (s *Server) checkAlarms() {
	s.alarms.mu.Lock()
	limit := s.alarms.memLimit
	s.alarms.mu.Unlock()
	used := anonMemory()
	free, diskOK := diskFree(s.cfg.DataDir)
	memAlarm := limit > 0 && used >= limit
	diskAlarm := diskOK && free < s.cfg.DiskFreeLimit
	if s.alarms.set(memAlarm, diskAlarm) {
		s.log.Warn().Bool("memory_alarm", memAlarm).Uint64("memory_used", used).Uint64("memory_limit", limit).
			Bool("disk_alarm", diskAlarm).Uint64("disk_free", free).Uint64("disk_free_limit", s.cfg.DiskFreeLimit).
			Msg("resource alarm changed: publishers are blocked while one is raised")
	}
}

// waitUnblocked blocks a publishing connection while an alarm is raised:
// the reader calls it before a basic.publish and before every content
// frame, so that while it waits the socket is not read and no content
// grows.
// It returns errClosed if the connection is being closed meanwhile.
func (c *conn) waitUnblocked() error {
	reason, clear := c.srv.alarms.blocked()
	if clear == nil {
		return nil
	}
	c.fs.flush() // deliveries held back for this reader go out first
	c.log.Warn().Str("reason", reason).Msg("connection blocked: resource alarm")
	if c.caps.connectionBlocked {
		c.out.sendMethod(0, &amqp.ConnectionBlocked{Reason: reason})
	}
	select {
	case <-clear:
	case <-c.quit:
		return errClosed
	}
	if c.caps.connectionBlocked {
		c.out.sendMethod(0, &amqp.ConnectionUnblocked{})
	}
	c.log.Info().Msg("connection unblocked")
	return nil
}

// memoryLimit turns the configured watermark into bytes: a fraction of the
// machine's memory (or of the cgroup's limit, when lower).
func memoryLimit(fraction float64) uint64 {
	total := totalMemory()
	if total == 0 || fraction <= 0 {
		return 0
	}
	return uint64(float64(total) * fraction)
}

// TotalMemory is the machine's memory in bytes, or the cgroup's limit
// when lower (0 if unknown): what a relative memory watermark or disk
// limit is relative to.
func TotalMemory() uint64 { return totalMemory() }

func totalMemory() uint64 {
	var total uint64
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		total = procField(b, "MemTotal:") * 1024
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && n < total {
			total = n
		}
	}
	return total
}

// anonMemory is the process's anonymous resident memory: the heap and
// everything else it allocated, not the page cache of mapped files.
func anonMemory() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	return procField(b, "RssAnon:") * 1024
}

func procField(b []byte, name string) uint64 {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == name {
			n, _ := strconv.ParseUint(f[1], 10, 64)
			return n
		}
	}
	return 0
}

func diskFree(dir string) (uint64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return st.Bavail * uint64(st.Bsize), true
}
