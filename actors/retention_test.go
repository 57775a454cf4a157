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
	for i := 0; i < 3; i++ {
		b.waitEvent("task forgotten", func(n Notice) bool { return n.Event.GetTaskForgotten() != nil })
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
