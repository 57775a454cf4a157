package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"fano/actors/scheduler"
	"fano/pb"
	"fano/wal"
)

// schedulerActor owns every task through a scheduler.State. It is the only
// writer of task events: executors send it theirs (pb.TaskEvents), so the
// events of one task are applied in the order they were written.
type schedulerActor struct {
	sys   *System
	state *scheduler.State
	j     *journal
	last  uint64 // highest sequence applied

	free       *pb.FreeSlots
	allocating int // picks sent to the allocator, not yet answered
	// deferred holds picked tasks no backend could take (e.g. deep mode
	// with every deep budget spent) until the next tick, so they are not
	// picked again and again ahead of work that can run.
	deferred []string
	// cancelling holds cancels forwarded to a running task's executor. An
	// executor that was already pausing itself ends without seeing it, so
	// when it is done the cancel is carried out here.
	cancelling map[string]string
	stopping   bool

	lastForget time.Time // finished tasks past retention are archived now and then
	forgetting bool      // an archive write or its events are under way
	// resuming holds tasks whose resume is written but not yet applied:
	// a tick meanwhile (a slow fsync, a WAL fault being retried) must not
	// decide it again, or it is written twice.
	resuming map[string]bool
	// runs are the running tasks' executors, started here (onAllocated)
	// and told when they must yield their backend to a more urgent task:
	// pushed at the tick, not asked for at every safe point; a cancel of
	// a running task goes to its executor from here. Kept in the heir.
	runs map[string]*runWatch
	// handedOut holds the runs handed to an executor, from then until the
	// executor ends. The start of a run is queued in the WAL and the
	// executor goes on without waiting for its fsync: until the start is
	// applied the task is PENDING and picked in the state, but it is
	// running (a cancel goes to its executor).
	handedOut map[string]uint64 // task id -> run number
	ahead     aheadTasks        // see ahead.go
	heir      *schedulerHeir
	desk      *desk
}

// schedulerHeir carries what a scheduler instance knows beyond its state
// to the one that replaces it after a panic (which rebuilds its state
// from the log).
type schedulerHeir struct {
	ahead  aheadTasks
	handed uint64 // hand-outs so far: run numbers are never reused
	// free is the allocator's last FreeSlots: it sends one only when the
	// view changed, not to each new instance.
	free *pb.FreeSlots
	// runs are the executors running: they run on through a restart.
	runs map[string]*runWatch
}

// runWatch is what the scheduler last told one running task's executor.
type runWatch struct {
	pid   *actor.PID
	run   uint64 // the hand-out's run number
	llm   string
	yield string // the task it yields to ("" none)
}

// tellYield tells the executor when its answer changed.
func (a *schedulerActor) tellYield(taskID string, w *runWatch) {
	instead := ""
	normal, deep := a.sys.inputs.canTake(w.llm)
	if ok, id := a.state.ShouldPreemptFor(taskID, w.llm, normal, deep); ok {
		instead = id
	}
	if instead == w.yield || (instead != "" && w.yield != "") || w.pid == nil {
		return
	}
	w.yield = instead
	a.sys.root.Send(w.pid, &pb.PreemptReply{Instead: instead})
}

