package control

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"fano/actors/scheduler"
	"fano/pb"
)

// A task past max_wait_hours shows the spec's priority and says it is
// overdue, not a seven-digit number.
func TestTaskViewShowsOverdueApart(t *testing.T) {
	v := taskView(&pb.Task{Id: "t", Priority: scheduler.OverdueBoost + 60}, false)
	assert.Equal(t, int32(60), v.Priority)
	assert.True(t, v.Overdue)
	v = taskView(&pb.Task{Id: "t", Priority: 60}, false)
	assert.Equal(t, int32(60), v.Priority)
	assert.False(t, v.Overdue)
}
