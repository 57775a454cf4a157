package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"fano/actors/scheduler"
	"fano/pb"
	"fano/wal"
)

// schedulerActor owns every task through a scheduler.State. It is the only
// writer of task events: executors send it theirs (taskEvents), so the
// events of one task are applied in the order they were written.
type schedulerActor struct {
	sys   *System
	state *scheduler.State
	j     *journal
	last  uint64 // highest sequence applied

	free       freeSlots
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
}

// submitCall is System.Submit's request: the reply comes on a channel,
// not through a future (each future is a process id, and protoactor's
// registry keeps the memory of every id it ever held).
type submitCall struct {
	submit *pb.TaskSubmit
	reply  chan *pb.TaskSubmitReply
}

// archived reports that finished tasks are on disk and may leave memory.
type archived struct {
	events []*pb.Event
	err    error
}

func (a *schedulerActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.start(ctx)
	case *actor.Restarting, *actor.Stopping:
		if a.j != nil {
			a.j.close()
		}
	case *persisted:
		a.sys.applyPersisted(ownerScheduler, &a.last, m, a.state.Apply)
		a.dispatch(ctx) // new, resumed or requeued tasks may run now
	case *pb.TaskSubmit:
		sender := ctx.Sender()
		a.submit(m, func(r *pb.TaskSubmitReply) {
			if sender != nil {
				a.sys.root.Send(sender, r)
			}
		})
	case *submitCall:
		a.submit(m.submit, func(r *pb.TaskSubmitReply) { m.reply <- r })
	case *taskEvents:
		a.persistTaskEvents(m)
	case *tick:
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
		now := timeOf(m.now)
		a.state.Recompute(now, a.sys.schedulerEnv())
		// While stopping, tasks paused by the shutdown stay paused: a
		// resume now would only be undone by the next start.
		if evs := a.unlessResuming(a.state.DecideResume(now)); len(evs) > 0 && !a.stopping {
			a.j.persist(evs, func([]uint64, error) {
				for _, ev := range evs {
					delete(a.resuming, ev.GetTaskResumed().GetTaskId())
				}
			})
		}
		a.forget(ctx, now)
		a.dispatch(ctx)
	case *archived:
		if m.err != nil {
			a.forgetting = false
			a.sys.logger.Error().Err(m.err).Str("event", "actors.scheduler.archive_failed").Msg("finished tasks stay in memory")
			return
		}
		// Until the events are applied the tasks are still in memory: a
		// forget meanwhile would pick them again.
		a.j.persist(m.events, func([]uint64, error) { a.forgetting = false })
	case *freeSlots:
		a.free = *m
		a.dispatch(ctx)
	case *allocated:
		a.onAllocated(ctx, m)
	case *executorDone:
		if reason, ok := a.cancelling[m.taskID]; ok {
			delete(a.cancelling, m.taskID)
			if !m.result.GetCancelled() {
				a.cancel(&cancelTask{id: m.taskID, reason: reason, reply: make(chan error, 1)})
			}
		}
		a.dispatch(ctx)
	case *preemptQuery:
		if ok, id := a.state.ShouldPreempt(m.taskID, m.llm); ok {
			m.reply <- id
		} else {
			m.reply <- ""
		}
	case *cancelTask:
		a.cancel(m)
	case *query:
		m.fn(a.state)
		close(m.done)
	case *checkpointNow:
		m.reply <- a.sys.saveCheckpoint(ownerScheduler, a.last, a.state.Snapshot())
	case *shutdownNow:
		a.stopping = true
		close(m.reply)
	}
}

func (a *schedulerActor) start(ctx actor.Context) {
	if st := a.sys.takeScheduler(); st != nil {
		a.state, a.last = st.state, st.last
	} else {
		// A restart after a panic: the state comes back from the WAL.
		st, err := a.sys.recoverScheduler()
		if err != nil {
			panic(fmt.Errorf("scheduler: recover after restart: %w", err))
		}
		a.state, a.last = st.state, st.last
		a.sys.logger.Warn().Str("event", "actors.scheduler.restarted").Uint64("seq", a.last).Msg("scheduler restarted from the WAL")
	}
	a.j = newJournal(a.sys.log, ownerScheduler, a.sys.root, ctx.Self())
	a.sys.scheduler.Store(a)
}

