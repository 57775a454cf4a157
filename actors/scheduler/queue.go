package scheduler

import (
	"slices"
	"strings"
	"time"

	"fano/pb"
)

// The queue keeps the scheduling order without re-sorting on a tick.
//
// A waiting task's priority (docs/architecture.md, Priority) is own + boost(waited) + env:
// own is fixed; env is the same for every task of one module and preferred
// backend and changes only on a tick; boost changes only when the task
// crosses a whole hour of waiting, until the cap. So the ready tasks sit in
// heaps that share their env part (one per module and backend constraint),
// ordered by key = own + boost, which does not change with time; the heap
// carries env as its bonus. A tick updates the bonus of each heap (not of
// each task), and a heap of step times re-keys only the tasks whose boost
// crosses a step — at most MaxBoost/BoostPerHour times in a task's wait.
// Every key is the task's priority at s.at, the scheduler's clock (the
// latest time it was told): exactly the spec's formula, evaluated for all
// tasks at once.

// entry is a task in memory plus its place in the queue.
type entry struct {
	t *pb.Task // nil while packed
	// packed: a completed, archived task kept encoded (see packed.go),
	// with when it finished.
	packed   []byte
	finished int64
	h        *taskHeap // the heap it sits in; nil when in none
	idx      int       // index in h.items
	picked   bool      // handed out by Pick, not yet started or unpicked
	// shared: t was handed out by TaskView, so it never changes again;
	// the next change goes to a copy (own).
	shared bool

	// While in a ready heap: own priority + starvation boost at s.at, and
	// when the boost changes next (noStep: never) with the index in the
	// step heap (-1: not in it).
	key  int32
	step int64
	sidx int
}

// heapKind says which map of the queue a heap belongs to.
type heapKind uint8

const (
	kindPref    heapKind = iota // tasks with an llm_preference, one heap per module and backend
	kindExcl                    // tasks without a preference, one heap per module and exclusion set
	kindDelayed                 // tasks whose not_before is in the future
)

// taskHeap is a binary heap of entries with positions tracked in the
// entries, so removal is O(log n). Ready heaps put the highest key first
// (ties: older created_at, then smaller id); the delayed heap the earliest
// not_before first.
type taskHeap struct {
	kind   heapKind
	key    string   // map key, see heapKey
	module string   // ready heaps: the module of every task in it
	pref   string   // kindPref: the preferred backend
	deep   bool     // its tasks need deep mode: only backends with deep quota serve them
	excl   []string // kindExcl: the backends these tasks must not use, sorted
	bonus  int32    // ready heaps: envBonus of its tasks, set on each tick
	items  []*entry
}

// before is the scheduling order of tasks by their priority field: a runs
// before b.
func before(a, b *pb.Task) bool {
	return ordered(a.Priority, b.Priority, a, b)
}

// ordered is the scheduling order for priorities pa of a and pb of b.
func ordered(pa, pb int32, a, b *pb.Task) bool {
	if pa != pb {
		return pa > pb
	}
	if a.CreatedAt != b.CreatedAt {
		return a.CreatedAt < b.CreatedAt
	}
	return a.Id < b.Id
}

// priority is a ready entry's priority at s.at.
func (en *entry) priority() int32 { return en.key + en.h.bonus }

func (h *taskHeap) less(i, j int) bool {
	a, b := h.items[i], h.items[j]
	if h.kind == kindDelayed {
		if a.t.NotBefore != b.t.NotBefore {
			return a.t.NotBefore < b.t.NotBefore
		}
		return a.t.Id < b.t.Id
	}
	return ordered(a.key, b.key, a.t, b.t)
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

// fix restores the order after the key at i changed.
func (h *taskHeap) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
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
	if i != last {
		h.fix(i)
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

// stepHeap holds the ready entries whose boost will change, earliest step
// first.
type stepHeap []*entry

func (sh stepHeap) less(i, j int) bool { return sh[i].step < sh[j].step }

func (sh stepHeap) swap(i, j int) {
	sh[i], sh[j] = sh[j], sh[i]
	sh[i].sidx = i
	sh[j].sidx = j
}

func (sh stepHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !sh.less(i, p) {
			return
		}
		sh.swap(i, p)
		i = p
	}
}

func (sh stepHeap) down(i int) bool {
	start, n := i, len(sh)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && sh.less(r, l) {
			m = r
		}
		if !sh.less(m, i) {
			break
		}
		sh.swap(i, m)
		i = m
	}
	return i > start
}

func (sh *stepHeap) push(en *entry) {
	en.sidx = len(*sh)
	*sh = append(*sh, en)
	sh.up(en.sidx)
}

func (sh *stepHeap) remove(en *entry) {
	h := *sh
	i, last := en.sidx, len(h)-1
	if i != last {
		h.swap(i, last)
	}
	h[last] = nil
	*sh = h[:last]
	if i != last && !sh.down(i) {
		sh.up(i)
	}
	en.sidx = -1
}

