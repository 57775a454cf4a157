// Package procs sets how many threads run Go code at once (GOMAXPROCS)
// in a fano process.
//
// fano's WAL writer spends most of its time in fdatasync. A goroutine in
// a system call keeps its P until the runtime's monitor notices and
// hands the P on, tens of microseconds later; on a two-core machine each
// group commit thus takes one of the two Ps away for part of its fsync,
// and the actors and executors that would run meanwhile wait. With one P
// more than the runtime chose, the cores stay at work while the writer
// waits on the disk.
package procs

import (
	"os"
	"runtime"
	"sync"
)

// For is the GOMAXPROCS fano runs with when the runtime chose chosen (the
// CPUs it may use) and the environment's GOMAXPROCS is env: one more than
// chosen, or chosen itself when env is set (the runtime applied it, and a
// person's choice wins).
func For(chosen int, env string) int {
	if env != "" {
		return chosen
	}
	return chosen + 1
}

var (
	once   sync.Once
	n      int
	source string
)

// Set gives this process the GOMAXPROCS of For, once: later calls change
// nothing and return the same. It returns the value and who chose it
// ("GOMAXPROCS" for the environment). Call it before any work starts.
func Set() (procs int, from string) {
	once.Do(func() {
		env := os.Getenv("GOMAXPROCS")
		n = For(runtime.GOMAXPROCS(0), env)
		source = "fano: the CPUs + 1"
		if env != "" {
			source = "GOMAXPROCS"
		}
		runtime.GOMAXPROCS(n)
	})
	return n, source
}