// current is the live scheduler instance. A continuation (journal then)
// runs in the actor's goroutine but may have been created by an instance
// that has since been restarted: it must read the current one's state.
func (a *schedulerActor) current() *schedulerActor { return a.sys.scheduler.Load() }

// forget archives finished tasks older than the retention period, then
// logs that they left memory (DESIGN.md §3: weeks of running must not grow
// the heap). The archive write runs off the actor; at most one at a time.
func (a *schedulerActor) forget(ctx actor.Context, now time.Time) {
	retention := a.sys.opts.FinishedRetention
	if retention <= 0 || a.forgetting || now.Sub(a.lastForget) < time.Minute {
		return
	}
	a.lastForget = now
	tasks, evs := a.state.DecideForget(now, retention, 5000)
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
	go func() {
		err := a.sys.log.Archive(context.Background(), items)
		a.sys.root.Send(self, &archived{events: evs, err: err})
	}()
}

func archiveKey(taskID string) string { return "task/" + taskID }

// completedKey is where a task archived at its completion lies: keys in
// completion order, so the archive grows at its end like the log (keyed
// by task id, the inserts were random and rewrote a leaf each, which cost
// 4x the throughput at 200k tasks).
func completedKey(t *pb.Task) string { return fmt.Sprintf("done/%020d/%s", t.CompletedAt, t.Id) }

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

// submit decides a task's submission and answers through respond, at
// once when refused, once durable when accepted.
func (a *schedulerActor) submit(m *pb.TaskSubmit, respond func(*pb.TaskSubmitReply)) {
	t := m.GetTask()
	if err := a.sys.checkTask(t); err != nil {
		respond(&pb.TaskSubmitReply{TaskId: t.GetId(), Reason: err.Error()})
		return
	}
	ev, err := a.state.DecideSubmit(t, a.sys.clock.Now())
	if err != nil {
		var se *scheduler.SubmitError
		dup := errors.As(err, &se) && se.Code == "duplicate"
		respond(&pb.TaskSubmitReply{TaskId: t.GetId(), Duplicate: dup, Reason: err.Error()})
		return
	}
	a.j.persist([]*pb.Event{ev}, func(_ []uint64, err error) {
		r := &pb.TaskSubmitReply{TaskId: t.GetId(), Accepted: err == nil}
		if err != nil {
			r.Reason = err.Error()
		}
		respond(r)
	})
}

func (a *schedulerActor) persistTaskEvents(m *taskEvents) {
	a.j.persistArchiving(m.events, a.archiveOnCompletion(m.taskID, m.events), func(seqs []uint64, err error) {
		m.reply <- taskEventsReply{seqs: seqs, err: err}
	})
}

// archiveOnCompletion: when events complete a task, the whole task as it
// will then be (conversation included) is written to the archive with
// them, and the completion says so: applying it, the scheduler keeps
// only what lists, counts and dedup need, and readers of the
// conversation take it from the archive (DESIGN.md §3: weeks of work
// must not grow the heap).
func (a *schedulerActor) archiveOnCompletion(id string, events []*pb.Event) *wal.ArchiveRecord {
	for i, ev := range events {
		done := ev.GetTaskCompleted()
		if done == nil {
			continue
		}
		t, ok := a.state.Task(id)
		if !ok {
			return nil
		}
		for _, prev := range events[:i+1] {
			if err := scheduler.ApplyToTask(t, prev, a.sys.opts.Scheduler.MessageLimit); err != nil {
				return nil // apply will refuse it too; nothing leaves memory
			}
		}
		data, err := proto.Marshal(t)
		if err != nil {
			return nil
		}
		done.Archived = true
		return &wal.ArchiveRecord{Key: completedKey(t), Value: data}
	}
	return nil
}

