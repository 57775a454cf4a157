package health

import (
	"fmt"
	"syscall"
)

// StatFS returns the bytes available to an unprivileged user on the file
// system holding path (what a write can still use).
func StatFS(path string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("free disk space of %s: %w", path, err)
	}
	return st.Bavail * uint64(st.Bsize), nil
}
