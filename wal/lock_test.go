package wal

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A second Open of a locked database fails within LockTimeout with
// ErrLocked, naming the pid from the PID file. (flock locks belong to an
// open file description, so a second Open in the same process conflicts
// with the first, as another process would.)
func TestSecondOpenLocked(t *testing.T) {
	dir := t.TempDir()
	path, pidFile := filepath.Join(dir, "fano.db"), filepath.Join(dir, "fano.pid")
	opts := testOptions()
	opts.PIDFile = pidFile
	l := openTest(t, path, opts)
	require.Equal(t, 0, l.StalePID())
	b, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("%d\n", os.Getpid()), string(b))

	opts.LockTimeout = 100 * time.Millisecond
	start := time.Now()
	_, err = Open(path, opts)
	require.Less(t, time.Since(start), 5*time.Second)
	require.ErrorIs(t, err, ErrLocked)
	require.EqualError(t, err, fmt.Sprintf("database %s in use by pid %d", path, os.Getpid()))

	// Without a PID file the error says so in general terms.
	_, err = Open(path, Options{LockTimeout: 50 * time.Millisecond})
	require.ErrorIs(t, err, ErrLocked)
	require.EqualError(t, err, fmt.Sprintf("database %s is locked by another process", path))

	// A PID file naming a dead process is not believed.
	dead := deadPID(t)
	require.NoError(t, os.WriteFile(pidFile, []byte(strconv.Itoa(dead)), 0o644))
	_, err = Open(path, opts)
	require.ErrorIs(t, err, ErrLocked)
	require.EqualError(t, err, fmt.Sprintf("database %s is locked by another process", path))

	// Once closed, the database opens again at once.
	require.NoError(t, l.Close())
	_, err = os.Stat(pidFile)
	require.NoError(t, err, "the pid file is not ours any more, so Close leaves it")
	l2 := openTest(t, path, opts)
	require.Equal(t, dead, l2.StalePID())
}

// A PID file left by a dead process is taken over and reported.
func TestStalePIDFile(t *testing.T) {
	dir := t.TempDir()
	path, pidFile := filepath.Join(dir, "fano.db"), filepath.Join(dir, "fano.pid")
	dead := deadPID(t)
	require.NoError(t, os.WriteFile(pidFile, []byte(fmt.Sprintf("%d\n", dead)), 0o644))
	opts := testOptions()
	opts.PIDFile = pidFile
	l, err := Open(path, opts)
	require.NoError(t, err)
	require.Equal(t, dead, l.StalePID())
	pid, ok := readPIDFile(pidFile)
	require.True(t, ok)
	require.Equal(t, os.Getpid(), pid)
	require.NoError(t, l.Close())
	_, err = os.Stat(pidFile)
	require.True(t, os.IsNotExist(err), "Close removes its pid file")
}

// deadPID returns the pid of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	require.NoError(t, cmd.Run())
	return cmd.Process.Pid
}

// A file another open holds is being written: Open waits for its lock
// and reports it locked, never damaged from pages read mid-write (a
// `fano pipeline status` beside a running pipeline once said "damaged").
// Once nobody holds it, the same file is checked and found damaged.
func TestAFileInUseIsLockedNotDamaged(t *testing.T) {
	dir := t.TempDir()
	whole := filepath.Join(dir, "whole.db")
	bigLog(t, whole)
	path := filepath.Join(dir, "fano.db")
	copyFile(t, whole, path, 3*4096) // what a reader may see of a file mid-write
	holder, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	require.NoError(t, lockExclusive(holder))

	opts := testOptions()
	opts.LockTimeout = 50 * time.Millisecond
	_, err = Open(path, opts)
	require.ErrorIs(t, err, ErrLocked)
	require.NotErrorIs(t, err, ErrDamaged)

	require.NoError(t, holder.Close()) // the lock goes with it
	_, err = Open(path, opts)
	require.ErrorIs(t, err, ErrDamaged)
}
