package main

import "testing"

func TestParseSizes(t *testing.T) {
	for in, want := range map[string]uint64{
		"50000000": 50_000_000, "50MB": 50_000_000, "50 MB": 50_000_000, "2GiB": 2 << 30,
		"1.5GB": 1_500_000_000, "512k": 512 << 10, "100B": 100, "0": 0,
	} {
		got, err := parseSize(in)
		if err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "lots", "-5MB", "5XB", "MB"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q) accepted", bad)
		}
	}
	if n, err := parseDiskFreeLimit("mem_relative:1.5", 1000); err != nil || n != 1500 {
		t.Errorf("mem_relative:1.5 of 1000 = %d, %v", n, err)
	}
	if n, err := parseDiskFreeLimit("1GB", 1000); err != nil || n != 1e9 {
		t.Errorf("1GB = %d, %v", n, err)
	}
	for _, bad := range []string{"mem_relative:", "mem_relative:-1", "nope"} {
		if _, err := parseDiskFreeLimit(bad, 1000); err == nil {
			t.Errorf("--disk-free-limit %q accepted", bad)
		}
	}
	if f, b, err := parseWatermark("0.4"); err != nil || f != 0.4 || b != 0 {
		t.Errorf("0.4 = %v %v %v", f, b, err)
	}
	if f, b, err := parseWatermark("2GB"); err != nil || f != 0 || b != 2e9 {
		t.Errorf("2GB = %v %v %v", f, b, err)
	}
	for _, bad := range []string{"1.5", "0", "x", "-0.2"} {
		if _, _, err := parseWatermark(bad); err == nil {
			t.Errorf("--vm-memory-high-watermark %q accepted", bad)
		}
	}
}

// TestFormatSize: formatSize writes what parseSize reads back, in the
// largest exact unit (--disk-free-limit's default is shown as 50MB).
func TestFormatSize(t *testing.T) {
	for n, want := range map[uint64]string{50_000_000: "50MB", 0: "0B", 1536: "1536B", 2e9: "2GB", 1500: "1500B", 3000: "3kB"} {
		got := formatSize(n)
		if got != want {
			t.Errorf("formatSize(%d) = %q, want %q", n, got, want)
		}
		if back, err := parseSize(got); err != nil || back != n {
			t.Errorf("parseSize(%q) = %d, %v, want %d", got, back, err, n)
		}
	}
}
