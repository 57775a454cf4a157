package actors

import (
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"fano/actors/allocator"
	"fano/actors/scheduler"
	"fano/modules"
	"fano/modules/probe"
	"fano/pb"
	"fano/wal"
)

func TestRunToCompletion(t *testing.T) {
	b := setup(t, setupOpts{probe: probe.Config{Questions: questions(6), Turns: 3}})
	b.start()
	b.waitCompleted(6)
	var answers map[string][]string
	require.NoError(t, b.sys.WithModule(probe.Name, func(m modules.Module) { answers = m.(*probe.Module).Answers() }))
	require.Len(t, answers, 6)
	for id, a := range answers {
		require.Len(t, a, 3, "task %s", id)
		for _, s := range a {
			require.NotEmpty(t, s)
		}
	}
	for _, light := range b.sys.Tasks(nil, 0) {
		// In memory a finished task keeps no messages; its conversation
		// is read back from the archive.
		require.True(t, light.Archived, light.Id)
		require.Empty(t, light.Conversation.GetMessages(), light.Id)
		tk, ok := b.sys.Task(light.Id)
		require.True(t, ok)
		require.Equal(t, pb.TaskState_TASK_STATE_COMPLETED, tk.State, tk.Id)
		require.EqualValues(t, 3, tk.RequestCount)
		require.EqualValues(t, 3, tk.Conversation.TurnCount)
		require.Len(t, tk.Conversation.Messages, 6)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, b.sys.WaitIdle(ctx))
}

// Every owner of state: the state after a live run equals the state
// rebuilt by replaying its WAL, from scratch and from a checkpoint taken
// mid-run plus the entries after it.
func TestReplayEqualsLive(t *testing.T) {
	b := setup(t, setupOpts{probe: probe.Config{Questions: questions(8), Turns: 2, DeepQuestions: 2}, deep: 10})
	sys := b.start()
	b.waitCompleted(3)
	require.NoError(t, sys.Checkpoint())
	b.waitCompleted(5)

	var sched *pb.SchedulerSnapshot
	var alloc *pb.AllocatorSnapshot
	sys.state.withScheduler(func(st *scheduler.State) { sched = st.Snapshot() })
	sys.state.withAllocator(func(bk *allocator.Book) { alloc = bk.Snapshot() })
	var probeSnap []byte
	var err error
	// Under the module's guard: its host may be applying events now.
	require.NoError(t, sys.WithModule(probe.Name, func(m modules.Module) { probeSnap, err = m.Snapshot() }))
	require.NoError(t, err)
	// Stop the actors without the final checkpoint, so the checkpoint
	// rebuild below starts from the mid-run one.
	sys.accepting.Store(false)
	require.NoError(t, sys.Stop())

	// Stop wrote a final checkpoint and pause events only if work was
	// running; compare against what the log holds now.
	sys2 := b.rebuildScheduler(false)
	require.True(t, proto.Equal(sys2.Snapshot(), b.rebuildScheduler(true).Snapshot()), "scheduler: replay from scratch vs checkpoint+replay")
	require.True(t, proto.Equal(b.rebuildAllocator(false).Snapshot(), b.rebuildAllocator(true).Snapshot()), "allocator: scratch vs checkpoint")
	require.True(t, proto.Equal(alloc, b.rebuildAllocator(false).Snapshot()), "allocator: live vs replay")

	// The live scheduler snapshot was taken before Stop paused anything
	// that was running; every task finished by then is identical.
	rebuilt := map[string]*pb.Task{}
	for _, tk := range sys2.Snapshot().Tasks {
		rebuilt[tk.Id] = tk
	}
	for _, tk := range sched.Tasks {
		if scheduler.IsFinished(tk.State) {
			require.True(t, proto.Equal(tk, rebuilt[tk.Id]), "task %s", tk.Id)
		}
	}

	fresh := probe.New(probe.Config{Questions: questions(8), Turns: 2})
	s, err := newSystem(b.opts)
	require.NoError(t, err)
	require.NoError(t, replay(b.log, map[string]*owned{moduleOwner(probe.Name): {apply: func(e *pb.Event) error {
		return fresh.Apply(e.GetModuleEvent(), timeOf(e.At))
	}}}, nil))
	_ = s
	freshSnap, err := fresh.Snapshot()
	require.NoError(t, err)
	require.JSONEq(t, string(probeSnap), string(freshSnap), "probe module: live vs replay")
}

