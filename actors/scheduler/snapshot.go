package scheduler

import (
	"fmt"
	"maps"
	"slices"

	"fano/pb"
)

// Snapshot returns the scheduler's facts for a checkpoint, tasks in id order.
//
// Derived and transient figures are left out: every task's priority is 0
// (Restore and Recompute compute it again), picked marks and decided submits
// are not kept. A forgotten id is kept as a tombstone: a Task with only its
// id set and state TASK_STATE_UNSPECIFIED (SchedulerSnapshot has no field of
// its own for them).
func (s *State) Snapshot() *pb.SchedulerSnapshot {
	ids := slices.Collect(maps.Keys(s.tasks))
	for id := range s.forgotten {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	snap := &pb.SchedulerSnapshot{Tasks: make([]*pb.Task, 0, len(ids))}
	for _, id := range ids {
		en, ok := s.tasks[id]
		if !ok {
			snap.Tasks = append(snap.Tasks, &pb.Task{Id: id})
			continue
		}
		// Encoded at once and never changed: a copy that shares what is
		// never changed in place is enough (a deep copy of every task per
		// checkpoint was most of its cost).
		t := en.t
		if t == nil {
			t = en.view() // packed: a fresh decoded copy
		} else {
			t = pb.CloneTaskSharing(t)
		}
		t.Priority = 0
		snap.Tasks = append(snap.Tasks, t)
	}
	for _, st := range s.starts {
		snap.RecentStarts = append(snap.RecentStarts, &pb.ModuleStart{Module: st.module, At: st.at})
	}
	return snap
}

// Restore builds a scheduler from a snapshot (nil: empty). Priorities are
// those at the latest updated_at until the first Recompute.
func Restore(cfg Config, snap *pb.SchedulerSnapshot) (*State, error) {
	s := New(cfg)
	for i, t := range snap.GetTasks() {
		id := t.GetId()
		if id == "" {
			return nil, fmt.Errorf("scheduler: restore: task %d has no id", i)
		}
		if _, dup := s.tasks[id]; dup {
			return nil, fmt.Errorf("scheduler: restore: task %q twice", id)
		}
		if _, dup := s.forgotten[id]; dup {
			return nil, fmt.Errorf("scheduler: restore: task %q twice", id)
		}
		if t.GetState() == pb.TaskState_TASK_STATE_UNSPECIFIED {
			s.forgotten[id] = struct{}{}
			continue
		}
		nt := pb.CloneTask(t)
		s.advance(nt.UpdatedAt)
		s.insert(nt, nt.UpdatedAt)
	}
	for _, st := range snap.GetRecentStarts() {
		s.starts = append(s.starts, moduleStart{module: st.GetModule(), at: st.GetAt()})
	}
	return s, nil
}
