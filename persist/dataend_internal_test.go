package persist

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// lastNonZero against the byte-by-byte loop it replaces: zeros with a
// few non-zero bytes anywhere, around page edges most of all.
func TestLastNonZero(t *testing.T) {
	naive := func(b []byte) int {
		for i := len(b) - 1; i >= 0; i-- {
			if b[i] != 0 {
				return i
			}
		}
		return -1
	}
	rng := rand.New(rand.NewPCG(1, 2))
	page := len(zeroPage)
	for _, n := range []int{0, 1, 7, page - 1, page, page + 1, 3*page + 5, 1 << 16} {
		b := make([]byte, n)
		if got := lastNonZero(b); got != -1 {
			t.Fatalf("%d zeros: %d, want -1", n, got)
		}
		spots := []int{0, n - 1, page - 1, page, n - page, n - page - 1}
		for range 20 {
			spots = append(spots, rng.IntN(max(n, 1)))
		}
		for _, at := range spots {
			if at < 0 || at >= n {
				continue
			}
			clear(b)
			b[at] = byte(1 + rng.IntN(255))
			if extra := rng.IntN(n); rng.IntN(2) == 0 {
				b[extra] = 1
			}
			if got, want := lastNonZero(b), naive(b); got != want {
				t.Fatalf("len %d, non-zero at %d: %d, want %d", n, at, got, want)
			}
		}
	}
}

// dataEnd is the offset after a file's last non-zero byte, across its
// 1 MiB reads, and 0 for a file of zeros.
func TestDataEnd(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		size, at int64 // at: the last non-zero byte, -1 none
	}{{0, -1}, {4096, -1}, {3 << 20, -1}, {3 << 20, 0}, {3 << 20, 1<<20 - 1}, {3 << 20, 1 << 20}, {3<<20 + 17, 3<<20 + 16}, {3 << 20, 2<<20 + 4095}} {
		p := filepath.Join(dir, "f")
		b := make([]byte, c.size)
		if c.at >= 0 {
			b[c.at] = 0xff
			if c.at > 10 {
				b[c.at-10] = 1
			}
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		end, err := dataEnd(f)
		f.Close()
		if err != nil || end != c.at+1 {
			t.Fatalf("size %d, last non-zero at %d: end %d %v, want %d", c.size, c.at, end, err, c.at+1)
		}
	}
}