// crash makes an actor panic, as a bug in its own code would: it is
// handed a delivered batch whose continuation panics.
func crash(sys *System, owner string, pid *actor.PID) {
	group := sys.desks.desk(owner).box.put([]*batch{{then: func([]uint64, error) { panic("test: " + owner + " crash") }}})
	sys.root.Send(pid, &pb.Persisted{Group: group})
}

// Slots live in the allocator only: an allocator that restarts takes back
// the slots its predecessor lent, so a running task's slot is neither
// lost nor counted twice.
func TestRestartedAllocatorKeepsSlotsInUse(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC))
	b := setup(t, setupOpts{clock: clock, backends: []string{"a"}, conc: 2, latency: time.Hour, memory: true,
		probe: probe.Config{NoPropose: true, Turns: 1}, mutate: func(o *Options) { o.TickInterval = time.Hour }})
	sys := b.start()
	_, err := sys.Submit(probeTask(1, 0))
	require.NoError(t, err)
	sys.Tick()
	b.waitEvent("the request", func(n Notice) bool { return n.Event.GetLlmRequestStarted() != nil })
	inUse := func() int {
		for _, q := range sys.Quotas() {
			if q.Name == "a" {
				return q.InUse
			}
		}
		return -1
	}
	require.Equal(t, 1, inUse())
	crash(sys, ownerAllocator, sys.allocatorPID)
	require.Equal(t, 1, inUse(), "the restarted allocator holds the running task's slot")
}

// The allocator tells the scheduler its free view only when it changes:
// a scheduler restarted while nothing runs (the view stays the same)
// still knows it, and starts the tasks submitted after.
func TestRestartedSchedulerKnowsFreeBackends(t *testing.T) {
	b := setup(t, setupOpts{backends: []string{"a"}, probe: probe.Config{NoPropose: true, Turns: 1}, memory: true})
	sys := b.start()
	require.NoError(t, sys.state.barrier(sys.allocatorPID)) // its first view is out
	require.NoError(t, sys.state.barrier(sys.schedulerPID))
	crash(sys, ownerScheduler, sys.schedulerPID)
	r, err := sys.Submit(probeTask(1, 0))
	require.NoError(t, err)
	require.True(t, r.Accepted, r.Reason)
	b.waitCompleted(1)
}

// The scheduler starts the executors and cancels them: a scheduler
// restarted while a task runs still reaches its executor.
func TestRestartedSchedulerCancelsARunningTask(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC))
	b := setup(t, setupOpts{clock: clock, backends: []string{"a"}, latency: time.Hour, memory: true,
		probe: probe.Config{NoPropose: true, Turns: 1}, mutate: func(o *Options) { o.TickInterval = time.Hour }})
	sys := b.start()
	task := probeTask(1, 0)
	_, err := sys.Submit(task)
	require.NoError(t, err)
	sys.Tick()
	b.waitEvent("the request", func(n Notice) bool { return n.Event.GetLlmRequestStarted() != nil })
	crash(sys, ownerScheduler, sys.schedulerPID)
	require.NoError(t, sys.Cancel(task.Id, "not needed"))
	b.waitEvent("the cancel", func(n Notice) bool { return n.Event.GetTaskCancelled() != nil })
}