func (a *schedulerActor) Receive(ctx actor.Context) {
	if a.desk == nil {
		a.desk = a.sys.desks.desk(ownerScheduler) // a sync.Map look-up a message otherwise
	}
	g := &a.desk.guard
	g.Lock()
	defer g.Unlock()
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.start(ctx)
	case *actor.Restarting:
		if a.j != nil {
			a.j.close() // the next instance takes what it delivered
		}
	case *actor.Stopping:
		if a.j != nil {
			a.j.close()
			a.sys.desks.applyLeft(ownerScheduler, &a.last, a.state.Apply)
		}
	case *pb.Persisted:
		applied := a.sys.desks.applyPersisted(ownerScheduler, &a.last, m, a.state.Apply)
		for _, ev := range applied {
			if ev.GetTaskCompleted() != nil {
				a.sys.executors.taskEnded() // its executor ended before (executor.complete)
				break
			}
		}
		a.dispatchSoon(ctx) // new, resumed or requeued tasks may run now
	case *pb.TaskSubmit:
		a.submit(ctx, m)
	case *pb.TaskSubmitBatch:
		a.submitBatch(ctx, m)
	case *pb.TaskEvents:
		a.persistTaskEvents(ctx, m)
	case *pb.Tick:
		// The module hosts tick after the scheduler has recomputed with
		// their backlogs as they were: their proposals of this tick come
		// after, not in the middle (see System.tick).
		defer a.sys.tickModules(m)
		if a.stopping {
			// Once shutdown began nothing is decided any more: a tick that
			// lands between the executors' pauses and the end of the tick
			// loops would otherwise resume the tasks just paused for the
			// shutdown (and archive finished ones) in the WAL.
			return
		}
		for _, id := range a.deferred {
			a.state.Unpick(id)
		}
		a.deferred = a.deferred[:0]
		now := timeOf(m.Now)
		a.state.Recompute(now, a.sys.inputs.schedulerEnv())
		// While stopping, tasks paused by the shutdown stay paused: a
		// resume now would only be undone by the next start.
		if evs := a.unlessResuming(a.state.DecideResume(now)); len(evs) > 0 && !a.stopping {
			a.j.persist(evs, func([]uint64, error) {
				for _, ev := range evs {
					delete(a.resuming, ev.GetTaskResumed().GetTaskId())
				}
			})
		}
		for id, w := range a.runs {
			a.tellYield(id, w)
		}
		a.forget(ctx, now)
		a.dispatch(ctx)
	case *pb.Archived:
		if m.Error != "" {
			a.forgetting = false
			a.sys.logger.Error().Str("error", m.Error).Str("event", "actors.scheduler.archive_failed").Msg("finished tasks stay in memory")
			return
		}
		// Until the events are applied the tasks are still in memory: a
		// forget meanwhile would pick them again.
		a.j.persist(m.Events, func([]uint64, error) { a.forgetting = false })
	case *pb.FreeSlots:
		a.free, a.heir.free = m, m
		a.dispatchSoon(ctx)
	case *pb.Allocated:
		a.onAllocated(ctx, m)
		if m.Free != nil {
			// As a FreeSlots after it would be.
			a.free, a.heir.free = m.Free, m.Free
			a.dispatchSoon(ctx)
		}
	case *pb.TaskComplete:
		if w := a.runs[m.TaskId]; w != nil && w.run == m.Run {
			delete(a.runs, m.TaskId)
		}
		if run, ok := a.handedOut[m.TaskId]; ok && run == m.Run {
			delete(a.handedOut, m.TaskId)
		}
		if reason, ok := a.cancelling[m.TaskId]; ok {
			delete(a.cancelling, m.TaskId)
			if !m.Result.GetCancelled() {
				a.cancel(nil, &pb.CancelTask{TaskId: m.TaskId, Reason: reason})
			}
		}
		a.refill(ctx, m.Llm)
		a.dispatchSoon(ctx)
	case *pb.CancelTask:
		a.cancel(ctx.Sender(), m)
	case *pb.Barrier:
		respond(ctx, &pb.BarrierReply{})
	case *pb.Checkpoint:
		if !a.sys.checkpoints.due(ownerScheduler, a.last) {
			respond(ctx, doneOf(nil))
			return
		}
		data, err := a.state.SnapshotBytes()
		if err != nil {
			respond(ctx, doneOf(fmt.Errorf("checkpoint %s: encode: %w", ownerScheduler, err)))
			return
		}
		respond(ctx, doneOf(a.sys.checkpoints.saveBytes(ownerScheduler, a.last, data)))
	case *pb.Shutdown:
		a.stopping = true
		respond(ctx, &pb.Done{})
	}
}

