package persist

import (
	"os"
	"syscall"
)

// fdatasync flushes f's data, and its metadata only where needed to read
// the data back (the size of a grown file).
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
