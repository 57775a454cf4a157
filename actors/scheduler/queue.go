package scheduler

import (
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"fano/pb"
)

// entry is a task in memory plus its place in the queue.
type entry struct {
	t      *pb.Task
	h      *taskHeap // the heap it sits in; nil when in none
	idx    int       // index in h.items
	picked bool      // handed out by Pick, not yet started or unpicked
}

// heapKind says which map of the queue a heap belongs to.
type heapKind uint8

const (
	kindPref    heapKind = iota // tasks with an llm_preference, one heap per backend
	kindExcl                    // tasks without a preference, one heap per exclusion set
	kindDelayed                 // tasks whose not_before is in the future
)

// taskHeap is a binary heap of entries with positions tracked in the
// entries, so removal is O(log n). Ready heaps put the highest priority first
// (ties: older created_at, then smaller id); the delayed heap the earliest
// not_before first.
type taskHeap struct {
	kind  heapKind
	key   string   // map key: deep marker + backend (kindPref) or canonical exclusion set (kindExcl)
	deep  bool     // its tasks need deep mode: only backends with deep quota serve them
	excl  []string // kindExcl: the backends these tasks must not use, sorted
	items []*entry
}

// before is the scheduling order: a runs before b.
func before(a, b *pb.Task) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	if a.CreatedAt != b.CreatedAt {
		return a.CreatedAt < b.CreatedAt
	}
	return a.Id < b.Id
}

func (h *taskHeap) less(i, j int) bool {
	a, b := h.items[i].t, h.items[j].t
	if h.kind == kindDelayed {
		if a.NotBefore != b.NotBefore {
			return a.NotBefore < b.NotBefore
		}
		return a.Id < b.Id
	}
	return before(a, b)
}

func (h *taskHeap) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].idx = i
	h.items[j].idx = j
}

func (h *taskHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *taskHeap) down(i int) bool {
	start, n := i, len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			break
		}
		h.swap(i, m)
		i = m
	}
	return i > start
}

func (h *taskHeap) push(en *entry) {
	en.h, en.idx = h, len(h.items)
	h.items = append(h.items, en)
	h.up(en.idx)
}

// remove takes en out of h. It never compares en itself, so en's keys may
// already have changed.
func (h *taskHeap) remove(en *entry) {
	i, last := en.idx, len(h.items)-1
	if i != last {
		h.swap(i, last)
	}
	h.items[last] = nil
	h.items = h.items[:last]
	if i != last && !h.down(i) {
		h.up(i)
	}
	en.h, en.idx = nil, -1
}

// init restores the heap order after keys changed: O(n).
func (h *taskHeap) init() {
	for i, en := range h.items {
		en.idx = i
	}
	for i := len(h.items)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *taskHeap) top() *entry {
	if len(h.items) == 0 {
		return nil
	}
	return h.items[0]
}

// allows reports whether a task of this exclusion heap may use backend b.
func (h *taskHeap) allows(b string) bool {
	_, found := slices.BinarySearch(h.excl, b)
	return !found
}

// queue holds the PENDING tasks that are neither picked nor running.
type queue struct {
	pref    map[string]*taskHeap
	excl    map[string]*taskHeap
	delayed *taskHeap
}

func (q *queue) init() {
	q.pref = map[string]*taskHeap{}
	q.excl = map[string]*taskHeap{}
	q.delayed = &taskHeap{kind: kindDelayed}
}

// exclKey is the canonical form of an exclusion list: sorted, deduplicated.
func exclKey(ex []string) (string, []string) {
	if len(ex) == 0 {
		return "", nil
	}
	s := slices.Clone(ex)
	slices.Sort(s)
	s = slices.Compact(s)
	return strings.Join(s, "\x00"), s
}

// pushReady puts en into the heap its backend constraints select.
func (q *queue) pushReady(en *entry) {
	q.appendReady(en)
	en.h.up(en.idx)
}

// place puts a waiting task into the delayed heap or a ready heap.
func (q *queue) place(en *entry, now int64) {
	if en.t.NotBefore > now {
		q.delayed.push(en)
		return
	}
	q.pushReady(en)
}

// detach takes en out of whichever heap holds it; empty heaps are dropped.
func (q *queue) detach(en *entry) {
	h := en.h
	if h == nil {
		return
	}
	h.remove(en)
	if len(h.items) == 0 {
		switch h.kind {
		case kindPref:
			delete(q.pref, h.key)
		case kindExcl:
			delete(q.excl, h.key)
		}
	}
}

// promote moves delayed tasks whose not_before <= now into the ready heaps,
// giving each its priority at now.
func (s *State) promote(now int64) {
	d := s.q.delayed
	for {
		en := d.top()
		if en == nil || en.t.NotBefore > now {
			return
		}
		d.remove(en)
		en.t.Priority = s.priorityAt(en.t, now)
		s.q.pushReady(en)
	}
}

