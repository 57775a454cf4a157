package actors

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"sort"
	"strings"
	"sync"

	"github.com/jonboulle/clockwork"

	"google.golang.org/protobuf/proto"

	"fano/actors/allocator"
	"fano/actors/scheduler"
	"fano/metrics"
	"fano/modules"
	"fano/pb"
	"fano/wal"
)

// RecoveryReport says what recovery found and did (fano recover prints it).
type RecoveryReport struct {
	Checkpoints         map[string]uint64 `json:"checkpoints"` // owner -> sequence covered
	EntriesReplayed     int               `json:"entries_replayed"`
	LastSeq             uint64            `json:"last_seq"`
	TasksRecovered      int               `json:"tasks_recovered"`
	TasksPaused         int               `json:"tasks_paused"`         // RUNNING -> PAUSED
	RequestsInterrupted int               `json:"requests_interrupted"` // in flight at the crash: re-sent at most once
	TasksToResume       int               `json:"tasks_to_resume"`
	Repairs             []string          `json:"repairs"`
	Problems            []string          `json:"problems"`    // found, not repairable here
	TaskStates          map[string]int    `json:"task_states"` // after repairs (as recorded, with --dry-run)
	DryRun              bool              `json:"dry_run"`
}

// recovery rebuilds the owners of state from their checkpoints and the
// WAL: all of them at start (recoverAll, with validation and
// repair, and the output files whose writes a crash cut off), one of them
// when its actor restarts after a panic. recoverAll runs before any actor
// exists; what it rebuilt waits here until the first instance of each
// owner takes it (takeScheduler, takeAllocator, takeModule, under mu).
// The per-owner rebuilds and writeExports run in the owner's actor.
type recovery struct {
	log       Store
	opts      Options
	clock     clockwork.Clock
	taskTypes map[string]map[string]bool // module -> its task types
	// blank holds each module's snapshot as constructed: a restarted host
	// resets its module to it before replaying, so no event is applied
	// twice on top of the state the crash left behind.
	blank   map[string][]byte
	publish func(*pb.StateUpdate)

	mu          sync.Mutex
	initSched   *schedState
	initAlloc   *allocState
	initModules map[string]uint64
}

// newRecovery takes each module's task types and its snapshot as
// constructed (see blank); a module named twice is an error.
func newRecovery(opts Options, publish func(*pb.StateUpdate)) (*recovery, error) {
	rc := &recovery{log: opts.Log, opts: opts, clock: opts.Clock, publish: publish,
		taskTypes: map[string]map[string]bool{}, blank: map[string][]byte{}}
	for _, m := range opts.Modules {
		if _, dup := rc.taskTypes[m.Name()]; dup {
			return nil, fmt.Errorf("actors: module %q configured twice", m.Name())
		}
		blank, err := m.Snapshot()
		if err != nil {
			return nil, fmt.Errorf("actors: module %s: snapshot: %w", m.Name(), err)
		}
		rc.blank[m.Name()] = blank
		types := map[string]bool{}
		for _, t := range m.TaskTypes() {
			types[t] = true
		}
		rc.taskTypes[m.Name()] = types
	}
	return rc, nil
}

type schedState struct {
	state *scheduler.State
	last  uint64
}

type allocState struct {
	book *allocator.Book
	last uint64
}

// owned is one WAL owner being rebuilt: its checkpoint, then its entries.
type owned struct {
	last  uint64
	apply func(*pb.Event) error
}