func (a *schedulerActor) start(ctx actor.Context) {
	if st := a.sys.recovery.takeScheduler(); st != nil {
		a.state, a.last = st.state, st.last
	} else {
		// A restart after a panic: the state comes back from the WAL.
		st, err := a.sys.recovery.recoverScheduler()
		if err != nil {
			panic(fmt.Errorf("scheduler: recover after restart: %w", err))
		}
		a.state, a.last = st.state, st.last
		a.sys.logger.Warn().Str("event", "actors.scheduler.restarted").Uint64("seq", a.last).Msg("scheduler restarted from the WAL")
	}
	if a.heir.ahead == nil {
		a.heir.ahead = aheadTasks{}
	}
	// A failed instance's journal was closed once every batch it had
	// queued was written (a run's start too): the state recovered from
	// the log holds them, and its hand-outs are RUNNING there. The tasks
	// ahead carry over: the continuations of its batches settle them.
	if a.heir.runs == nil {
		a.heir.runs = map[string]*runWatch{}
	}
	a.handedOut, a.ahead, a.free, a.runs = map[string]uint64{}, a.heir.ahead, a.heir.free, a.heir.runs
	a.j = newJournal(a.sys, ownerScheduler, ctx.Self())
	a.sys.execEnv.schedulerJournal.Store(a.j)
	a.sys.state.scheduler.Store(a)
}

// current is the live scheduler instance. A continuation (journal then)
// runs in the actor's goroutine but may have been created by an instance
// that has since been restarted: it must read the current one's state.
func (a *schedulerActor) current() *schedulerActor { return a.sys.state.scheduler.Load() }

// forget archives finished tasks older than the retention period (looked
// for once a minute), and the oldest when more than MaxFinishedInMemory
// are finished (a quarter over it, so a pass frees many), then logs that
// they left memory: weeks of running, or a million tasks in a day, must
// not grow the heap. The archive write runs off the actor; at most one at
// a time.
func (a *schedulerActor) forget(ctx actor.Context, now time.Time) {
	if a.forgetting {
		return
	}
	pass, ok := a.state.PlanForget(now, a.lastForget, a.sys.opts.FinishedRetention, a.sys.opts.MaxFinishedInMemory)
	if !ok {
		return
	}
	if pass.Retention > 0 {
		a.lastForget = now
	}
	tasks, evs := a.state.DecideForget(now, pass.Retention, pass.Keep, pass.Max)
	if len(tasks) == 0 {
		return
	}
	items := make(map[string][]byte, len(tasks))
	for _, t := range tasks {
		if t.Archived {
			// Archived whole at its completion under its completion key;
			// this copy is the light one: the task's own key points there.
			items[archiveKey(t.Id)] = append([]byte{archiveRef}, completedKey(t)...)
			continue
		}
		data, err := proto.Marshal(t)
		if err != nil {
			return
		}
		items[archiveKey(t.Id)] = data
	}
	a.forgetting = true
	self := ctx.Self()
	a.sys.offActor.Add(1)
	go func() {
		defer a.sys.offActor.Add(-1)
		m := &pb.Archived{Events: evs}
		if err := a.sys.log.Archive(context.Background(), items); err != nil {
			m.Error = err.Error()
		}
		a.sys.root.Send(self, m)
	}()
}

func archiveKey(taskID string) string { return "task/" + taskID }

// completedKey is where a task archived at its completion lies: keys in
// completion order, so the archive grows at its end like the log (keyed
// by task id, the inserts were random and rewrote a leaf each, which cost
// 4x the throughput at 200k tasks).
// Built by hand, not with fmt: one a completed task.
func completedKey(t *pb.Task) string {
	if t.CompletedAt < 0 {
		return fmt.Sprintf("done/%020d/%s", t.CompletedAt, t.Id) // never written: a negative time
	}
	var digits [20]byte
	n := strconv.AppendInt(digits[:0], t.CompletedAt, 10)
	var b strings.Builder // one allocation: the key itself
	b.Grow(len("done/") + 20 + 1 + len(t.Id))
	b.WriteString("done/")
	for range 20 - len(n) {
		b.WriteByte('0')
	}
	b.Write(n)
	b.WriteByte('/')
	b.WriteString(t.Id)
	return b.String()
}

// archiveRef starts an archive value that is the key of another record,
// not a task: an encoded task never starts with a zero byte (field 0 is
// no field).
const archiveRef = 0

// unlessResuming drops the resumes already under way and records the rest.
func (a *schedulerActor) unlessResuming(evs []*pb.Event) []*pb.Event {
	if a.resuming == nil {
		a.resuming = map[string]bool{}
	}
	out := evs[:0]
	for _, ev := range evs {
		id := ev.GetTaskResumed().GetTaskId()
		if !a.resuming[id] {
			a.resuming[id] = true
			out = append(out, ev)
		}
	}
	return out
}

