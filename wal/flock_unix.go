//go:build unix

package wal

import (
	"os"
	"syscall"
)

// lockExclusive takes the same lock bbolt takes (flock), without waiting.
func lockExclusive(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}