// replay rebuilds owners from their checkpoints and the entries after them
// in one pass over the log. An entry that does not decode stops recovery
// with its sequence number; entries of owners nobody knows are reported.
func replay(log Store, owners map[string]*owned, rep *RecoveryReport) error {
	from := uint64(math.MaxUint64)
	for _, o := range owners {
		if o.last+1 < from {
			from = o.last + 1
		}
	}
	if from == math.MaxUint64 {
		from = 1
	}
	unknown := map[string]int{}
	// Decoding is most of the cost: a second goroutine decodes batches
	// while this one applies the previous batch, in sequence order.
	type item struct {
		ent wal.Entry
		o   *owned
		e   *pb.Event
		err error
	}
	const batchSize = 4096
	batches := make(chan []item, 4)
	decoded := make(chan []item, 4)
	go func() {
		defer close(decoded)
		for b := range batches {
			for i := range b {
				b[i].e, b[i].err = decodeEvent(b[i].ent)
			}
			decoded <- b
		}
	}()
	applyErr := make(chan error, 1)
	go func() {
		var first error
		for b := range decoded {
			for _, it := range b {
				if first != nil {
					break
				}
				if it.err != nil {
					first = it.err
					break
				}
				if err := it.o.apply(it.e); err != nil {
					if rep == nil {
						first = fmt.Errorf("wal entry %d (%s): %w", it.ent.Seq, it.ent.Type, err)
						break
					}
					rep.Problems = append(rep.Problems, fmt.Sprintf("wal entry %d (%s, owner %s) does not apply: %v", it.ent.Seq, it.ent.Type, it.ent.Owner, err))
				}
				it.o.last = it.ent.Seq
				if rep != nil {
					rep.EntriesReplayed++
				}
			}
		}
		applyErr <- first
	}()
	cur := make([]item, 0, batchSize)
	err := log.Replay(from, func(ent wal.Entry) error {
		o := owners[ent.Owner]
		if o == nil {
			if ent.Owner != ownerEffects {
				unknown[ent.Owner]++
			}
			return nil
		}
		if ent.Seq <= o.last {
			return nil
		}
		cur = append(cur, item{ent: ent, o: o})
		if len(cur) == batchSize {
			batches <- cur
			cur = make([]item, 0, batchSize)
		}
		return nil
	})
	if len(cur) > 0 {
		batches <- cur
	}
	close(batches)
	if aerr := <-applyErr; err == nil {
		err = aerr
	}
	if err != nil {
		return fmt.Errorf("recover: replay: %w", err)
	}
	if rep != nil {
		names := make([]string, 0, len(unknown))
		for n := range unknown {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%d wal entries of unknown owner %q kept, not applied (module not configured?)", unknown[n], n))
		}
	}
	return nil
}

func loadSnapshot(log Store, owner string, msg proto.Message) (uint64, bool, error) {
	cp, ok, err := log.LoadCheckpoint(owner)
	if err != nil {
		return 0, false, fmt.Errorf("recover: checkpoint of %s: %w", owner, err)
	}
	if !ok {
		return 0, false, nil
	}
	if msg != nil {
		if err := proto.Unmarshal(cp.Snapshot, msg); err != nil {
			return 0, false, fmt.Errorf("recover: checkpoint of %s at seq %d does not decode: %w", owner, cp.Seq, err)
		}
	}
	return cp.Seq, true, nil
}

func (rc *recovery) newScheduler() (*owned, *schedState, error) {
	var snap pb.SchedulerSnapshot
	seq, ok, err := loadSnapshot(rc.log, ownerScheduler, &snap)
	if err != nil {
		return nil, nil, err
	}
	st := &schedState{state: scheduler.New(rc.opts.Scheduler)}
	if ok {
		if st.state, err = scheduler.Restore(rc.opts.Scheduler, &snap); err != nil {
			return nil, nil, fmt.Errorf("recover: scheduler checkpoint at seq %d: %w", seq, err)
		}
	}
	return &owned{last: seq, apply: st.state.Apply}, st, nil
}

func (rc *recovery) newAllocator() (*owned, *allocState, error) {
	var snap pb.AllocatorSnapshot
	seq, ok, err := loadSnapshot(rc.log, ownerAllocator, &snap)
	if err != nil {
		return nil, nil, err
	}
	st := &allocState{book: allocator.New(rc.opts.Allocator)}
	if ok {
		if st.book, err = allocator.Restore(rc.opts.Allocator, &snap); err != nil {
			return nil, nil, fmt.Errorf("recover: allocator checkpoint at seq %d: %w", seq, err)
		}
	}
	return &owned{last: seq, apply: st.book.Apply}, st, nil
}

