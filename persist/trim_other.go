//go:build !linux

package persist

// trimMapped is a no-op where MADV_PAGEOUT does not exist.
func trimMapped(dir string) {}