// dispatch picks as many tasks as there are free slots and asks the
// allocator for an LLM for each.
func (a *schedulerActor) dispatch(ctx actor.Context) {
	if a.stopping || !a.sys.acceptingWork() {
		return
	}
	budget := a.sys.opts.MaxRunning - int(a.sys.executors.Load()) - a.allocating
	slots := 0
	var free, deepFree []string
	for b, n := range a.free.slots {
		if n > 0 {
			slots += n
			if a.free.quota[b].normal {
				free = append(free, b)
			}
			if a.free.quota[b].deep {
				deepFree = append(deepFree, b)
			}
		}
	}
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
		ctx.Send(a.sys.allocatorPID, &allocate{task: t})
	}
}

func (a *schedulerActor) onAllocated(ctx actor.Context, m *allocated) {
	a.allocating--
	if m.llm == "" || a.stopping || !a.state.Picked(m.taskID) {
		// No LLM, shutting down, or cancelled while the allocator looked.
		if m.llm != "" {
			ctx.Send(a.sys.allocatorPID, &release{backend: m.llm})
		}
		if m.llm == "" && a.state.Picked(m.taskID) {
			a.deferred = append(a.deferred, m.taskID)
			a.dispatch(ctx)
			return
		}
		a.state.Unpick(m.taskID)
		return
	}
	ev := &pb.Event{At: nanos(a.sys.clock.Now()), Body: &pb.Event_TaskStarted{TaskStarted: &pb.TaskStarted{TaskId: m.taskID, Llm: m.llm}}}
	a.allocating++ // until the start is durable
	a.j.persist([]*pb.Event{ev}, func(_ []uint64, err error) {
		a.allocating-- // this instance's count; a restarted one starts at 0
		cur := a.current()
		if err != nil {
			a.sys.root.Send(a.sys.allocatorPID, &release{backend: m.llm})
			cur.state.Unpick(m.taskID)
			a.sys.logger.Error().Err(err).Str("task", m.taskID).Str("event", "actors.scheduler.start_failed").Msg("could not persist task start")
			return
		}
		t, ok := cur.state.Task(m.taskID)
		if !ok || t.State != pb.TaskState_TASK_STATE_RUNNING || t.LlmAssigned != m.llm {
			// Cannot happen while the start is applied before this runs;
			// never run an executor on a task in another state.
			a.sys.root.Send(a.sys.allocatorPID, &release{backend: m.llm})
			a.sys.logger.Error().Str("task", m.taskID).Str("event", "actors.scheduler.start_mismatch").Msg("task not running after its start")
			return
		}
		a.sys.executors.Add(1)
		a.sys.root.Send(a.sys.orchestratorPID, &startExecutor{task: t})
	})
}

func (a *schedulerActor) cancel(m *cancelTask) {
	ev, err := a.state.DecideCancel(m.id, m.reason, a.sys.clock.Now())
	if errors.Is(err, scheduler.ErrRunning) {
		// The executor owns a running task: it cancels and writes the event.
		if a.cancelling == nil {
			a.cancelling = map[string]string{}
		}
		a.cancelling[m.id] = m.reason
		a.sys.root.Send(a.sys.orchestratorPID, &cancelTask{id: m.id, reason: m.reason, reply: m.reply})
		return
	}
	if err != nil {
		m.reply <- err
		return
	}
	a.j.persist([]*pb.Event{ev}, func(_ []uint64, err error) {
		m.reply <- err
		if err != nil {
			return
		}
		// The module learns its task will not run (e.g. a review seat
		// becomes an abstention); nobody waits for its answer here.
		if t, ok := a.current().state.Task(m.id); ok {
			if pid, ok := a.sys.modulePIDs[t.Module]; ok {
				a.sys.root.Send(pid, &moduleEnd{task: t, failed: true, reason: "cancelled: " + m.reason, reply: make(chan error, 1)})
			}
		}
	})
}
