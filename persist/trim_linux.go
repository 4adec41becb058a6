package persist

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// madvPageout is MADV_PAGEOUT (Linux 5.4+): reclaim these pages now.
const madvPageout = 21

// trimMapped asks the kernel to reclaim the resident pages of the files
// under dir that Badger has mapped into this process. Badger reads and
// writes its value log and tables through shared file mappings, so every
// page it touched would otherwise count in the broker's RSS for as long as
// the file stays mapped: a drained backlog of 10 GB would look like 10 GB of
// broker memory although it is only the kernel's page cache. Dirty pages
// are written back first, nothing is lost, and a page touched again is
// faulted back in from the page cache. MADV_PAGEOUT is only advice: on an
// address range that was unmapped and reused meanwhile (anonymous memory,
// and this machine has no swap) it does nothing harmful.
func trimMapped(dir string) {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return
	}
	prefix := strings.TrimSuffix(dir, "/") + "/"
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		// start-end perms offset dev inode path
		f := strings.Fields(sc.Text())
		if len(f) < 6 || !strings.HasPrefix(f[5], prefix) {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		syscall.Syscall(syscall.SYS_MADVISE, uintptr(start), uintptr(end-start), madvPageout)
	}
}
