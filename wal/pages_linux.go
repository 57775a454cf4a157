//go:build linux

package wal

import "golang.org/x/sys/unix"

// dropMapped tells the kernel the size bytes mapped at addr (bbolt's
// read-only shared mapping of the file) are not needed now.
func dropMapped(addr uintptr, size int64) error {
	if addr == 0 || size <= 0 {
		return nil
	}
	if _, _, errno := unix.Syscall(unix.SYS_MADVISE, addr, uintptr(size), unix.MADV_DONTNEED); errno != 0 {
		return errno
	}
	return nil
}
