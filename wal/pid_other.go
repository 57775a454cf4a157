//go:build !unix

package wal

import "os"

// pidAlive reports whether a process with this pid exists.
func pidAlive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	_ = p.Release()
	return true
}