// heapKey keeps deep-mode tasks in heaps of their own, so a pick can offer
// them only the backends whose deep budget is not spent.
func heapKey(deep bool, key string) string {
	if deep {
		return "d\x01" + key
	}
	return "n\x01" + key
}

// best returns the first task in scheduling order that can use one of free
// (deep-mode tasks: one of deepFree), or nil. Cost: one look at the top of
// each eligible heap.
func (q *queue) best(free, deepFree []string) *entry {
	var best *entry
	consider := func(h *taskHeap) {
		if en := h.top(); en != nil && (best == nil || before(en.t, best.t)) {
			best = en
		}
	}
	for _, b := range free {
		if h := q.pref[heapKey(false, b)]; h != nil {
			consider(h)
		}
	}
	for _, b := range deepFree {
		if h := q.pref[heapKey(true, b)]; h != nil {
			consider(h)
		}
	}
	for _, h := range q.excl {
		list := free
		if h.deep {
			list = deepFree
		}
		for _, b := range list {
			if h.allows(b) {
				consider(h)
				break
			}
		}
	}
	return best
}

// Pick returns a copy of the highest-priority runnable task that can use one
// of the free backends: PENDING, not picked, not_before <= now, and either
// its llm_preference is free or some free backend is not in its llm_exclude.
// Ties go to the older task, then the smaller id. The task is marked picked
// (transient, not an event) and is not returned again until Unpick(id); the
// TaskStarted event ends the mark. O(log n) plus one look per heap.
func (s *State) Pick(free []string, now time.Time) (*pb.Task, bool) {
	return s.PickFor(free, free, now)
}

// PickFor is Pick where tasks that need deep mode may only use deepFree
// (the free backends whose daily deep budget is not spent).
func (s *State) PickFor(free, deepFree []string, now time.Time) (*pb.Task, bool) {
	s.promote(now.UnixNano())
	en := s.q.best(free, deepFree)
	if en == nil {
		return nil, false
	}
	s.q.detach(en)
	en.picked = true
	return proto.Clone(en.t).(*pb.Task), true
}

// Unpick returns a picked task to the queue (its allocation failed).
func (s *State) Unpick(id string) {
	en, ok := s.tasks[id]
	if !ok || !en.picked {
		return
	}
	en.picked = false
	if en.t.State == pb.TaskState_TASK_STATE_PENDING && en.h == nil {
		s.q.pushReady(en)
	}
}

// Picked reports whether the task is picked and awaiting its start.
func (s *State) Picked(id string) bool {
	en, ok := s.tasks[id]
	return ok && en.picked
}

// ShouldPreempt reports whether the best waiting task that could run on llm
// beats the running task's priority by more than PreemptionThreshold, and if
// so that task's id. Both priorities are those of the last Recompute.
func (s *State) ShouldPreempt(runningID, llm string) (bool, string) {
	cur, ok := s.running[runningID]
	if !ok {
		return false, ""
	}
	w := s.q.best([]string{llm}, []string{llm})
	if w == nil || w.t.Id == runningID {
		return false, ""
	}
	if int(w.t.Priority) > int(cur.t.Priority)+s.cfg.PreemptionThreshold {
		return true, w.t.Id
	}
	return false, ""
}

// Recompute runs on the scheduler tick: it reads env, recomputes the
// priority of every unfinished task at now, promotes delayed tasks whose
// not_before <= now and rebuilds the heaps. O(unfinished tasks): finished
// ones are never walked.
func (s *State) Recompute(now time.Time, env Env) {
	at := now.UnixNano()
	s.refreshEnv(at, env)
	for _, en := range s.open {
		en.t.Priority = s.priorityAt(en.t, at)
	}
	d := s.q.delayed
	for {
		en := d.top()
		if en == nil || en.t.NotBefore > at {
			break
		}
		d.remove(en)
		// Appended unordered; the init below orders them.
		s.q.appendReady(en)
	}
	for _, h := range s.q.pref {
		h.init()
	}
	for _, h := range s.q.excl {
		h.init()
	}
}

// appendReady adds en to its ready heap without restoring the heap order.
func (q *queue) appendReady(en *entry) {
	t := en.t
	var h *taskHeap
	deep := t.RequiresDeepMode
	if p := t.LlmPreference; p != "" {
		key := heapKey(deep, p)
		if h = q.pref[key]; h == nil {
			h = &taskHeap{kind: kindPref, key: key, deep: deep}
			q.pref[key] = h
		}
	} else {
		ex, set := exclKey(t.LlmExclude)
		key := heapKey(deep, ex)
		if h = q.excl[key]; h == nil {
			h = &taskHeap{kind: kindExcl, key: key, excl: set, deep: deep}
			q.excl[key] = h
		}
	}
	en.h, en.idx = h, len(h.items)
	h.items = append(h.items, en)
}