// submit queues one task: a batch of one, answered with its own reply.
func (a *schedulerActor) submit(ctx actor.Context, m *pb.TaskSubmit) {
	sender := ctx.Sender()
	a.submitTasks([]*pb.Task{m.GetTask()}, func(rs []*pb.TaskSubmitReply) { a.sys.asks.respondLater(sender, rs[0]) })
}

// submitBatch queues a batch's tasks with one journal batch: one durable
// wait for all of them, one reply listing each task's answer.
func (a *schedulerActor) submitBatch(ctx actor.Context, m *pb.TaskSubmitBatch) {
	sender := ctx.Sender()
	a.submitTasks(m.GetTasks(), func(rs []*pb.TaskSubmitReply) {
		a.sys.asks.respondLater(sender, &pb.TaskSubmitBatchReply{Replies: rs})
	})
}

// submitTasks decides every task in order (a task refused is answered
// alone, the others go on; an id twice in tasks is a duplicate the
// second time, as DecideSubmit reserves it), persists the accepted ones
// as one batch and answers once they are applied (at once if none was
// accepted).
func (a *schedulerActor) submitTasks(tasks []*pb.Task, answer func(rs []*pb.TaskSubmitReply)) {
	replies := make([]*pb.TaskSubmitReply, len(tasks))
	var events []*pb.Event
	var decided []int // index in tasks of each event
	now := a.sys.clock.Now()
	for i, t := range tasks {
		if err := a.sys.recovery.checkTask(t); err != nil {
			replies[i] = &pb.TaskSubmitReply{TaskId: t.GetId(), Reason: err.Error()}
			continue
		}
		ev, err := a.state.DecideSubmit(t, now)
		if err != nil {
			var se *scheduler.SubmitError
			dup := errors.As(err, &se) && se.Code == "duplicate"
			replies[i] = &pb.TaskSubmitReply{TaskId: t.GetId(), Duplicate: dup, Reason: err.Error()}
			continue
		}
		events = append(events, ev)
		decided = append(decided, i)
	}
	if len(events) == 0 {
		answer(replies)
		return
	}
	a.j.persist(events, func(_ []uint64, err error) {
		for _, i := range decided {
			r := &pb.TaskSubmitReply{TaskId: tasks[i].GetId(), Accepted: err == nil}
			if err != nil {
				r.Reason = err.Error()
			}
			replies[i] = r
		}
		answer(replies)
	})
}

// persistTaskEvents answers with the task as it is once the events are
// applied: an executor reads its task from here, never applying events
// of its own. A completion archives the whole task with its events.
func (a *schedulerActor) persistTaskEvents(ctx actor.Context, m *pb.TaskEvents) {
	sender := ctx.Sender()
	id := m.TaskId
	// The task after these events: archived whole if they complete it,
	// and kept while they are queued when its writer does not wait for
	// them (or for earlier ones).
	var next *pb.Task
	done := completion(m.Events)
	track := a.ahead[id] != nil || m.ReplyWhenQueued
	if track || done != nil {
		next = a.afterEvents(id, m.Events)
	}
	archive := archiveOnCompletion(next, done)
	if !track {
		next = nil
	}
	if next != nil {
		a.ahead.queued(id, next)
	}
	var queued func(error)
	if m.ReplyWhenQueued && !m.NoReply {
		queued = func(err error) { // on the journal's goroutine: next is never changed
			if err == nil && next != nil && m.ThenModule != nil {
				a.handToModule(sender, next, m.ThenModule)
				return
			}
			r := &pb.TaskEventsReply{Error: errorToWire(err)}
			if err == nil && m.WantTask {
				r.Task = next
			}
			a.sys.asks.respondLater(sender, r)
		}
	}
	tracked := next != nil
	// An answer with no task in it (a request's intent, a pause) leaves
	// once the events are durable, not once they are applied (see
	// batch.durable).
	var durable func([]uint64, error)
	if !m.NoReply && !m.ReplyWhenQueued && !m.WantTask {
		durable = func(seqs []uint64, err error) {
			a.sys.asks.respondLater(sender, &pb.TaskEventsReply{Seqs: seqs, Error: errorToWire(err)})
		}
	}
	a.j.enqueue(&batch{events: m.Events, archive: archive, queued: queued, durable: durable, then: func(seqs []uint64, err error) {
		cur := a.current()
		if tracked {
			cur.ahead.settle(id)
		}
		if err == nil {
			a.logAnswers(m.Events)
		}
		if m.NoReply || m.ReplyWhenQueued || durable != nil {
			return
		}
		r := &pb.TaskEventsReply{Seqs: seqs, Error: errorToWire(err)}
		if err == nil && m.WantTask {
			r.Task, _ = cur.state.TaskView(id) // shared: the executor never changes it
		}
		a.sys.asks.respondLater(sender, r)
	}})
}

