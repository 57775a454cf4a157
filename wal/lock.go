package wal

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// The file lock itself is bbolt's: flock(LOCK_EX) on the database file,
// retried until Options.LockTimeout, released by the kernel when the
// process dies. The PID file only explains a lock timeout: it names the
// process holding the lock. It is written after the lock is taken, so a
// PID file found by whoever holds the lock is always stale.

// lockTimeoutError builds the error of a lock timeout on path, naming the
// pid in pidFile if that process is alive.
func lockTimeoutError(path, pidFile string) error {
	e := &lockedError{path: path}
	if pidFile != "" {
		if pid, ok := readPIDFile(pidFile); ok && pidAlive(pid) {
			e.pid = pid
		}
	}
	return e
}

// readPIDFile returns the pid in the file, false if it is missing or does
// not hold a pid.
func readPIDFile(name string) (int, bool) {
	b, err := os.ReadFile(name)
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, true
}

// takePIDFile writes our pid into name (atomically, via a temporary file
// and rename) and returns the pid of the stale file it replaced, 0 if none.
// Called with the database lock held.
func takePIDFile(name string) (stale int, err error) {
	if pid, ok := readPIDFile(name); ok {
		stale = pid
	}
	tmp, err := os.CreateTemp(filepath.Dir(name), filepath.Base(name)+".tmp*")
	if err != nil {
		return 0, fmt.Errorf("write pid file %s: %w", name, err)
	}
	_, werr := fmt.Fprintf(tmp, "%d\n", os.Getpid())
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp.Name(), 0o644)
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), name)
	}
	if werr != nil {
		_ = os.Remove(tmp.Name())
		return 0, fmt.Errorf("write pid file %s: %w", name, werr)
	}
	return stale, nil
}

// removePIDFile removes name if it still holds our pid.
func removePIDFile(name string) error {
	if pid, ok := readPIDFile(name); !ok || pid != os.Getpid() {
		return nil
	}
	if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove pid file %s: %w", name, err)
	}
	return nil
}

// Holder reports whether another process holds the lock of the database
// at path, without waiting for it and without creating or changing the
// file (a missing file is held by nobody), and the pid pidFile names when
// that process is alive (0: unknown). A start checks it before taking
// anything else, so that a second fano is refused for the data directory
// rather than for whatever it would meet first.
func Holder(path, pidFile string) (held bool, pid int) {
	if !heldByAnother(path) {
		return false, 0
	}
	if p, ok := readPIDFile(pidFile); ok && pidAlive(p) {
		pid = p
	}
	return true, pid
}
