package scheduler

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"fano/pb"
)

// forgottenHash is what the scheduler keeps of a forgotten task's id: its
// 64-bit FNV-1a hash (stable across versions: snapshots hold it). Two ids
// of one hash would make the second look taken; among a million ids the
// chance is about 3 in 10^8.
func forgottenHash(id string) uint64 {
	// FNV-1a by hand: hash/fnv's would allocate on every submit's check.
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= prime
	}
	return h
}

func (s *State) isForgotten(id string) bool {
	return s.forgotten.has(forgottenHash(id))
}

// FinishedInMemory is the number of finished tasks still in memory.
func (s *State) FinishedInMemory() int { return s.finished }

// ForgetPass is what a pass of DecideForget takes.
type ForgetPass struct {
	Retention time.Duration // 0: this pass is for the bound only
	Keep, Max int
}

// PlanForget says whether a forgetting pass is due at now: the retention's
// once a minute after the last (last), and the bound's as soon as a
// quarter more than keep are finished, so that a pass frees many. ok is
// false when neither is due.
func (s *State) PlanForget(now, last time.Time, retention time.Duration, keep int) (ForgetPass, bool) {
	over := keep > 0 && s.finished > keep+keep/4
	due := retention > 0 && now.Sub(last) >= time.Minute
	if !over && !due {
		return ForgetPass{}, false
	}
	p := ForgetPass{Keep: keep, Max: 5000}
	if due {
		p.Retention = retention
	}
	if over {
		p.Max = s.finished - keep
	}
	return p, true
}

// forgetBatch is how many ids one TaskForgotten event carries at most.
const forgetBatch = 1000

// DecideForget picks finished tasks to take out of memory, oldest first,
// at most max: those that finished more than retention before now
// (retention > 0), and the oldest beyond the keep most recent (keep > 0).
// It returns copies of them (to be archived on disk first) and the
// TaskForgotten events that take them out, a batch of ids each. Of a task
// archived whole at its completion (kept packed) the copy holds only what
// its archive reference needs: id, module, state, archived, completed_at.
// O(n) in the tasks in memory: callers run it now and then, not on every
// tick.
func (s *State) DecideForget(now time.Time, retention time.Duration, keep, max int) ([]*pb.Task, []*pb.Event) {
	if (retention <= 0 && keep <= 0) || max <= 0 {
		return nil, nil
	}
	type oldTask struct {
		id string
		at int64
		en *entry
	}
	old := make([]oldTask, 0, s.finished)
	for id, en := range s.tasks {
		if IsFinished(en.state()) {
			old = append(old, oldTask{id, en.finishedAt(), en})
		}
	}
	slices.SortFunc(old, func(a, b oldTask) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	n := 0 // how many of the oldest go
	if retention > 0 {
		cutoff := now.Add(-retention).UnixNano()
		for n < len(old) && old[n].at <= cutoff {
			n++
		}
	}
	if keep > 0 && len(old)-n > keep {
		n = len(old) - keep
	}
	n = min(n, max)
	tasks := make([]*pb.Task, n)
	var evs []*pb.Event
	at := now.UnixNano()
	for i, o := range old[:n] {
		tasks[i] = o.en.forgettable(o.id)
		if i%forgetBatch == 0 {
			evs = append(evs, &pb.Event{At: at, Body: &pb.Event_TaskForgotten{TaskForgotten: &pb.TaskForgotten{TaskId: o.id}}})
			continue
		}
		f := evs[len(evs)-1].GetTaskForgotten()
		f.MoreTaskIds = append(f.MoreTaskIds, o.id)
	}
	return tasks, evs
}

// appendForgotten adds the forgotten tasks' hashes and counts to a
// snapshot.
func (s *State) appendForgotten(snap *pb.SchedulerSnapshot) {
	if s.forgotten.len() > 0 {
		hashes := s.forgotten.all()
		buf := make([]byte, 8*len(hashes))
		for i, h := range hashes {
			binary.LittleEndian.PutUint64(buf[8*i:], h)
		}
		snap.ForgottenHashes = buf
	}
	for _, m := range slices.Sorted(maps.Keys(s.forgottenCounts)) {
		c := s.forgottenCounts[m]
		for _, st := range slices.Sorted(maps.Keys(c)) {
			snap.ForgottenCounts = append(snap.ForgottenCounts, &pb.StateCount{Module: m, State: st, Count: int64(c[st])})
		}
	}
}

// restoreForgotten reads what appendForgotten wrote.
func (s *State) restoreForgotten(snap *pb.SchedulerSnapshot) error {
	b := snap.GetForgottenHashes()
	if len(b)%8 != 0 {
		return fmt.Errorf("scheduler: restore: forgotten_hashes is %d bytes, not a multiple of 8", len(b))
	}
	// With the tombstones read before; written sorted, but a snapshot is
	// not trusted to be.
	sorted := slices.Clone(s.forgotten.all())
	for i := 0; i < len(b); i += 8 {
		sorted = append(sorted, binary.LittleEndian.Uint64(b[i:]))
	}
	slices.Sort(sorted)
	s.forgotten.sorted = slices.Compact(sorted)
	for _, c := range snap.GetForgottenCounts() {
		m := s.forgottenCounts[c.GetModule()]
		if m == nil {
			m = map[pb.TaskState]int{}
			s.forgottenCounts[c.GetModule()] = m
		}
		m[c.GetState()] += int(c.GetCount())
	}
	return nil
}

// forgettable is what DecideForget gives of en's task (id): a copy, or of
// a packed one the light task its archive reference needs, read without
// decoding it.
func (en *entry) forgettable(id string) *pb.Task {
	if en.t != nil {
		return pb.CloneTask(en.t)
	}
	module, completedAt := en.head()
	return &pb.Task{Id: id, Module: module, State: pb.TaskState_TASK_STATE_COMPLETED, Archived: true, CompletedAt: completedAt}
}
