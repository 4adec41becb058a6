package quorum_test

import "syscall"

type syscallRusage = float64

// rusage is the process's CPU seconds so far.
func rusage() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}