func (rc *recovery) newModule(m modules.Module) (*owned, error) {
	owner := moduleOwner(m.Name())
	cp, ok, err := rc.log.LoadCheckpoint(owner)
	if err != nil {
		return nil, fmt.Errorf("recover: checkpoint of %s: %w", owner, err)
	}
	var last uint64
	if ok {
		if err := m.Restore(cp.Snapshot); err != nil {
			return nil, fmt.Errorf("recover: checkpoint of %s at seq %d does not decode: %w", owner, cp.Seq, err)
		}
		last = cp.Seq
	} else if err := m.Restore(rc.blank[m.Name()]); err != nil {
		return nil, fmt.Errorf("recover: reset %s: %w", owner, err)
	}
	return &owned{last: last, apply: func(e *pb.Event) error {
		me := e.GetModuleEvent()
		if me == nil {
			return fmt.Errorf("not a module event: %s", eventType(e))
		}
		return m.Apply(me, timeOf(e.At))
	}}, nil
}

// recoverScheduler rebuilds the scheduler alone (after a panic restart).
func (rc *recovery) recoverScheduler() (*schedState, error) {
	o, st, err := rc.newScheduler()
	if err != nil {
		return nil, err
	}
	if err := replay(rc.log, map[string]*owned{ownerScheduler: o}, nil); err != nil {
		return nil, err
	}
	st.last = o.last
	rc.recovered(ownerScheduler)
	return st, nil
}

func (rc *recovery) recoverAllocator() (*allocState, error) {
	o, st, err := rc.newAllocator()
	if err != nil {
		return nil, err
	}
	if err := replay(rc.log, map[string]*owned{ownerAllocator: o}, nil); err != nil {
		return nil, err
	}
	st.last = o.last
	rc.recovered(ownerAllocator)
	return st, nil
}

// recoverModule rebuilds a module in place from its checkpoint and entries.
func (rc *recovery) recoverModule(m modules.Module) (uint64, error) {
	o, err := rc.newModule(m)
	if err != nil {
		return 0, err
	}
	if err := replay(rc.log, map[string]*owned{moduleOwner(m.Name()): o}, nil); err != nil {
		return 0, err
	}
	rc.recovered(moduleOwner(m.Name()))
	return o.last, nil
}

// recovered tells the metrics that a restarted actor rebuilt owner's state
// from the WAL (recovery at start is counted by whoever started it).
func (rc *recovery) recovered(owner string) {
	rc.publish(&pb.StateUpdate{Component: metrics.UpdateRecovery, UpdateType: metrics.UpdateRecovered, Data: map[string]string{"owner": owner}})
}

