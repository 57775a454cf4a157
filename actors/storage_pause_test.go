package actors

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"fano/gateway"
	"fano/internal/disktest"
	"fano/modules/probe"
	"fano/pb"
	"fano/wal"
)

// heldCalls makes every model call wait until release is closed, counting
// the calls and announcing each on inCall.
type heldCalls struct {
	calls   atomic.Int64
	inCall  chan string
	release chan struct{}
}

func holdCalls(b *bundle) *heldCalls {
	h := &heldCalls{inCall: make(chan string, 1000), release: make(chan struct{})}
	for _, s := range b.sims {
		s.Inject(func(ctx context.Context, req gateway.Request) error {
			h.calls.Add(1)
			h.inCall <- req.TaskID
			select {
			case <-h.release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}
	return h
}

func (h *heldCalls) waitInCall(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for i := 0; i < n; i++ {
		select {
		case <-h.inCall:
		case <-deadline:
			t.Fatalf("only %d of %d calls started", i, n)
		}
	}
}

// failWrites fills the disk and starts a write that needs new pages, so
// the WAL's writer is retrying a failed write when it returns: every
// later append waits behind it. (On a full disk a write that fits in
// freed pages of the file still succeeds.) The filler goes before the
// system stops, also when the test fails.
func failWrites(t *testing.T, disk string, log *wal.Log, changes <-chan StorageChange) (filler string) {
	t.Helper()
	filler = filepath.Join(disk, "filler")
	disktest.Fill(t, filler)
	t.Cleanup(func() { _ = os.Remove(filler) })
	big := make([]byte, 2<<20)
	go func() {
		_, _ = log.Append(context.Background(), wal.Entry{Owner: "test", Type: "filler", Payload: big})
	}()
	for c := range changes {
		if c.Err != nil {
			require.Contains(t, c.Err.Error(), "no space left")
			return filler
		}
	}
	return filler
}

// requireShownPaused checks that every unfinished task shows as PAUSED for
// the storage fault, in Tasks, Task, a filter on state and Counts.
func requireShownPaused(t *testing.T, sys *System, n int, fault string) {
	t.Helper()
	tasks := sys.Tasks(nil, 0)
	require.Len(t, tasks, n)
	for _, tk := range tasks {
		require.Equal(t, pb.TaskState_TASK_STATE_PAUSED, tk.State, tk.Id)
		require.Equal(t, PauseStorage, tk.PauseReason, tk.Id)
		require.Contains(t, tk.Error, fault)
		one, ok := sys.Task(tk.Id)
		require.True(t, ok)
		require.Equal(t, pb.TaskState_TASK_STATE_PAUSED, one.State)
	}
	require.Empty(t, sys.Tasks(func(tk *pb.Task) bool { return tk.State == pb.TaskState_TASK_STATE_RUNNING }, 0))
	require.Len(t, sys.Tasks(func(tk *pb.Task) bool { return tk.PauseReason == PauseStorage }, 0), n)
	counts := sys.Counts()[probe.Name]
	require.Zero(t, counts[pb.TaskState_TASK_STATE_RUNNING])
	require.Equal(t, n, counts[pb.TaskState_TASK_STATE_PAUSED])
}

// requireWrittenOnce replays the WAL: each task was submitted, started and
// completed once, asked each turn once and got one answer per turn, and
// was never paused, resumed or failed in the log (the pause was in memory).
func requireWrittenOnce(t *testing.T, log Store, tasks, turns int) {
	t.Helper()
	seen := map[string]int{}
	byType := map[string]int{}
	require.NoError(t, log.Replay(1, func(ent wal.Entry) error {
		if ent.Owner != ownerScheduler {
			return nil
		}
		e, err := decodeEvent(ent)
		require.NoError(t, err)
		typ := eventType(e)
		byType[typ]++
		switch x := e.Body.(type) {
		case *pb.Event_LlmRequestStarted:
			seen[fmt.Sprintf("%s %s turn %d", x.LlmRequestStarted.TaskId, typ, x.LlmRequestStarted.Turn)]++
		case *pb.Event_LlmResponseReceived:
			seen[fmt.Sprintf("%s %s turn %d", x.LlmResponseReceived.TaskId, typ, x.LlmResponseReceived.Turn)]++
		case *pb.Event_TaskSubmitted:
			seen[x.TaskSubmitted.GetTask().GetId()+" "+typ]++
		case *pb.Event_TaskStarted:
			seen[x.TaskStarted.TaskId+" "+typ]++
		case *pb.Event_TaskCompleted:
			seen[x.TaskCompleted.TaskId+" "+typ]++
		}
		return nil
	}))
	for key, n := range seen {
		require.Equal(t, 1, n, "%s written %d times", key, n)
	}
	require.Equal(t, map[string]int{
		"task_submitted": tasks, "task_started": tasks, "task_completed": tasks,
		"llm_request_started": tasks * turns, "llm_response_received": tasks * turns,
	}, byType)
}

// While WAL writes fail, running tasks are paused in memory: they show as
// PAUSED with the reason, their executors park at the next safe point
// without calling a model or writing; when writes succeed again they go
// on where they were, and the log holds every step once.
func TestStorageFaultPausesRunningTasksInMemory(t *testing.T) {
	watch := NewStorageWatch()
	b := setup(t, setupOpts{backends: []string{"a", "b"}, probe: probe.Config{Questions: questions(2), Turns: 3},
		mutate: func(o *Options) { o.Storage = watch }, noSync: true})
	h := holdCalls(b)
	sys := b.start()
	h.waitInCall(t, 2) // both tasks are in their first call

	full := errors.New("no space left on device")
	watch.Failed(full, 1, time.Now())
	requireShownPaused(t, sys, 2, full.Error())
	require.False(t, sys.Accepting())

	// The calls answer; the answers are saved (only the watch says writes
	// fail) and both runs park before their next step.
	close(h.release)
	deadline := time.After(30 * time.Second)
	for {
		n, moved := sys.storageGate.waiting()
		if n == 2 {
			break
		}
		select {
		case <-moved:
		case <-deadline:
			t.Fatalf("%d of 2 runs parked while writes fail", n)
		}
	}
	require.Equal(t, int64(2), h.calls.Load(), "no model call while paused")
	require.Equal(t, 2, sys.Running(), "paused in memory: the executors wait")
	requireShownPaused(t, sys, 2, full.Error())

	watch.Recovered(time.Second, 2)
	b.waitCompleted(2)
	require.Equal(t, int64(6), h.calls.Load())
	require.NoError(t, sys.Stop())
	requireWrittenOnce(t, b.log, 2, 3)
}

// The same on a real full disk under a real bbolt file: the answers that
// arrive while the disk is full wait in the WAL's retried write, the
// tasks show as paused, and when space comes back fano goes on by itself
// with nothing lost and nothing written twice.
func TestFullDiskPausesRunningTasksThenResumes(t *testing.T) {
	disk := disktest.Small(t, "8m")
	watch := NewStorageWatch()
	changes := make(chan StorageChange, 10000)
	watch.Subscribe(func(c StorageChange) {
		select {
		case changes <- c:
		default:
		}
	})
	log, err := wal.Open(filepath.Join(disk, "fano.db"), wal.Options{
		LockTimeout: time.Second, RetryWrites: 50 * time.Millisecond,
		OnWriteFault:     func(err error, attempt int) { watch.Failed(err, attempt, time.Now()) },
		OnWriteRecovered: watch.Recovered,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = log.Close() })
	b := setup(t, setupOpts{backends: []string{"a", "b"}, probe: probe.Config{Questions: questions(2), Turns: 3},
		mutate: func(o *Options) { o.Log, o.Storage = log, watch }})
	b.log = log
	h := holdCalls(b)
	sys := b.start()
	h.waitInCall(t, 2)

	filler := failWrites(t, disk, log, changes)
	close(h.release) // the answers meet the full disk
	for c := range changes {
		if c.Err != nil && c.Attempts >= 3 {
			break
		}
	}
	requireShownPaused(t, sys, 2, "no space left")
	require.Equal(t, int64(2), h.calls.Load(), "no model call while the disk is full")

	require.NoError(t, os.Remove(filler))
	b.waitCompleted(2)
	require.Equal(t, int64(6), h.calls.Load())
	require.NoError(t, sys.Stop())
	requireWrittenOnce(t, log, 2, 3)
}

// Decisions made on a tick (a paused task's resume, the allocator's
// window resets) are written once even when ticks go on while the WAL
// retries a failed write: a tick does not decide again what an earlier
// one decided and is not yet applied.
func TestFullDiskWritesEachTickDecisionOnce(t *testing.T) {
	disk := disktest.Small(t, "8m")
	clock := clockwork.NewFakeClock()
	watch := NewStorageWatch()
	changes := make(chan StorageChange, 10000)
	watch.Subscribe(func(c StorageChange) {
		select {
		case changes <- c:
		default:
		}
	})
	log, err := wal.Open(filepath.Join(disk, "fano.db"), wal.Options{
		LockTimeout: time.Second, RetryWrites: 50 * time.Millisecond,
		OnWriteFault:     func(err error, attempt int) { watch.Failed(err, attempt, time.Now()) },
		OnWriteRecovered: watch.Recovered,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = log.Close() })
	b := setup(t, setupOpts{clock: clock, backends: []string{"a", "b"}, probe: probe.Config{Questions: questions(1), Turns: 1},
		mutate: func(o *Options) { o.Log, o.Storage = log, watch }})
	b.log = log
	var calls atomic.Int64
	b.sims[0].Inject(func(context.Context, gateway.Request) error {
		if calls.Add(1) == 1 {
			return gateway.Unavailable("a", "down for a moment")
		}
		return nil
	})
	sys := b.start()
	sys.Tick()
	// The task meets a's fault and is paused for another backend; the
	// next tick resumes it.
	b.waitEvent("a failover pause", func(n Notice) bool { return n.Event.GetTaskPaused() != nil })

	filler := failWrites(t, disk, log, changes)
	clock.Advance(time.Hour) // a new hour window too
	for i := 0; i < 5; i++ {
		sys.Tick()
	}
	sys.Tasks(nil, 0) // answers after the ticks in the scheduler's mailbox
	sys.Quotas()      // and in the allocator's

	require.NoError(t, os.Remove(filler))
	b.waitCompleted(1)
	require.NoError(t, sys.Stop())

	seen := map[string]int{}
	require.NoError(t, log.Replay(1, func(ent wal.Entry) error {
		if ent.Owner == "test" {
			return nil
		}
		e, err := decodeEvent(ent)
		require.NoError(t, err)
		switch x := e.Body.(type) {
		case *pb.Event_TaskResumed:
			seen["task_resumed "+x.TaskResumed.TaskId]++
		case *pb.Event_HourWindowReset:
			seen[fmt.Sprintf("hour_window_reset %d", x.HourWindowReset.WindowStart)]++
		case *pb.Event_DayWindowReset:
			seen[fmt.Sprintf("day_window_reset %d", x.DayWindowReset.WindowStart)]++
		}
		return nil
	}))
	require.NotEmpty(t, seen)
	for key, n := range seen {
		require.Equal(t, 1, n, "%s written %d times", key, n)
	}
}

// A stop while the disk is full returns without an error (no checkpoint
// is tried; held runs end without writing), and the next start finds
// every acknowledged step and pauses the tasks that were running.
func TestStopDuringFullDiskReturns(t *testing.T) {
	disk := disktest.Small(t, "8m")
	watch := NewStorageWatch()
	changes := make(chan StorageChange, 10000)
	watch.Subscribe(func(c StorageChange) {
		select {
		case changes <- c:
		default:
		}
	})
	path := filepath.Join(disk, "fano.db")
	log, err := wal.Open(path, wal.Options{
		LockTimeout: time.Second, RetryWrites: 50 * time.Millisecond,
		OnWriteFault:     func(err error, attempt int) { watch.Failed(err, attempt, time.Now()) },
		OnWriteRecovered: watch.Recovered,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = log.Close() })
	b := setup(t, setupOpts{backends: []string{"a", "b"}, probe: probe.Config{Questions: questions(2), Turns: 3},
		mutate: func(o *Options) { o.Log, o.Storage, o.ShutdownTimeout = log, watch, time.Second }})
	b.log = log
	h := holdCalls(b)
	sys := b.start()
	h.waitInCall(t, 2)
	filler := failWrites(t, disk, log, changes)

	// As `fano run` does when it stops during a fault: the retried write
	// gives up (it was never acknowledged) and later writes fail at once.
	log.StopRetrying()
	stopped := make(chan error, 1)
	go func() { stopped <- sys.Stop() }()
	select {
	case err := <-stopped:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Stop waited for the full disk")
	}
	require.NoError(t, log.Close())
	require.NoError(t, os.Remove(filler))

	log2, err := wal.Open(path, wal.Options{LockTimeout: time.Second})
	require.NoError(t, err)
	defer log2.Close()
	rep, err := Recover(Options{Log: log2, Modules: b.opts.Modules, Backends: b.opts.Backends, Allocator: b.opts.Allocator})
	require.NoError(t, err)
	require.Equal(t, 2, rep.TasksPaused, "%+v", rep)
}
