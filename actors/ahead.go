package actors

import "fano/pb"

// aheadTasks holds the tasks with events queued in the WAL and not yet
// applied whose writer went on without waiting for their fsync (a run's
// start, an answer: TaskEvents.reply_when_queued), each as it will be once
// they are applied: the scheduler decides the task's later events on it.
// Owned by the scheduler actor; its goroutine only.
type aheadTasks map[string]*aheadTask

// aheadTask is a task as it will be once its queued events are applied.
// The task is never changed, only replaced: replies share it.
type aheadTask struct {
	task    *pb.Task
	pending int // batches queued, not yet applied
}

// queued records one more batch queued for the task, t the task after it.
func (h aheadTasks) queued(id string, t *pb.Task) {
	x := h[id]
	if x == nil {
		x = &aheadTask{}
		h[id] = x
	}
	x.task = t
	x.pending++
}

// settle counts one of the task's batches applied: once none is left, the
// task in the scheduler's state is the task ahead.
func (h aheadTasks) settle(id string) {
	if x := h[id]; x != nil {
		if x.pending--; x.pending <= 0 {
			delete(h, id)
		}
	}
}

// copyOf is a copy of the task ahead to apply more events to (false: no
// batch of it is pending).
func (h aheadTasks) copyOf(id string) (*pb.Task, bool) {
	x := h[id]
	if x == nil {
		return nil, false
	}
	return pb.CloneTaskSharing(x.task), true
}
