// Package scheduler is the scheduler actor's logic: every task
// fano knows, their dynamic priority, the choice of the next task for the
// free LLMs, preemption decisions, cancel and the bound on pending tasks.
//
// It follows decide / persist / apply: Decide* methods read the state and
// return the events a command implies, the actor persists them to the WAL,
// and Apply — the only code that changes the state — applies them, live and
// on replay alike.
//
// State is not safe for concurrent use: the scheduler actor is its only
// caller.
package scheduler

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"fano/pb"
)

// Config tunes the scheduler. Zero fields take the defaults of DefaultConfig.
type Config struct {
	PreemptionThreshold int            // 20
	MaxPending          int            // 500: pending = PENDING+READY+PAUSED (not running, not finished)
	BoostPerHour        int            // 5 (starvation)
	MaxBoost            int            // 25
	MessageLimit        int            // 50: conversation truncation
	BasePriorities      map[string]int // nil -> the spec's BASE_PRIORITIES; unknown type -> 50
	ShareWindow         time.Duration  // 1h: window for module balance
	// ModuleWeights (config orchestrator.module_weights) scale the module
	// balance factor: a module is underserved below BalanceShare times its
	// weight over the mean weight, so equal weights are the spec's plain
	// 20%. nil, or a module without a weight: BalanceShare.
	ModuleWeights map[string]int
	// MaxWait (config max_wait_hours) is the hard starvation bound: a task
	// that has waited this long since it was submitted gets OverdueBoost,
	// so it runs before every task that has not, whatever their
	// priorities. 0: no bound.
	MaxWait time.Duration
}

// Env gives the scheduler figures owned by others, read on each Recompute.
type Env struct {
	HasQuota func(backend string, deep bool) bool // allocator's view; nil = always
	Backlog  func(module string) int              // e.g. documenter: blessed insights waiting; nil = 0
}

// Priority factors that are not in Config.
const (
	DefaultBasePriority = 50  // a task type missing from BasePriorities
	CommentUrgency      = 40  // address_comment
	NoQuotaPenalty      = 50  // preferred backend without quota
	BalanceBonus        = 15  // module with < 20% of recent starts
	BalanceShare        = 0.2 // "underserved" below this share
	// OverdueBoost is added to the priority of a task past MaxWait: more
	// than any sum of the other factors, so it orders overdue tasks first.
	OverdueBoost    = 1_000_000
	CommentTaskType = "address_comment"
)

// ShownPriority splits a task's priority into the spec's figure (what a
// person compares with the BASE_PRIORITIES table) and whether the task is
// past MaxWait: OverdueBoost is an ordering device, not a number to show.
func ShownPriority(p int32) (priority int32, overdue bool) {
	if p >= OverdueBoost/2 {
		return p - OverdueBoost, true
	}
	return p, false
}

// BasePriorities is the spec's BASE_PRIORITIES table.
var BasePriorities = map[string]int{
	// explorer
	"exploration":    50,
	"critique":       45,
	"synthesis":      60,
	"insight_review": 55,
	// documenter
	"address_comment":     80,
	"incorporate_insight": 55,
	"draft_section":       50,
	"review_section":      40,
	// researcher
	"generate_questions":  35,
	"evaluate_source":     45,
	"extract_content":     40,
	"synthesize_findings": 50,
}