// handToModule hands an answer, queued in the WAL, to its task's module
// on the behalf of sender, who gets the module's reply (TaskEvents
// then_module). It runs on the journal's goroutine: it only sends.
func (a *schedulerActor) handToModule(sender *actor.PID, t *pb.Task, m *pb.ModuleAnswer) {
	pid, ok := a.sys.modulePIDs[t.Module]
	if !ok {
		a.sys.asks.respondLater(sender, &pb.NextActionReply{Error: errorToWire(fmt.Errorf("task %s: no module %q", t.Id, t.Module))})
		return
	}
	m.Task = t
	a.sys.root.RequestWithCustomSender(pid, m, sender)
}

// logAnswers logs the answers among events once they are durable (the
// executor goes on before: see executor.answer).
func (a *schedulerActor) logAnswers(events []*pb.Event) {
	for _, ev := range events {
		if r := ev.GetLlmResponseReceived(); r != nil {
			a.sys.logger.Debug().Str("event", "actors.executor.llm_response").Str("task", r.TaskId).Int32("turn", r.Turn).
				Str("llm", r.Llm).Int("bytes", len(r.Content)).Msg("answer saved")
		}
	}
}

// afterEvents is the task as it will be after events, on top of those
// queued for it and not yet applied (nil: unknown, or they do not apply,
// and apply will refuse them too). It shares with the scheduler's task
// what events never change in place.
func (a *schedulerActor) afterEvents(id string, events []*pb.Event) *pb.Task {
	t, ok := a.ahead.copyOf(id)
	if !ok {
		t, err := a.state.TaskAfter(id, events)
		if err != nil {
			return nil
		}
		return t
	}
	for _, ev := range events {
		if err := scheduler.ApplyToTask(t, ev, a.sys.opts.Scheduler.MessageLimit); err != nil {
			return nil
		}
	}
	return t
}

// completion is the TaskCompleted among events, if any.
func completion(events []*pb.Event) *pb.TaskCompleted {
	for _, ev := range events {
		if done := ev.GetTaskCompleted(); done != nil {
			return done
		}
	}
	return nil
}

// archiveOnCompletion: when events complete a task (done), the whole task
// as it will then be (t, conversation included) is written to the archive
// with them, and the completion says so: applying it, the scheduler keeps
// only what lists, counts and dedup need, and readers of the conversation
// take it from the archive (weeks of work must not grow the
// heap). With t nil (the events do not apply; apply refuses them too), or
// a task that does not encode, nothing leaves memory. The record is made
// by the journal (batch.archive), off the scheduler's goroutine: t is
// never changed, only replaced (aheadTasks), and done is not read before
// it is encoded.
func archiveOnCompletion(t *pb.Task, done *pb.TaskCompleted) func() *wal.ArchiveRecord {
	if t == nil || done == nil {
		return nil
	}
	return func() *wal.ArchiveRecord {
		data, err := pb.MarshalTask(t)
		if err != nil {
			return nil
		}
		done.Archived = true
		return &wal.ArchiveRecord{Key: completedKey(t), Value: data}
	}
}

// dispatchSoon dispatches now, or at the next tick with
// Options.DispatchOnTick.
func (a *schedulerActor) dispatchSoon(ctx actor.Context) {
	if !a.sys.opts.DispatchOnTick {
		a.dispatch(ctx)
	}
}

