package wal

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
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

// TestAWriterUnderAnotherPolicyKeepsIt: a process someone started under
// another scheduling policy than the default (here SCHED_IDLE, which
// needs no privilege to take; a realtime one is treated alike) keeps it
// on the writer's thread, with no slice asked for and no error. It runs
// in a child process whose every thread has that policy, as under
// `chrt --idle 0 fano run`.
func TestAWriterUnderAnotherPolicyKeepsIt(t *testing.T) {
	if os.Getenv("FANO_WAL_TEST_IDLE_CHILD") == "1" {
		idleWriterChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAWriterUnderAnotherPolicyKeepsIt$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "FANO_WAL_TEST_IDLE_CHILD=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "writer kept SCHED_IDLE", "the child's check did not run")
}

// idleWriterChild puts every thread of this process under SCHED_IDLE,
// then opens a log asking for the default short slice.
func idleWriterChild(t *testing.T) {
	// Threads made meanwhile are cloned from ones already idle or not yet
	// seen: repeat until a pass changes none.
	for changed := true; changed; {
		changed = false
		tasks, err := os.ReadDir("/proc/self/task")
		require.NoError(t, err)
		for _, e := range tasks {
			tid, err := strconv.Atoi(e.Name())
			require.NoError(t, err)
			attr, err := unix.SchedGetAttr(tid, 0)
			if err != nil {
				continue // the thread has ended
			}
			if attr.Policy != unix.SCHED_IDLE {
				attr.Policy, attr.Nice, attr.Runtime = unix.SCHED_IDLE, 0, 0
				if err := unix.SchedSetAttr(tid, attr, 0); err != nil && err != unix.ESRCH {
					t.Fatalf("thread %d: %v", tid, err)
				}
				changed = true
			}
		}
	}
	l := openTest(t, "", testOptions())
	slice, err := l.WriterSlice()
	require.NoError(t, err)
	require.Zero(t, slice, "a slice was asked for under another policy")
	policy := make(chan uint32, 1)
	l.hookBeforeCommit = func(int) {
		attr, err := unix.SchedGetAttr(0, 0)
		if err != nil {
			panic(err)
		}
		select {
		case policy <- attr.Policy:
		default:
		}
	}
	appendT(t, l, ent("o", "t", "x"))
	require.Equal(t, uint32(unix.SCHED_IDLE), <-policy)
	t.Log("writer kept SCHED_IDLE")
}
