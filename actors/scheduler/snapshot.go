package scheduler

import (
	"fmt"
	"maps"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"fano/pb"
)

// Snapshot returns the scheduler's facts for a checkpoint, tasks in id order.
//
// Derived and transient figures are left out: every task's priority is 0
// (Restore and Recompute compute it again), picked marks and decided submits
// are not kept. Forgotten tasks are kept as their ids' hashes and counts
// (older snapshots kept each id as a tombstone: a Task with only its id
// and state TASK_STATE_UNSPECIFIED; Restore still reads them).
func (s *State) Snapshot() *pb.SchedulerSnapshot {
	ids := s.snapshotIDs()
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
	snap.RecentStarts = s.snapshotStarts()
	s.appendForgotten(snap)
	return snap
}

// snapshotIDs lists the ids of the tasks in memory, in order.
func (s *State) snapshotIDs() []string {
	return slices.Sorted(maps.Keys(s.tasks))
}

func (s *State) snapshotStarts() []*pb.ModuleStart {
	var out []*pb.ModuleStart
	for _, st := range s.starts {
		out = append(out, &pb.ModuleStart{Module: st.module, At: st.at, Count: st.n})
	}
	return out
}

// SnapshotBytes is Snapshot encoded, without a decoded copy of every
// task: a packed task is copied as it is kept (less its priority), and the
// others are encoded straight onto the output. (Snapshot's copies of 20k
// finished tasks are 16 MB: the peak of a run's memory at its final
// checkpoint.) Called on the scheduler's goroutine.
func (s *State) SnapshotBytes() ([]byte, error) {
	ids := s.snapshotIDs()
	room := 0
	for _, en := range s.tasks {
		room += len(en.packed) + 8
	}
	var (
		out  = make([]byte, 0, room+len(ids)*64+8*s.forgotten.len())
		size = proto.MarshalOptions{}
		enc  = proto.MarshalOptions{UseCachedSize: true} // right after size
	)
	for _, id := range ids {
		var t *pb.Task
		switch en := s.tasks[id]; {
		case en.t == nil:
			// Packed: its bytes as they are, less the priority field.
			var err error
			if out, err = appendTaskWithoutPriority(out, en.packed); err != nil {
				return nil, fmt.Errorf("scheduler: snapshot: task %s: %w", id, err)
			}
			continue
		default:
			t = pb.CloneTaskSharing(en.t) // never changed in place; only its priority differs
		}
		t.Priority = 0
		out = protowire.AppendTag(out, snapshotTasksField, protowire.BytesType)
		out = protowire.AppendVarint(out, uint64(size.Size(t)))
		var err error
		if out, err = enc.MarshalAppend(out, t); err != nil {
			return nil, fmt.Errorf("scheduler: snapshot: task %s: %w", id, err)
		}
	}
	// A message's encoding followed by more of its fields is the message
	// with those fields too.
	tail := &pb.SchedulerSnapshot{RecentStarts: s.snapshotStarts()}
	s.appendForgotten(tail)
	return proto.MarshalOptions{}.MarshalAppend(out, tail)
}

// snapshotTasksField is SchedulerSnapshot.tasks's field number.
const snapshotTasksField protowire.Number = 1

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
		if t.GetState() == pb.TaskState_TASK_STATE_UNSPECIFIED {
			s.forgotten.add(forgottenHash(id)) // a tombstone of an older snapshot
			continue
		}
		nt := pb.CloneTask(t)
		s.advance(nt.UpdatedAt)
		s.insert(nt, nt.UpdatedAt)
	}
	if err := s.restoreForgotten(snap); err != nil {
		return nil, err
	}
	for _, st := range snap.GetRecentStarts() {
		s.starts = append(s.starts, moduleStart{module: st.GetModule(), at: st.GetAt(), n: max(st.GetCount(), 1)})
	}
	return s, nil
}

// taskPriorityField is Task.priority's field number.
const taskPriorityField protowire.Number = 5

// appendTaskWithoutPriority appends task, an encoded Task, to out as a
// SchedulerSnapshot.tasks field, leaving out its priority field (a
// snapshot's priorities are 0, and 0 is not encoded).
func appendTaskWithoutPriority(out, task []byte) ([]byte, error) {
	skip := 0 // bytes of priority fields
	for rest := task; len(rest) > 0; {
		num, n := fieldAt(rest)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		if num == taskPriorityField {
			skip += n
		}
		rest = rest[n:]
	}
	out = protowire.AppendTag(out, snapshotTasksField, protowire.BytesType)
	out = protowire.AppendVarint(out, uint64(len(task)-skip))
	if skip == 0 {
		return append(out, task...), nil
	}
	for rest := task; len(rest) > 0; {
		num, n := fieldAt(rest)
		if num != taskPriorityField {
			out = append(out, rest[:n]...)
		}
		rest = rest[n:]
	}
	return out, nil
}

// fieldAt reads the field at the start of b: its number and its length
// with the tag (negative: a protowire error code).
func fieldAt(b []byte) (protowire.Number, int) {
	num, typ, tag := protowire.ConsumeTag(b)
	if tag < 0 {
		return 0, tag
	}
	val := protowire.ConsumeFieldValue(num, typ, b[tag:])
	if val < 0 {
		return 0, val
	}
	return num, tag + val
}
