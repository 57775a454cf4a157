package scheduler

import "fano/pb"

// Hold marks a PENDING task picked again: a scheduler rebuilt from the
// log after a panic learns this way that an executor runs the task with a
// start it has not written yet, so the task is not picked twice. It
// reports whether the task was held (false: unknown, or no longer
// PENDING, its start was applied).
func (s *State) Hold(id string) bool {
	en, ok := s.tasks[id]
	if !ok || en.t.State != pb.TaskState_TASK_STATE_PENDING {
		return false
	}
	s.q.detach(en)
	en.picked = true
	return true
}