// recoverAll is recovery at start: checkpoints + one replay
// pass, then validate and repair. Repairs are events like any other; with
// opts.Dry they are reported and not written.
func (rc *recovery) recoverAll() (*RecoveryReport, error) {
	// Replay makes much short-lived garbage; collecting less often while it
	// runs roughly halves the time spent in the collector.
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	rep := &RecoveryReport{Checkpoints: map[string]uint64{}, DryRun: rc.opts.Dry}
	owners := map[string]*owned{}
	so, sst, err := rc.newScheduler()
	if err != nil {
		return nil, err
	}
	owners[ownerScheduler] = so
	ao, ast, err := rc.newAllocator()
	if err != nil {
		return nil, err
	}
	owners[ownerAllocator] = ao
	for _, m := range rc.opts.Modules {
		mo, err := rc.newModule(m)
		if err != nil {
			return nil, err
		}
		owners[moduleOwner(m.Name())] = mo
	}
	for name, o := range owners {
		if o.last > 0 {
			rep.Checkpoints[name] = o.last
		}
	}
	if err := replay(rc.log, owners, rep); err != nil {
		return nil, err
	}
	rep.LastSeq = rc.log.LastSeq()

	repairs, err := rc.validate(sst.state, rep)
	if err != nil {
		return nil, err
	}
	if len(repairs) > 0 && !rc.opts.Dry {
		entries := make([]wal.Entry, 0, len(repairs))
		for _, e := range repairs {
			ent, err := encodeEvent(ownerScheduler, e)
			if err != nil {
				return nil, err
			}
			entries = append(entries, ent)
		}
		seqs, err := rc.log.Append(context.Background(), entries...)
		if err != nil {
			return nil, fmt.Errorf("recover: write repairs: %w", err)
		}
		for i, e := range repairs {
			if err := sst.state.Apply(e); err != nil {
				return nil, fmt.Errorf("recover: apply repair %d: %w", seqs[i], err)
			}
			so.last = seqs[i]
		}
	}
	if err := rc.commitAnsweredIntents(sst.state, rep); err != nil {
		return nil, err
	}
	rep.TaskStates = map[string]int{}
	for _, byState := range sst.state.Counts() {
		for st, n := range byState {
			rep.TaskStates[strings.TrimPrefix(st.String(), "TASK_STATE_")] += n
		}
	}
	sst.last, ast.last = so.last, ao.last
	rc.initSched, rc.initAlloc = sst, ast
	rc.initModules = map[string]uint64{}
	for _, m := range rc.opts.Modules {
		rc.initModules[m.Name()] = owners[moduleOwner(m.Name())].last
	}
	return rep, nil
}

// validate checks the recovered tasks and returns the repair events.
func (rc *recovery) validate(st *scheduler.State, rep *RecoveryReport) ([]*pb.Event, error) {
	now := nanos(rc.clock.Now())
	var repairs []*pb.Event
	var all []*pb.Task
	st.ForEach(func(t *pb.Task) { all = append(all, t) }) // read only
	sort.Slice(all, func(i, j int) bool { return all[i].Id < all[j].Id })
	rep.TasksRecovered = len(all)
	unbuilt, unbuiltWhy := map[string]int{}, map[string]string{}
	for _, t := range all {
		switch {
		case t.State == pb.TaskState_TASK_STATE_RUNNING || t.State == pb.TaskState_TASK_STATE_READY:
			if t.Conversation.GetAwaitingResponse() {
				// In flight at the crash: drop the unanswered prompt; the
				// module asks again, once, when the task resumes.
				repairs = append(repairs, &pb.Event{At: now, Body: &pb.Event_LlmRequestFailed{LlmRequestFailed: &pb.LLMRequestFailed{
					TaskId: t.Id, Llm: t.LlmAssigned, Kind: "interrupted", Error: "in flight when fano stopped",
				}}})
				rep.RequestsInterrupted++
			}
			repairs = append(repairs, &pb.Event{At: now, Body: &pb.Event_TaskPaused{TaskPaused: &pb.TaskPaused{TaskId: t.Id, Reason: "recovery"}}})
			rep.TasksPaused++
			rep.TasksToResume++
		case t.State == pb.TaskState_TASK_STATE_PAUSED && t.PauseReason != "orphan":
			rep.TasksToResume++
		}
		err := rc.checkTask(t)
		if err != nil && !finished(t) {
			if why, known := rc.opts.Unbuilt[t.GetModule()]; known {
				unbuilt[t.GetModule()]++
				unbuiltWhy[t.GetModule()] = why
				continue
			}
		}
		switch {
		case err != nil && !finished(t) && t.PauseReason != "orphan":
			repairs = append(repairs, &pb.Event{At: now, Body: &pb.Event_TaskPaused{TaskPaused: &pb.TaskPaused{TaskId: t.Id, Reason: "orphan", NotBefore: math.MaxInt64}}})
			rep.Repairs = append(rep.Repairs, fmt.Sprintf("task %s paused: %v", t.Id, err))
		case err == nil && t.State == pb.TaskState_TASK_STATE_PAUSED && t.PauseReason == "orphan":
			// Its module is built again: the task resumes.
			repairs = append(repairs, &pb.Event{At: now, Body: &pb.Event_TaskPaused{TaskPaused: &pb.TaskPaused{TaskId: t.Id, Reason: "recovery"}}})
			rep.Repairs = append(rep.Repairs, fmt.Sprintf("task %s resumes: its module %s is built again", t.Id, t.GetModule()))
			rep.TasksToResume++
		}
		if n := len(t.Conversation.GetMessages()); n > 100 {
			rep.Problems = append(rep.Problems, fmt.Sprintf("task %s has an oversized conversation (%d messages)", t.Id, n))
		}
		if t.State == pb.TaskState_TASK_STATE_COMPLETED && t.CompletedAt == 0 {
			rep.Problems = append(rep.Problems, fmt.Sprintf("task %s is COMPLETED but has no completed_at", t.Id))
		}
	}
	if len(unbuilt) > 0 {
		var parts []string
		for _, name := range sortedNames(unbuilt) {
			parts = append(parts, fmt.Sprintf("%d unfinished tasks of module %q, which cannot be built: %s", unbuilt[name], name, unbuiltWhy[name]))
		}
		return nil, fmt.Errorf("recover: %w: %s", ErrModuleNotBuilt, strings.Join(parts, "; "))
	}
	if rep.TasksPaused > 0 {
		rep.Repairs = append(rep.Repairs, fmt.Sprintf("%d running tasks paused (%d requests in flight will be asked again)", rep.TasksPaused, rep.RequestsInterrupted))
	}
	return repairs, nil
}