// dispatch picks as many tasks as there are free slots and asks the
// allocator for an LLM for each.
func (a *schedulerActor) dispatch(ctx actor.Context) {
	if a.stopping || !a.sys.Accepting() {
		return
	}
	budget := a.sys.opts.MaxRunning - int(a.sys.executors.Load()) - a.allocating
	if budget <= 0 {
		return // every place is taken: most calls when tasks run back to back
	}
	slots := 0
	var free, deepFree []string
	for b, f := range a.free.GetBackends() {
		if n := int(f.Slots); n > 0 {
			slots += n
			if f.Normal {
				free = append(free, b)
			}
			if f.Deep {
				deepFree = append(deepFree, b)
			}
		}
	}
	// In name order, not the map's: the same state picks the same tasks.
	slices.Sort(free)
	slices.Sort(deepFree)
	if slots < budget {
		budget = slots
	}
	now := a.sys.clock.Now()
	for ; budget > 0; budget-- {
		t, ok := a.state.PickFor(free, deepFree, now)
		if !ok {
			return
		}
		a.allocating++
		ctx.Send(a.sys.allocatorPID, &pb.Allocate{Task: t})
	}
}

// refill gives back the slot on llm of a run that ended, or hands it to
// the most urgent task that can use llm: a slot freed and published first
// (pb.ReleaseSlot, then pb.FreeSlots, then the pick's pb.Allocate, then
// pb.Allocated) stayed empty for four trips through busy mailboxes per
// task. Where the allocator could only choose llm for the task (see
// passesSlot) the task starts on the slot at once and the allocator is
// told (pb.SlotPassed); otherwise the allocator frees the slot and
// allocates the task in one message. Where no task is picked now the slot
// is just given back. With Options.DispatchOnTick nothing is picked
// between ticks.
func (a *schedulerActor) refill(ctx actor.Context, llm string) {
	if llm == "" {
		return
	}
	budget := a.sys.opts.MaxRunning - int(a.sys.executors.Load()) - a.allocating
	if a.sys.opts.DispatchOnTick || a.stopping || !a.sys.Accepting() || budget <= 0 {
		ctx.Send(a.sys.allocatorPID, &pb.ReleaseSlot{Backend: llm})
		return
	}
	var free, deepFree []string
	normal, deep := a.sys.inputs.canTake(llm)
	if normal {
		free = []string{llm}
	}
	if deep {
		deepFree = []string{llm}
	}
	now := a.sys.clock.Now()
	if a.passesSlot() {
		id, deep, ok := a.state.PickIDFor(free, deepFree, now)
		if !ok {
			ctx.Send(a.sys.allocatorPID, &pb.ReleaseSlot{Backend: llm})
			return
		}
		a.allocating++
		ctx.Send(a.sys.allocatorPID, &pb.SlotPassed{TaskId: id, Backend: llm, Deep: deep})
		a.onAllocated(ctx, &pb.Allocated{TaskId: id, Llm: llm})
		return
	}
	t, ok := a.state.PickFor(free, deepFree, now)
	if !ok {
		ctx.Send(a.sys.allocatorPID, &pb.ReleaseSlot{Backend: llm})
		return
	}
	a.allocating++
	ctx.Send(a.sys.allocatorPID, &pb.Allocate{Task: t, Release: llm})
}

// passesSlot says whether the task picked for the backend whose slot a
// run just freed may start there without asking the allocator: when the
// allocator could choose nothing else (allocator.Book.Choose), as no
// other backend has a free slot in its last view. The pick already kept
// to the task's preference and exclusions and to the backend's quota for
// its kind of request. That view can be a few messages old; a request
// the quota then refuses never leaves (the task moves on, as after any
// allocation the quota has outrun).
func (a *schedulerActor) passesSlot() bool {
	return len(a.free.GetBackends()) == 0
}

