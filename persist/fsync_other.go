//go:build !linux

package persist

import "os"

func fdatasync(f *os.File) error { return f.Sync() }