// DefaultConfig is the spec's configuration.
func DefaultConfig() Config {
	return Config{
		PreemptionThreshold: 20,
		MaxPending:          500,
		BoostPerHour:        5,
		MaxBoost:            25,
		MessageLimit:        50,
		BasePriorities:      BasePriorities,
		ShareWindow:         time.Hour,
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.PreemptionThreshold == 0 {
		c.PreemptionThreshold = d.PreemptionThreshold
	}
	if c.MaxPending == 0 {
		c.MaxPending = d.MaxPending
	}
	if c.BoostPerHour == 0 {
		c.BoostPerHour = d.BoostPerHour
	}
	if c.MaxBoost == 0 {
		c.MaxBoost = d.MaxBoost
	}
	if c.MessageLimit == 0 {
		c.MessageLimit = d.MessageLimit
	}
	if c.BasePriorities == nil {
		c.BasePriorities = d.BasePriorities
	}
	if c.ShareWindow == 0 {
		c.ShareWindow = d.ShareWindow
	}
	return c
}

// Errors.

// ErrRunning: a RUNNING task is cancelled by its executor, not by the scheduler.
var ErrRunning = errors.New("task is running: its executor cancels it")

// ErrFinished: the task is COMPLETED, FAILED or CANCELLED (or forgotten).
var ErrFinished = errors.New("already finished")

// SubmitError refuses a submit. Code is "invalid", "duplicate" or "full".
type SubmitError struct {
	Code   string
	TaskID string
	Reason string
}

func (e *SubmitError) Error() string {
	return fmt.Sprintf("scheduler: submit %q refused (%s): %s", e.TaskID, e.Code, e.Reason)
}

// NotFoundError: no task with that id is known.
type NotFoundError struct{ TaskID string }

func (e *NotFoundError) Error() string { return fmt.Sprintf("scheduler: task %q not found", e.TaskID) }

// UnknownTaskError: an event names a task the scheduler does not hold. The
// state is unchanged.
type UnknownTaskError struct {
	TaskID string
	Event  string // the event's kind, e.g. "task_started"
}

func (e *UnknownTaskError) Error() string {
	return fmt.Sprintf("scheduler: %s for unknown task %q", e.Event, e.TaskID)
}

// State holds every task in memory plus the structures that pick the next one.
type State struct {
	cfg Config

	tasks map[string]*entry // every task in memory, by id
	// forgotten: the hashes of the ids of finished tasks that left memory
	// (forgottenHash); their keys stay taken. forgottenCounts: how many
	// per module and final state, so counts still include them.
	forgotten       hashSet
	forgottenCounts map[string]map[pb.TaskState]int
	finished        int                 // COMPLETED, FAILED and CANCELLED tasks in memory
	decided         map[string]struct{} // submits decided, not yet applied
	running         map[string]*entry
	paused          map[string]*entry
	counts          map[string]map[pb.TaskState]int
	pending         int // PENDING + READY + PAUSED

	starts []moduleStart // task starts within ShareWindow of the last start, oldest first

	q  queue
	at int64 // the scheduler's clock: the latest time it was told (unix ns); ready keys are priorities at at

	prefOpen  map[quotaKey]int // unfinished tasks per preferred backend and mode: whom a tick asks about quota
	rekeys    uint64           // boost steps taken since New (benchmarks report them)
	rekeyAlls uint64           // whole-queue re-keys since New (a clock that went back)

	// Figures cached at the last Recompute for priorities computed between
	// ticks (a task entering the queue). Derived, never persisted.
	backlog     map[string]int
	quota       map[quotaKey]bool
	shareCounts map[string]int
	shareTotal  int

	// underserved is each weighted module's balance threshold, from
	// cfg.ModuleWeights (see balanceShares).
	underserved map[string]float64
}

// moduleStart is a task start for module balance: a plain value, not a
// *pb.ModuleStart, as an hour of starts at thousands a second is a lot of
// small objects for the collector.
type moduleStart struct {
	module string
	at     int64 // the first start of the entry
	n      int32 // starts of module in at's second from at on
}

type quotaKey struct {
	backend string
	deep    bool
}

// New returns an empty scheduler.
func New(cfg Config) *State {
	s := &State{
		cfg:             cfg.withDefaults(),
		tasks:           map[string]*entry{},
		forgottenCounts: map[string]map[pb.TaskState]int{},
		decided:         map[string]struct{}{},
		running:         map[string]*entry{},
		paused:          map[string]*entry{},
		counts:          map[string]map[pb.TaskState]int{},
		backlog:         map[string]int{},
		quota:           map[quotaKey]bool{},
		prefOpen:        map[quotaKey]int{},
	}
	s.underserved = balanceShares(s.cfg.ModuleWeights)
	s.q.init()
	return s
}

// balanceShares turns module weights into each module's balance threshold:
// BalanceShare scaled by the weight over the mean weight. No positive
// weight: nil (every module BalanceShare).
func balanceShares(weights map[string]int) map[string]float64 {
	sum := 0
	for _, w := range weights {
		sum += max(w, 0)
	}
	if sum == 0 {
		return nil
	}
	out := make(map[string]float64, len(weights))
	for m, w := range weights {
		out[m] = BalanceShare * float64(max(w, 0)) * float64(len(weights)) / float64(sum)
	}
	return out
}

// Config returns the effective configuration (defaults filled in).
func (s *State) Config() Config { return s.cfg }

// IsFinished reports whether st is a final state.
func IsFinished(st pb.TaskState) bool {
	return st == pb.TaskState_TASK_STATE_COMPLETED ||
		st == pb.TaskState_TASK_STATE_FAILED ||
		st == pb.TaskState_TASK_STATE_CANCELLED
}

func isPendingState(st pb.TaskState) bool {
	return st == pb.TaskState_TASK_STATE_PENDING ||
		st == pb.TaskState_TASK_STATE_READY ||
		st == pb.TaskState_TASK_STATE_PAUSED
}

// TaskKey is the deterministic id of a task: module/task_type/subject.
func TaskKey(module, taskType, subject string) string {
	return module + "/" + taskType + "/" + subject
}

// DecideSubmit validates t and returns the TaskSubmitted event to persist.
// t is not modified. A refusal is a *SubmitError. The id is reserved until
// the event is applied (or Abandon is called), so a second submit of the same
// key in between is a duplicate too.
func (s *State) DecideSubmit(t *pb.Task, now time.Time) (*pb.Event, error) {
	if t == nil {
		return nil, &SubmitError{Code: "invalid", Reason: "no task"}
	}
	id := t.GetId()
	invalid := func(format string, a ...any) error {
		return &SubmitError{Code: "invalid", TaskID: id, Reason: fmt.Sprintf(format, a...)}
	}
	switch {
	case t.GetModule() == "":
		return nil, invalid("module is empty")
	case t.GetTaskType() == "":
		return nil, invalid("task_type is empty")
	case strings.Contains(t.GetModule(), "/") || strings.Contains(t.GetTaskType(), "/"):
		return nil, invalid("module and task_type must not contain '/'")
	case id != TaskKey(t.GetModule(), t.GetTaskType(), t.GetSubject()):
		return nil, invalid("id must be %q (module/task_type/subject)", TaskKey(t.GetModule(), t.GetTaskType(), t.GetSubject()))
	case t.GetLlmPreference() != "" && slices.Contains(t.GetLlmExclude(), t.GetLlmPreference()):
		return nil, invalid("llm_preference %q is also in llm_exclude", t.GetLlmPreference())
	}
	if _, ok := s.tasks[id]; ok {
		return nil, &SubmitError{Code: "duplicate", TaskID: id, Reason: "a task with this key exists (" + stateName(s.tasks[id].state()) + ")"}
	}
	if s.isForgotten(id) {
		return nil, &SubmitError{Code: "duplicate", TaskID: id, Reason: "a task with this key already finished"}
	}
	if _, ok := s.decided[id]; ok {
		return nil, &SubmitError{Code: "duplicate", TaskID: id, Reason: "a submit of this key is being persisted"}
	}
	if n := s.pending + len(s.decided); n >= s.cfg.MaxPending {
		return nil, &SubmitError{Code: "full", TaskID: id,
			Reason: fmt.Sprintf("%d tasks pending, the limit (max_pending) is %d", n, s.cfg.MaxPending)}
	}

	nt := pb.CloneTask(t)
	at := now.UnixNano()
	nt.State = pb.TaskState_TASK_STATE_PENDING
	nt.CreatedAt = at
	nt.UpdatedAt = at
	nt.StartedAt, nt.CompletedAt = 0, 0
	nt.LlmAssigned = ""
	if nt.MessageLimit <= 0 {
		nt.MessageLimit = int32(s.cfg.MessageLimit)
	}
	if nt.BasePriority == 0 {
		nt.BasePriority = int32(s.basePriority(nt.TaskType))
	}
	nt.Priority = s.priorityAt(nt, at)
	s.decided[id] = struct{}{}
	return &pb.Event{At: at, Body: &pb.Event_TaskSubmitted{TaskSubmitted: &pb.TaskSubmitted{Task: nt}}}, nil
}

// Abandon releases the reservation of a decided submit whose event could not
// be persisted.
func (s *State) Abandon(id string) { delete(s.decided, id) }

// DecideCancel returns the TaskCancelled event for a waiting task. Unknown:
// *NotFoundError; finished or forgotten: ErrFinished; RUNNING: ErrRunning
// (its executor cancels it). Errors name the task.
func (s *State) DecideCancel(id string, reason string, now time.Time) (*pb.Event, error) {
	en, ok := s.tasks[id]
	if !ok {
		if s.isForgotten(id) {
			return nil, fmt.Errorf("scheduler: cancel %q: %w", id, ErrFinished)
		}
		return nil, &NotFoundError{TaskID: id}
	}
	switch st := en.state(); {
	case IsFinished(st):
		return nil, fmt.Errorf("scheduler: cancel %q: %w (%s)", id, ErrFinished, stateName(st))
	case st == pb.TaskState_TASK_STATE_RUNNING:
		return nil, fmt.Errorf("scheduler: cancel %q: %w", id, ErrRunning)
	}
	return &pb.Event{At: now.UnixNano(), Body: &pb.Event_TaskCancelled{
		TaskCancelled: &pb.TaskCancelled{TaskId: id, Reason: reason}}}, nil
}

// PauseOperator is the pause reason DecideResume leaves alone: a person
// paused the task and resumes it.
const PauseOperator = "operator"

// DecideResume returns a TaskResumed event (back to PENDING) for every PAUSED
// task whose not_before has passed, in id order. Tasks paused by an operator
// stay paused.
func (s *State) DecideResume(now time.Time) []*pb.Event {
	at := now.UnixNano()
	var ids []string
	for id, en := range s.paused {
		if en.t.NotBefore <= at && en.t.PauseReason != PauseOperator {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	evs := make([]*pb.Event, 0, len(ids))
	for _, id := range ids {
		evs = append(evs, &pb.Event{At: at, Body: &pb.Event_TaskResumed{TaskResumed: &pb.TaskResumed{TaskId: id}}})
	}
	return evs
}

// finishedAt is when a finished task finished: completed_at, else its last
// update (failed and cancelled tasks).
func finishedAt(t *pb.Task) int64 {
	if t.CompletedAt != 0 {
		return t.CompletedAt
	}
	return t.UpdatedAt
}

// Queries.

// Task returns a copy of the task.
func (s *State) Task(id string) (*pb.Task, bool) {
	en, ok := s.tasks[id]
	if !ok {
		return nil, false
	}
	return s.copyOf(en), true
}

// TaskAfter returns the task as it will be once events (its own, not yet
// applied) are: for what is written with them (the whole task archived
// with its completion). The copy shares with the scheduler's task what
// events never change in place (pb.CloneTaskSharing), so it costs a
// fraction of Task's deep copy; the caller may keep it but must not change
// it further. The scheduler's task is unchanged.
func (s *State) TaskAfter(id string, events []*pb.Event) (*pb.Task, error) {
	en, ok := s.tasks[id]
	if !ok {
		return nil, &NotFoundError{TaskID: id}
	}
	s.refresh(en)
	t := en.t
	if t == nil {
		t = en.view() // packed: a fresh decoded copy
	} else {
		t = pb.CloneTaskSharing(t)
	}
	for _, e := range events {
		if err := ApplyToTask(t, e, s.cfg.MessageLimit); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// refresh sets an unfinished task's priority field to its priority at the
// scheduler's clock; a tick does not touch every task, a read does.
func (s *State) refresh(en *entry) {
	if en.t != nil && !IsFinished(en.t.State) {
		s.setPriority(en, s.priorityAt(en.t, s.at))
	}
}

// setPriority sets en's priority field, on a copy if en's task is shared.
func (s *State) setPriority(en *entry, p int32) {
	if en.t.Priority != p {
		s.own(en)
		en.t.Priority = p
	}
}

// own makes en's task the scheduler's own to change: a task handed out by
// TaskView is left as it was, and en holds a copy from then on.
func (s *State) own(en *entry) {
	if en.shared {
		en.t = pb.CloneTaskSharing(en.t)
		en.shared = false
	}
}

// TaskView returns the task as the scheduler holds it, without copying
// it: nobody may change it, and the scheduler never does either (its next
// change goes to a copy), so any goroutine may read and keep it. For
// readers that only read (an executor, a module), where Task's deep copy
// was a share of fano's CPU per task.
func (s *State) TaskView(id string) (*pb.Task, bool) {
	en, ok := s.tasks[id]
	if !ok {
		return nil, false
	}
	s.refresh(en)
	if en.t == nil {
		return en.view(), true // packed: a fresh decoded copy
	}
	en.shared = true
	return en.t, true
}

// copyOf is a copy of en's task with its priority refreshed.
func (s *State) copyOf(en *entry) *pb.Task {
	s.refresh(en)
	return en.clone()
}

// Tasks returns copies of the tasks for which filter (nil: all) is true, in
// id order, at most limit (<= 0: no limit). filter must not modify or keep the task (its fields it may keep).
func (s *State) Tasks(filter func(*pb.Task) bool, limit int) []*pb.Task {
	ids := slices.Sorted(maps.Keys(s.tasks))
	var (
		out     []*pb.Task
		scratch *pb.Task
	)
	for _, id := range ids {
		en := s.tasks[id]
		s.refresh(en)
		if scratch == nil {
			scratch = &pb.Task{}
		}
		t := en.viewInto(scratch) // a packed task: decoded into scratch
		if filter != nil && !filter(t) {
			continue
		}
		if t == scratch {
			scratch = nil // handed out
		} else {
			t = pb.CloneTask(t)
		}
		out = append(out, t)
		if limit > 0 && len(out) >= limit {
			break
		}
	}
	return out
}

// ForEach calls fn on every task in memory, in no order, without copying:
// fn must not change or keep the task. Recovery's checks read 100k tasks
// this way instead of cloning them.
func (s *State) ForEach(fn func(t *pb.Task)) {
	for _, en := range s.tasks {
		s.refresh(en)
		fn(en.view())
	}
}

// Counts returns module -> state -> number of tasks in memory.
// Forgotten tasks are counted in their final state.
func (s *State) Counts() map[string]map[pb.TaskState]int {
	out := make(map[string]map[pb.TaskState]int, len(s.counts))
	for m, c := range s.counts {
		out[m] = maps.Clone(c)
	}
	for m, c := range s.forgottenCounts {
		o := out[m]
		if o == nil {
			o = map[pb.TaskState]int{}
			out[m] = o
		}
		for st, n := range c {
			o[st] += n
		}
	}
	return out
}

// Pending is the number of PENDING, READY and PAUSED tasks.
func (s *State) Pending() int { return s.pending }

// Running returns copies of the RUNNING tasks in id order.
func (s *State) Running() []*pb.Task {
	ids := slices.Sorted(maps.Keys(s.running))
	out := make([]*pb.Task, 0, len(ids))
	for _, id := range ids {
		out = append(out, s.copyOf(s.running[id]))
	}
	return out
}

// Len is the number of tasks in memory; Forgotten the number of forgotten ids.
func (s *State) Len() int       { return len(s.tasks) }
func (s *State) Forgotten() int { return s.forgotten.len() }

func stateName(st pb.TaskState) string {
	return strings.TrimPrefix(st.String(), "TASK_STATE_")
}
