package actors

import (
	"context"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"fano/actors/scheduler"
	"fano/modules/probe"
	"fano/pb"
)

// A batch is answered task by task, as single submits are: a bad task
// gets one error naming it, an id twice in the batch or already queued is
// a duplicate, the others are queued; and what the batch acknowledged is
// in the WAL: replaying it gives the live scheduler's state.
func TestSubmitBatchAnswersEachTaskAndReplaysAsLive(t *testing.T) {
	b := setup(t, setupOpts{probe: probe.Config{NoPropose: true}, mutate: func(o *Options) { o.HoldWork = true }})
	sys := b.start()

	rs, err := sys.SubmitBatch(nil)
	require.NoError(t, err)
	require.Empty(t, rs)

	ghost := &pb.Task{Id: "ghost/exploration/x", Module: "ghost", TaskType: "exploration", Subject: "x"}
	misnamed := probeTask(3, 0)
	misnamed.Id = "probe/exploration/not-its-subject"
	batch := []*pb.Task{probeTask(1, 0), probeTask(1, 0), ghost, misnamed, probeTask(2, 0)}
	rs, err = sys.SubmitBatch(batch)
	require.NoError(t, err)
	require.Len(t, rs, len(batch))
	for i, r := range rs {
		require.Equal(t, batch[i].Id, r.TaskId, "reply %d", i)
	}
	assert.True(t, rs[0].Accepted, rs[0].Reason)
	assert.True(t, rs[1].Duplicate && !rs[1].Accepted, "the same id later in the batch: %v", rs[1])
	assert.Contains(t, rs[1].Reason, batch[1].Id)
	for _, r := range rs[2:4] {
		assert.False(t, r.Accepted || r.Duplicate, "bad task %s: %v", r.TaskId, r)
		assert.Contains(t, r.Reason, r.TaskId, "the error names the task")
		_, ok := sys.Task(r.TaskId)
		assert.False(t, ok, "bad task %s queued", r.TaskId)
	}
	assert.True(t, rs[4].Accepted, rs[4].Reason)

	// A second batch meets the first's tasks as duplicates.
	rs, err = sys.SubmitBatch([]*pb.Task{probeTask(2, 0), probeTask(4, 0)})
	require.NoError(t, err)
	assert.True(t, rs[0].Duplicate && !rs[0].Accepted, "%v", rs[0])
	assert.True(t, rs[1].Accepted, rs[1].Reason)

	var live *pb.SchedulerSnapshot
	sys.state.withScheduler(func(st *scheduler.State) { live = st.Snapshot() })
	require.Len(t, live.Tasks, 3)
	require.NoError(t, sys.Stop())
	assert.True(t, proto.Equal(live, b.rebuildScheduler(false).Snapshot()), "scheduler: live vs replay from scratch")
	assert.True(t, proto.Equal(live, b.rebuildScheduler(true).Snapshot()), "scheduler: live vs checkpoint+replay")
}

// A module host submits a proposal round's new tasks as one message (and
// one journal batch), not one message per task: the scheduler's mailbox
// sees the batch and its journal's delivery, nothing per task.
func TestModuleHostProposesInOneBatch(t *testing.T) {
	const n = 20
	b := setup(t, setupOpts{clock: clockwork.NewFakeClock(), probe: probe.Config{Questions: questions(n), Turns: 1},
		mutate: func(o *Options) { o.HoldWork, o.DispatchOnTick = true, true }})
	sys := b.start()
	// The start's tick has gone through the allocator and the scheduler.
	for _, pid := range []*actor.PID{sys.allocatorPID, sys.schedulerPID} {
		_, err := request[*pb.BarrierReply](sys.asks, context.Background(), pid, &pb.Barrier{})
		require.NoError(t, err)
	}
	posted0 := sys.mailboxes.posted(sys.schedulerPID.Id)
	sys.accepting.Store(true) // only the proposal below: the fake clock never ticks, nothing is dispatched
	sys.tickModules(&pb.Tick{Now: nanos(b.clock.Now())})
	for range n {
		b.waitEvent("a proposed task queued", func(n Notice) bool { return n.Event.GetTaskSubmitted() != nil })
	}
	got := sys.mailboxes.posted(sys.schedulerPID.Id) - posted0
	assert.LessOrEqual(t, got, int64(2), "messages to the scheduler for one round of %d proposals", n)
	_, err := request[*pb.BarrierReply](sys.asks, context.Background(), sys.modulePIDs[probe.Name], &pb.Barrier{})
	require.NoError(t, err)
	assert.Equal(t, n, openOffers(b, probe.Name))
}
