package wal

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// commitThread appends one entry to l and returns the thread its commit
// ran on and that thread's slice as the kernel reports it.
func commitThread(t *testing.T, l *Log) (tid int, slice time.Duration) {
	t.Helper()
	seen := make(chan [2]int, 1)
	l.hookBeforeCommit = func(int) {
		attr, err := unix.SchedGetAttr(0, 0)
		if err != nil {
			panic(err)
		}
		select {
		case seen <- [2]int{unix.Gettid(), int(attr.Runtime)}:
		default:
		}
	}
	appendT(t, l, ent("o", "t", "x"))
	got := <-seen
	return got[0], time.Duration(got[1])
}

// kernelSlice is the slice the kernel gives a thread that asked for none.
func kernelSlice(t *testing.T) time.Duration {
	t.Helper()
	got := make(chan time.Duration, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		attr, err := unix.SchedGetAttr(0, 0)
		require.NoError(t, err)
		got <- time.Duration(attr.Runtime)
	}()
	return <-got
}

func TestTheWriterCommitsOnAThreadWithAShortSlice(t *testing.T) {
	l := openTest(t, "", testOptions())
	slice, err := l.WriterSlice()
	require.NoError(t, err)
	require.Equal(t, 100*time.Microsecond, slice)
	require.Greater(t, kernelSlice(t), slice, "the kernel's own slice is longer (or this test shows nothing)")
	// Every commit, not only the first, runs on the pinned thread.
	for range 3 {
		tid, got := commitThread(t, l)
		require.Equal(t, l.writer.tid, tid, "the commit ran on another thread than the writer's own")
		require.Equal(t, 100*time.Microsecond, got)
	}
}

func TestANegativeWriterSliceLeavesTheKernelsOwn(t *testing.T) {
	opts := testOptions()
	opts.WriterSlice = -1
	l := openTest(t, "", opts)
	slice, err := l.WriterSlice()
	require.NoError(t, err)
	require.Zero(t, slice)
	_, got := commitThread(t, l)
	require.Equal(t, kernelSlice(t), got)
}