// commitAnsweredIntents closes request intents left open: every request
// either has its answer in the task or was failed by validate above.
func (rc *recovery) commitAnsweredIntents(st *scheduler.State, rep *RecoveryReport) error {
	open, err := rc.log.Uncommitted()
	if err != nil {
		return fmt.Errorf("recover: list intents: %w", err)
	}
	if rc.opts.Dry {
		return rc.redoEffects(open, rep) // reports only
	}
	if err := rc.redoEffects(open, rep); err != nil {
		return err
	}
	var seqs []uint64
	for _, ent := range open {
		if ent.Owner != ownerEffects {
			seqs = append(seqs, ent.Seq)
		}
	}
	if len(seqs) == 0 {
		return nil
	}
	if err := rc.log.Commit(context.Background(), seqs...); err != nil {
		return fmt.Errorf("recover: commit %d intents: %w", len(seqs), err)
	}
	rep.Repairs = append(rep.Repairs, fmt.Sprintf("%d request intents closed", len(seqs)))
	return nil
}

func finished(t *pb.Task) bool {
	switch t.State {
	case pb.TaskState_TASK_STATE_COMPLETED, pb.TaskState_TASK_STATE_FAILED, pb.TaskState_TASK_STATE_CANCELLED:
		return true
	}
	return false
}

var errUnknownTask = errors.New("unknown module or task type")

// ErrModuleNotBuilt: the WAL holds unfinished tasks of a module that could
// not be built (Options.Unbuilt), so recovery refuses to go on.
var ErrModuleNotBuilt = errors.New("a module with unfinished tasks cannot be built")

func sortedNames(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// checkTask refuses a task no configured module runs.
func (rc *recovery) checkTask(t *pb.Task) error {
	types, ok := rc.taskTypes[t.GetModule()]
	if !ok {
		return fmt.Errorf("task %s: %w: module %q", t.GetId(), errUnknownTask, t.GetModule())
	}
	if !types[t.GetTaskType()] {
		return fmt.Errorf("task %s: %w: type %q of module %s", t.GetId(), errUnknownTask, t.GetTaskType(), t.GetModule())
	}
	return nil
}

func (rc *recovery) takeScheduler() *schedState {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	st := rc.initSched
	rc.initSched = nil
	return st
}

func (rc *recovery) takeAllocator() *allocState {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	st := rc.initAlloc
	rc.initAlloc = nil
	return st
}

func (rc *recovery) takeModule(name string) (uint64, bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	last, ok := rc.initModules[name]
	delete(rc.initModules, name)
	return last, ok
}
