// Package disktest gives tests a real small file system to fill up, for
// the full-disk paths (ENOSPC) of the WAL and of a running fano. It knows
// nothing of fano, so any package may use it.
package disktest

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// Small mounts a tmpfs of size (as mount takes it: "4m") on a temporary
// directory and returns its path; it is unmounted when the test ends. The
// test skips where mounting is not allowed (it needs root).
func Small(t testing.TB, size string) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a small tmpfs (needs root): %v %s", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// Fill writes the file path until its file system is full; any other
// write error fails the test.
func Fill(t testing.TB, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatalf("fill %s: %v", path, err)
	}
	defer f.Close()
	chunk := make([]byte, 16<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v (want ENOSPC)", path, err)
			}
			return
		}
	}
}