// queue holds the PENDING tasks that are neither picked nor running.
type queue struct {
	pref    map[string]*taskHeap
	excl    map[string]*taskHeap
	delayed *taskHeap
	steps   stepHeap
}

func (q *queue) init() {
	q.pref = map[string]*taskHeap{}
	q.excl = map[string]*taskHeap{}
	q.delayed = &taskHeap{kind: kindDelayed}
	q.steps = nil
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

// heapKey names a ready heap: deep-mode tasks sit in heaps of their own, so
// a pick can offer them only the backends whose deep budget is not spent;
// each module has its own, so a heap's tasks share their env bonus.
func heapKey(deep bool, module, key string) string {
	d := "n"
	if deep {
		d = "d"
	}
	return d + "\x01" + module + "\x01" + key
}

// readyHeap is the ready heap for t, made if missing.
func (s *State) readyHeap(t *pb.Task) *taskHeap {
	q := &s.q
	deep := t.RequiresDeepMode
	if p := t.LlmPreference; p != "" {
		key := heapKey(deep, t.Module, p)
		h := q.pref[key]
		if h == nil {
			h = &taskHeap{kind: kindPref, key: key, module: t.Module, pref: p, deep: deep}
			h.bonus = int32(s.envBonus(h.module, h.pref, h.deep))
			q.pref[key] = h
		}
		return h
	}
	ex, set := exclKey(t.LlmExclude)
	key := heapKey(deep, t.Module, ex)
	h := q.excl[key]
	if h == nil {
		h = &taskHeap{kind: kindExcl, key: key, module: t.Module, excl: set, deep: deep}
		h.bonus = int32(s.envBonus(h.module, "", h.deep))
		q.excl[key] = h
	}
	return h
}

// pushReady keys en at s.at and puts it into the ready heap its module and
// backend constraints select.
func (s *State) pushReady(en *entry) {
	s.keyAt(en, s.at)
	s.readyHeap(en.t).push(en)
	if en.step != noStep {
		s.q.steps.push(en)
	}
}

// keyAt sets en's key and next step for time at.
func (s *State) keyAt(en *entry, at int64) {
	en.key = int32(s.ownPriority(en.t) + s.starvationBoost(en.t.CreatedAt, at))
	en.step = s.nextBoostStep(en.t.CreatedAt, at)
}

// place puts a waiting task into the delayed heap or a ready heap.
func (s *State) place(en *entry, now int64) {
	if en.t.NotBefore > now {
		s.q.delayed.push(en)
		return
	}
	s.pushReady(en)
}

// detach takes en out of whichever heap holds it; empty heaps are dropped.
func (q *queue) detach(en *entry) {
	if en.sidx >= 0 {
		q.steps.remove(en)
	}
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

// advance moves the scheduler's clock to at (never back) and re-keys the
// ready tasks whose starvation boost stepped up by then. Cost: O(log n) per
// step crossed, nothing when none is due.
func (s *State) advance(at int64) {
	if at <= s.at {
		return
	}
	s.at = at
	sh := &s.q.steps
	for len(*sh) > 0 && (*sh)[0].step <= at {
		en := (*sh)[0]
		s.rekeys++
		s.keyAt(en, at)
		en.h.fix(en.idx)
		if en.step == noStep {
			sh.remove(en)
		} else {
			sh.down(0)
		}
	}
}

// rekeyAll computes every ready key at at from scratch, for a clock that
// went back: O(n), never on a normal tick. Tasks whose not_before is after
// at wait in the delayed heap again.
func (s *State) rekeyAll(at int64) {
	s.rekeyAlls++
	s.at = at
	clear(s.q.steps)
	s.q.steps = s.q.steps[:0]
	var ready []*entry
	for _, hs := range []map[string]*taskHeap{s.q.pref, s.q.excl} {
		for _, h := range hs {
			ready = append(ready, h.items...)
		}
	}
	s.q.pref, s.q.excl = map[string]*taskHeap{}, map[string]*taskHeap{}
	for _, en := range ready {
		en.h, en.idx, en.sidx = nil, -1, -1
		s.place(en, at)
	}
}

// promote moves delayed tasks whose not_before <= now into the ready heaps.
func (s *State) promote(now int64) {
	d := s.q.delayed
	for {
		en := d.top()
		if en == nil || en.t.NotBefore > now {
			return
		}
		d.remove(en)
		s.pushReady(en)
	}
}

// best returns the first task in scheduling order that can use one of free
// (deep-mode tasks: one of deepFree), or nil. Cost: one look at the top of
// each eligible heap.
func (q *queue) best(free, deepFree []string) *entry {
	var best *entry
	consider := func(h *taskHeap) {
		en := h.top()
		if en != nil && (best == nil || ordered(en.priority(), best.priority(), en.t, best.t)) {
			best = en
		}
	}
	for _, h := range q.pref {
		list := free
		if h.deep {
			list = deepFree
		}
		if slices.Contains(list, h.pref) {
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

// Pick returns a routing copy (pb.CloneTaskRouting) of the highest-priority
// runnable task that can use one of the free backends: PENDING, not
// picked, not_before <= now, and either its llm_preference is free or
// some free backend is not in its llm_exclude.
// Ties go to the older task, then the smaller id. The task is marked picked
// (transient, not an event) and is not returned again until Unpick(id); the
// TaskStarted event ends the mark. O(log n) plus one look per heap.
func (s *State) Pick(free []string, now time.Time) (*pb.Task, bool) {
	return s.PickFor(free, free, now)
}

// PickFor is Pick where tasks that need deep mode may only use deepFree
// (the free backends whose daily deep budget is not spent).
func (s *State) PickFor(free, deepFree []string, now time.Time) (*pb.Task, bool) {
	en := s.pick(free, deepFree, now)
	if en == nil {
		return nil, false
	}
	// A pick goes to the allocator, which chooses a backend by the task's
	// own fields and its conversation's backend: a full copy per pick was
	// a share of fano's CPU per task.
	return pb.CloneTaskRouting(en.t), true
}

// PickIDFor is PickFor for a pick that starts on a backend chosen
// already (a slot passed on): only the task's id and whether it needs
// deep mode, no copy.
func (s *State) PickIDFor(free, deepFree []string, now time.Time) (id string, deep, ok bool) {
	en := s.pick(free, deepFree, now)
	if en == nil {
		return "", false, false
	}
	return en.t.Id, en.t.RequiresDeepMode, true
}

// pick marks the most urgent task that may run on free or deepFree as
// picked and returns it, nil if there is none.
func (s *State) pick(free, deepFree []string, now time.Time) *entry {
	at := now.UnixNano()
	s.advance(at)
	s.promote(at)
	en := s.q.best(free, deepFree)
	if en == nil {
		return nil
	}
	s.setPriority(en, en.priority())
	s.q.detach(en)
	en.picked = true
	return en
}

// Unpick returns a picked task to the queue (its allocation failed).
func (s *State) Unpick(id string) {
	en, ok := s.tasks[id]
	if !ok || !en.picked {
		return
	}
	en.picked = false
	if en.t.State == pb.TaskState_TASK_STATE_PENDING && en.h == nil {
		s.pushReady(en)
	}
}

// Picked reports whether the task is picked and awaiting its start.
func (s *State) Picked(id string) bool {
	en, ok := s.tasks[id]
	return ok && en.picked
}

// ShouldPreempt reports whether the best waiting task that could run on llm
// beats the running task's priority by more than PreemptionThreshold, and if
// so that task's id. Both priorities are taken at the scheduler's clock with
// the figures of the last Recompute.
func (s *State) ShouldPreempt(runningID, llm string) (bool, string) {
	return s.ShouldPreemptFor(runningID, llm, true, true)
}

// ShouldPreemptFor is ShouldPreempt where llm takes normal tasks only if
// normal and deep-mode tasks only if deep (the allocator's quota view): a
// waiting task the freed slot could not run must not preempt, or the
// preempted task is picked again at the next tick and preempted again.
func (s *State) ShouldPreemptFor(runningID, llm string, normal, deep bool) (bool, string) {
	cur, ok := s.running[runningID]
	if !ok {
		return false, ""
	}
	var free, deepFree []string
	if normal {
		free = []string{llm}
	}
	if deep {
		deepFree = []string{llm}
	}
	w := s.q.best(free, deepFree)
	if w == nil || w.t.Id == runningID {
		return false, ""
	}
	if int(w.priority()) > int(s.priorityAt(cur.t, s.at))+s.cfg.PreemptionThreshold {
		return true, w.t.Id
	}
	return false, ""
}

// StaleTick is how far a tick's time may lag behind the latest event the
// scheduler applied and still be taken as that event's time: a tick
// waits in the scheduler's mailbox behind events stamped after it was
// sent, which is not the clock going back (under load, nearly every tick;
// re-keying every waiting task for it cost a share of fano's CPU that
// grew with the queue).
const StaleTick = time.Second

// Recompute runs on the scheduler tick: it reads env, moves the clock to
// now (re-keying only the tasks whose starvation boost steps), sets each
// heap's env bonus and promotes delayed tasks whose not_before <= now.
// Cost: O(heaps + steps crossed + promoted), not O(waiting tasks); a clock
// that went back (more than StaleTick behind the scheduler's) re-keys
// everything once.
func (s *State) Recompute(now time.Time, env Env) {
	at := now.UnixNano()
	back := at < s.at-int64(StaleTick)
	if !back {
		at = max(at, s.at)
	}
	s.refreshEnv(at, env)
	if back {
		s.rekeyAll(at)
	} else {
		s.advance(at)
	}
	for _, hs := range []map[string]*taskHeap{s.q.pref, s.q.excl} {
		for _, h := range hs {
			h.bonus = int32(s.envBonus(h.module, h.pref, h.deep))
		}
	}
	s.promote(at)
}
