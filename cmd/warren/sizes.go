package main

import (
	"fmt"
	"strconv"
	"strings"
)

// Sizes as RabbitMQ's configuration writes them: a number of bytes,
// optionally with a unit (kB, MB, GB: powers of 1000; k/KiB, M/MiB, G/GiB:
// powers of 1024).
var sizeUnits = []struct {
	suffix string
	mult   float64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"k", 1 << 10}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
	{"B", 1},
}

// parseSize reads a byte count with an optional unit.
func parseSize(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	mult := 1.0
	for _, u := range sizeUnits {
		if v, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = strings.TrimSpace(v), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 0 || f*mult > 1<<62 {
		return 0, fmt.Errorf("%q is not a size: want bytes, optionally with a unit (50MB, 2GiB)", s)
	}
	return uint64(f * mult), nil
}

// parseDiskFreeLimit reads --disk-free-limit: an absolute size, or
// mem_relative:F (F times the machine's memory), as RabbitMQ's
// disk_free_limit.absolute and .relative.
func parseDiskFreeLimit(s string, totalMemory uint64) (uint64, error) {
	if v, ok := cutRelative(s); ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			return 0, fmt.Errorf("--disk-free-limit %q: want mem_relative:F with F > 0 (e.g. mem_relative:1.5)", s)
		}
		if totalMemory == 0 {
			return 0, fmt.Errorf("--disk-free-limit %q: the machine's memory is unknown; give an absolute size", s)
		}
		return uint64(f * float64(totalMemory)), nil
	}
	n, err := parseSize(s)
	if err != nil {
		return 0, fmt.Errorf("--disk-free-limit: %w, or mem_relative:F", err)
	}
	return n, nil
}

func cutRelative(s string) (string, bool) {
	for _, p := range []string{"mem_relative:", "mem_relative=", "mem_relative "} {
		if v, ok := strings.CutPrefix(strings.TrimSpace(s), p); ok {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// parseWatermark reads --vm-memory-high-watermark: a fraction of the
// machine's memory (0.4; RabbitMQ's vm_memory_high_watermark.relative) or
// an absolute size with a unit (2GB; .absolute).
func parseWatermark(s string) (fraction float64, bytes uint64, err error) {
	if f, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
		if f <= 0 || f >= 1 {
			return 0, 0, fmt.Errorf("--vm-memory-high-watermark %q: a fraction of memory is between 0 and 1 (e.g. 0.4); an absolute limit has a unit (2GB)", s)
		}
		return f, 0, nil
	}
	n, err := parseSize(s)
	if err != nil || n == 0 {
		return 0, 0, fmt.Errorf("--vm-memory-high-watermark %q: want a fraction (0.4) or a size with a unit (2GB)", s)
	}
	return 0, n, nil
}

// formatSize writes n as parseSize reads it, in the largest power-of-1000
// unit that divides it (50000000: 50MB).
func formatSize(n uint64) string {
	for _, u := range []struct {
		suffix string
		mult   uint64
	}{{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"kB", 1e3}} {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatUint(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatUint(n, 10) + "B"
}
