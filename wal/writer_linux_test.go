package wal

import (
	"os/exec"
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

// BenchmarkCommitWhileCoresBusy: 64 goroutines appending one ~200-byte
// entry each at a time (real fsync), while as many other processes as
// there are CPUs spin, with the writer's short slice and, as the baseline
// in the same run, with the kernel's own. A commit waits for the disk,
// then for a CPU to finish: the second wait is what the slice shortens.
func BenchmarkCommitWhileCoresBusy(b *testing.B) {
	payload := make([]byte, 200)
	spin := func(b *testing.B) func() {
		var cmds []*exec.Cmd
		for range runtime.NumCPU() {
			c := exec.Command("sh", "-c", "while :; do :; done")
			if err := c.Start(); err != nil {
				b.Fatal(err)
			}
			cmds = append(cmds, c)
		}
		return func() {
			for _, c := range cmds {
				_ = c.Process.Kill()
				_ = c.Wait()
			}
		}
	}
	for _, c := range []struct {
		name  string
		slice time.Duration
	}{{"slice=100us", 0}, {"kernel-slice", -1}} {
		b.Run(c.name, func(b *testing.B) {
			stop := spin(b)
			defer stop()
			benchFanoWith(b, 64, payload, Options{WriterSlice: c.slice})
		})
	}
}