// A child that panics is restarted by the orchestrator and gets its state
// back from the WAL; work goes on to the end.
func TestSupervisorRestartsPanickingChild(t *testing.T) {
	b := setup(t, setupOpts{probe: probe.Config{Questions: questions(10), Turns: 2}, latency: 0})
	sys := b.start()
	b.waitCompleted(2)

	var before *pb.SchedulerSnapshot
	sys.state.withScheduler(func(st *scheduler.State) { before = st.Snapshot() })
	crash(sys, ownerScheduler, sys.schedulerPID)
	crash(sys, ownerAllocator, sys.allocatorPID)
	crash(sys, moduleOwner(probe.Name), sys.modulePIDs[probe.Name])

	// The restarted scheduler knows every task it knew before.
	var after *pb.SchedulerSnapshot
	sys.state.withScheduler(func(st *scheduler.State) { after = st.Snapshot() })
	ids := map[string]bool{}
	for _, tk := range after.Tasks {
		ids[tk.Id] = true
	}
	for _, tk := range before.Tasks {
		require.True(t, ids[tk.Id], "task %s lost in the restart", tk.Id)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := sys.WaitIdle(ctx); err != nil {
		t.Logf("counts %v, executors %d", sys.Counts(), sys.Running())
		for _, q := range sys.Quotas() {
			t.Logf("backend %+v", q)
		}
		for _, tk := range sys.Tasks(func(tk *pb.Task) bool { return tk.State != pb.TaskState_TASK_STATE_COMPLETED }, 0) {
			t.Logf("task %s %s picked? llm %s reason %q", tk.Id, tk.State, tk.LlmAssigned, tk.PauseReason)
		}
		t.Fatal(err)
	}
	for _, tk := range sys.Tasks(nil, 0) {
		require.Equal(t, pb.TaskState_TASK_STATE_COMPLETED, tk.State, tk.Id)
	}
	var answers map[string][]string
	require.NoError(t, sys.WithModule(probe.Name, func(m modules.Module) { answers = m.(*probe.Module).Answers() }))
	require.Len(t, answers, 10)
	for id, a := range answers {
		if len(a) != 2 {
			dumpTask(t, b, id)
		}
		require.Len(t, a, 2, "task %s: the restarted module lost or doubled answers", id)
	}
}

// dumpTask logs a task's events in the WAL (for a failing test).
func dumpTask(t *testing.T, b *bundle, id string) {
	_ = b.log.Replay(1, func(ent wal.Entry) error {
		e, err := decodeEvent(ent)
		if err != nil {
			return nil
		}
		if tid, _ := scheduler.TaskID(e); tid == id || e.GetModuleEvent().GetTaskId() == id {
			t.Logf("seq %d %s %s %v", ent.Seq, ent.Owner, ent.Type, e.Body)
		}
		return nil
	})
}

// Shutdown in the middle of requests pauses running tasks (never FAILED)
// and the next start finishes them.
func TestShutdownPausesThenResumes(t *testing.T) {
	b := setup(t, setupOpts{probe: probe.Config{Questions: questions(4), Turns: 2}, latency: time.Hour})
	sys := b.start()
	// Wait until requests are in flight (the sim waits an hour for them).
	for i := 0; i < 3; i++ {
		b.waitEvent("request started", func(n Notice) bool { return n.Event.GetLlmRequestStarted() != nil })
	}
	require.NoError(t, sys.Stop())

	st := b.rebuildScheduler(false)
	paused := 0
	for _, tk := range st.Snapshot().Tasks {
		require.NotEqual(t, pb.TaskState_TASK_STATE_FAILED, tk.State, tk.Id)
		require.NotEqual(t, pb.TaskState_TASK_STATE_RUNNING, tk.State, tk.Id)
		if tk.State == pb.TaskState_TASK_STATE_PAUSED {
			require.Equal(t, "shutdown", tk.PauseReason)
			require.False(t, tk.Conversation.GetAwaitingResponse(), "a cancelled request leaves no unanswered prompt")
			paused++
		}
	}
	require.Equal(t, 3, paused, "three tasks were running (one per backend)")

	// Start again with fast backends: everything completes.
	b2 := setup(t, setupOpts{probe: probe.Config{Questions: questions(4), Turns: 2}})
	b2.log, b2.opts.Log = b.log, b.log
	b2.opts.Modules[0] = b2.probe
	sys2 := b2.start()
	require.Equal(t, 0, sys2.Report().TasksPaused, "nothing was left RUNNING")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, sys2.WaitIdle(ctx))
	for _, tk := range sys2.Tasks(nil, 0) {
		require.Equal(t, pb.TaskState_TASK_STATE_COMPLETED, tk.State, tk.Id)
	}
}
