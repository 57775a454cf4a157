package actors

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/pb"
)

// A task stays ahead until every batch queued for it is applied, and a
// copy of it never changes the task replies share.
func TestAheadTasksLastUntilTheirBatchesApply(t *testing.T) {
	h := aheadTasks{}
	first := &pb.Task{Id: "t", State: pb.TaskState_TASK_STATE_RUNNING}
	h.queued("t", first)
	h.queued("t", &pb.Task{Id: "t", State: pb.TaskState_TASK_STATE_COMPLETED})
	h.settle("t")
	c, ok := h.copyOf("t")
	require.True(t, ok, "one batch still pending")
	assert.Equal(t, pb.TaskState_TASK_STATE_COMPLETED, c.State, "the task after the last batch")
	c.State = pb.TaskState_TASK_STATE_FAILED
	assert.Equal(t, pb.TaskState_TASK_STATE_COMPLETED, h["t"].task.State, "a copy")
	h.settle("t")
	_, ok = h.copyOf("t")
	assert.False(t, ok, "all applied: the state holds it")
	h.settle("t") // a settle of nothing pending is harmless
	assert.Empty(t, h)
}