func (a *schedulerActor) onAllocated(ctx actor.Context, m *pb.Allocated) {
	a.allocating--
	taskID, llm := m.TaskId, m.Llm
	if llm == "" || a.stopping || !a.state.Picked(taskID) {
		// No LLM, shutting down, or cancelled while the allocator looked.
		if llm != "" {
			ctx.Send(a.sys.allocatorPID, &pb.ReleaseSlot{Backend: llm})
		}
		if llm == "" && a.state.Picked(taskID) {
			a.deferred = append(a.deferred, taskID)
			a.dispatchSoon(ctx)
			return
		}
		a.state.Unpick(taskID)
		return
	}
	// The start is queued in the WAL and the executor handed out at once,
	// without waiting for its fsync: what the executor writes next is
	// queued behind it (the same journal), so the log never holds the
	// run's events without its start, and starts stay in pick order. A
	// crash before the start is durable leaves the task PENDING: nothing
	// was sent for it. Until the start is applied the task stays picked,
	// and handedOut says it is running.
	ev := &pb.Event{At: nanos(a.sys.clock.Now()), Body: &pb.Event_TaskStarted{TaskStarted: &pb.TaskStarted{TaskId: taskID, Llm: llm}}}
	t, err := a.state.TaskAfter(taskID, []*pb.Event{ev})
	if err != nil {
		// Cannot happen for a picked task; never run an executor on a
		// task that would not start.
		ctx.Send(a.sys.allocatorPID, &pb.ReleaseSlot{Backend: llm})
		a.state.Unpick(taskID)
		a.sys.logger.Error().Str("task", taskID).Str("event", "actors.scheduler.start_mismatch").Msg("picked task cannot start")
		return
	}
	// The run's later events are decided on the task after its start.
	a.ahead.queued(taskID, t)
	a.j.persist([]*pb.Event{ev}, func(_ []uint64, err error) {
		cur := a.current()
		cur.ahead.settle(taskID)
		if err != nil {
			// Not written: its executor's writes, queued behind, fail too.
			cur.state.Unpick(taskID)
			a.sys.logger.Error().Err(err).Str("task", taskID).Str("event", "actors.scheduler.start_failed").Msg("could not persist task start")
		}
	})
	a.heir.handed++
	run := a.heir.handed
	a.handedOut[taskID] = run
	a.sys.executors.Add(1)
	// Started here, not by a message to the orchestrator: an executor is
	// a process in the registry, cheap to make (newExecutor). Its
	// watch is in place and its first answer given before its loop runs.
	e := a.sys.execEnv.newExecutor(t, run)
	w := &runWatch{pid: e.self, run: run, llm: llm}
	a.runs[taskID] = w
	a.tellYield(taskID, w)
	if w.yield == "" && a.sys.opts.DispatchOnTick {
		// The first answer is always given where an executor waits for
		// it before its first request (executor.yielding).
		a.sys.root.Send(w.pid, &pb.PreemptReply{})
	}
	e.start()
}

// cancel carries out a cancel and answers sender (nil: nobody asked).
func (a *schedulerActor) cancel(sender *actor.PID, m *pb.CancelTask) {
	id, reason := m.TaskId, m.Reason
	ev, err := a.state.DecideCancel(id, reason, a.sys.clock.Now())
	if _, handed := a.handedOut[id]; handed && err == nil {
		err = scheduler.ErrRunning // started by its executor, start not yet applied
	}
	if errors.Is(err, scheduler.ErrRunning) {
		// The executor owns a running task: it cancels and writes the event.
		if a.cancelling == nil {
			a.cancelling = map[string]string{}
		}
		a.cancelling[id] = reason
		// No executor: it ended, and its TaskComplete carries the cancel out.
		if w := a.runs[id]; w != nil {
			a.sys.root.Send(w.pid, &pb.CancelRun{Reason: reason})
		}
		a.sys.asks.respondLater(sender, &pb.Done{})
		return
	}
	if err != nil {
		a.sys.asks.respondLater(sender, doneOf(err))
		return
	}
	a.j.persist([]*pb.Event{ev}, func(_ []uint64, err error) {
		a.sys.asks.respondLater(sender, doneOf(err))
		if err != nil {
			return
		}
		// The module learns its task will not run (e.g. a review seat
		// becomes an abstention); nobody waits for its answer here.
		if t, ok := a.current().state.Task(id); ok {
			if pid, ok := a.sys.modulePIDs[t.Module]; ok {
				a.sys.root.Send(pid, &pb.ModuleEnd{Task: t, Failed: true, Reason: "cancelled: " + reason})
			}
		}
	})
}
