package actors

import (
	"slices"

	"sync"
	"sync/atomic"

	"fano/actors/scheduler"
	"fano/pb"
)

// schedulerInputs holds what the scheduler reads of other owners on its
// tick: the allocator's quota view (stored by the allocator actor as it
// publishes free slots) and the backlogs of modules.Backlogger modules
// (stored by their hosts after applying events). Each value has one
// writer and the scheduler actor as its reader; both are safe across
// goroutines.
type schedulerInputs struct {
	quota    atomic.Pointer[map[string]*pb.BackendFree]
	backlogs sync.Map // module -> int (modules.Backlogger)
}

func newSchedulerInputs() *schedulerInputs {
	in := &schedulerInputs{}
	empty := map[string]*pb.BackendFree{}
	in.quota.Store(&empty)
	return in
}

func (in *schedulerInputs) setQuotaView(v map[string]*pb.BackendFree) { in.quota.Store(&v) }

// canTake is whether backend has quota for normal and for deep-mode tasks
// in the allocator's last view (a backend not in it has none).
func (in *schedulerInputs) canTake(backend string) (normal, deep bool) {
	v, ok := (*in.quota.Load())[backend]
	if !ok {
		return false, false
	}
	return v.Normal, v.Deep
}

func (in *schedulerInputs) schedulerEnv() scheduler.Env {
	q := *in.quota.Load()
	return scheduler.Env{
		HasQuota: func(backend string, deep bool) bool {
			v, ok := q[backend]
			if !ok {
				return false
			}
			if deep {
				return v.Deep
			}
			return v.Normal
		},
		Backlog: in.backlog,
	}
}

// backlog is read by the scheduler actor on its tick; module hosts of
// modules.Backlogger publish it after applying events.
func (in *schedulerInputs) backlog(module string) int {
	if v, ok := in.backlogs.Load(module); ok {
		return v.(int)
	}
	return 0
}

// otherCanTake: a backend other than llm that task t may use can take a
// normal request in the allocator's last view.
func (in *schedulerInputs) otherCanTake(llm string, t *pb.Task) bool {
	for name, v := range *in.quota.Load() {
		if name == llm || !v.Normal || slices.Contains(t.GetLlmExclude(), name) {
			continue
		}
		if p := t.GetLlmPreference(); p != "" && p != name {
			continue
		}
		return true
	}
	return false
}
