package actors

import (
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"fano/modules/probe"
	"fano/pb"
)

// Finished tasks leave memory after the retention period but stay on
// disk: System.Task reads them back from the archive, with their
// conversations, also after a restart.
func TestFinishedTasksLeaveMemoryButNotDisk(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	b := setup(t, setupOpts{clock: clock, probe: probe.Config{Questions: questions(3), Turns: 2},
		mutate: func(o *Options) { o.FinishedRetention = time.Hour }})
	sys := b.start()
	sys.Tick()
	b.waitCompleted(3)
	require.Len(t, sys.Tasks(nil, 0), 3)

	clock.Advance(2 * time.Hour)
	sys.Tick()
	for gone := 0; gone < 3; {
		gone += len(b.waitEvent("task forgotten", func(n Notice) bool { return n.Event.GetTaskForgotten() != nil }).Event.GetTaskForgotten().IDs())
	}
	require.Empty(t, sys.Tasks(nil, 0), "finished tasks left memory")
	id := probe.Name + "/" + probe.TaskType + "/q0000"
	tk, ok := sys.Task(id)
	require.True(t, ok, "read back from the archive")
	require.Equal(t, pb.TaskState_TASK_STATE_COMPLETED, tk.State)
	require.Len(t, tk.Conversation.Messages, 4)
	r, err := sys.Submit(tk)
	require.NoError(t, err)
	require.False(t, r.Accepted, "a forgotten key is not queued again")
	require.NoError(t, sys.Stop())

	b2 := setup(t, setupOpts{clock: clock, probe: probe.Config{Questions: questions(3), Turns: 2}})
	b2.opts.Log = b.log
	sys2 := b2.start()
	require.Empty(t, sys2.Tasks(nil, 0), "the forgetting survives a restart")
	tk, ok = sys2.Task(id)
	require.True(t, ok)
	require.EqualValues(t, 2, tk.Conversation.TurnCount)
}

// Past MaxFinishedInMemory finished tasks, the oldest leave memory long
// before their retention, down to the bound: counts still hold them, the
// archive still has them, their keys stay taken, also after a restart.
func TestFinishedTasksPastTheBoundLeaveMemory(t *testing.T) {
	const n, keep = 30, 4
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	b := setup(t, setupOpts{clock: clock, hourly: 1000, probe: probe.Config{Questions: questions(n), Turns: 1},
		mutate: func(o *Options) { o.FinishedRetention = 24 * time.Hour; o.MaxFinishedInMemory = keep }})
	sys := b.start()
	for done := 0; done < n; done++ {
		b.tickHandled() // a tick dispatches what waits, and forgets past the bound
		b.waitEvent("a completion", func(n Notice) bool { return n.Event.GetTaskCompleted() != nil })
	}
	const most = keep + keep/4 // a pass starts past this and leaves keep
	for {
		b.tickHandled()
		if len(sys.Tasks(nil, 0)) <= most {
			break
		}
		b.waitEvent("task forgotten", func(n Notice) bool { return n.Event.GetTaskForgotten() != nil })
	}
	inMemory := len(sys.Tasks(nil, 0))
	require.GreaterOrEqual(t, inMemory, keep, "the newest finished stay in memory")
	require.Equal(t, n, sys.Counts()[probe.Name][pb.TaskState_TASK_STATE_COMPLETED], "the forgotten still count")
	id := probe.Name + "/" + probe.TaskType + "/q0000"
	tk, ok := sys.Task(id)
	require.True(t, ok, "read back from the archive")
	require.Equal(t, pb.TaskState_TASK_STATE_COMPLETED, tk.State)
	r, err := sys.Submit(tk)
	require.NoError(t, err)
	require.False(t, r.Accepted, "a forgotten key is not queued again")
	require.NoError(t, sys.Stop())

	b2 := setup(t, setupOpts{clock: clock, hourly: 1000, probe: probe.Config{Questions: questions(n), Turns: 1},
		mutate: func(o *Options) { o.MaxFinishedInMemory = keep }})
	b2.opts.Log = b.log
	sys2 := b2.start()
	require.Len(t, sys2.Tasks(nil, 0), inMemory, "the forgetting survives a restart")
	require.Equal(t, n, sys2.Counts()[probe.Name][pb.TaskState_TASK_STATE_COMPLETED])
	_, ok = sys2.Task(id)
	require.True(t, ok)
}
