package actors

import (
	"fmt"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"fano/actors/allocator"
	"fano/pb"
)

// allocatorActor owns all quota and rate-limit state (the single source of
// truth, C6/C8) through an allocator.Book, and the request slots of every
// backend: nobody else counts them.
type allocatorActor struct {
	sys  *System
	book *allocator.Book
	// heir carries the slots in use from an instance that fails to the
	// one that replaces it (see start): slots are not in the WAL.
	heir *slotHeir
	j    *journal
	last uint64
	// announced is the condition last alerted per backend, so two tasks
	// meeting the same fault at once raise one alert.
	announced map[string]string
	// rechecked is when each backend was last re-checked and found ready
	// (see pb.BackendCondition.sent).
	rechecked map[string]time.Time
	ticking   bool // a tick's events are written but not yet applied
	// heldTick is the tick whose events were just applied: the scheduler
	// gets it after the quota view is rebuilt from them.
	heldTick *pb.Tick
	// published is the view last told the scheduler (see publish), views
	// the buffer the next one is found in.
	published, views []allocator.FreeView
	told             bool // published once
	desk             *desk
}

func (a *allocatorActor) Receive(ctx actor.Context) {
	if a.desk == nil {
		a.desk = a.sys.desks.desk(ownerAllocator)
	}
	g := &a.desk.guard
	g.Lock()
	defer g.Unlock()
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.start(ctx)
		a.publish(ctx)
	case *actor.Restarting:
		if a.j != nil {
			a.j.close()
		}
		if a.book != nil {
			a.heir.inUse = map[string]int{}
			for _, st := range a.book.Status(a.sys.clock.Now()) {
				a.heir.inUse[st.Name] = st.InUse
			}
		}
	case *actor.Stopping:
		if a.j != nil {
			a.j.close()
			a.sys.desks.applyLeft(ownerAllocator, &a.last, a.book.Apply)
		}
	case *pb.Persisted:
		a.sys.desks.applyPersisted(ownerAllocator, &a.last, m, a.book.Apply)
		a.publish(ctx)
		if a.heldTick != nil {
			ctx.Send(a.sys.schedulerPID, a.heldTick)
			a.heldTick = nil
		}
	case *pb.Tick:
		// One tick's decisions at a time: until they are applied a later
		// tick would decide (and write) the same window resets again.
		// The scheduler's tick reads the quota view this tick rebuilds, so
		// the allocator hands it on once the view is rebuilt: sent to both
		// at once, which saw which view was a matter of thread timing.
		if a.ticking {
			a.publish(ctx)
			ctx.Send(a.sys.schedulerPID, m)
			return
		}
		if evs := a.book.DecideTick(timeOf(m.Now)); len(evs) > 0 {
			a.ticking = true
			a.j.persist(evs, func([]uint64, error) {
				cur := a.sys.state.allocator.Load()
				cur.ticking, cur.heldTick = false, m // handed on once published (pb.Persisted)
			})
			return
		}
		a.publish(ctx)
		ctx.Send(a.sys.schedulerPID, m)
	case *pb.Allocate:
		if m.Release != "" {
			a.book.Release(m.Release) // the slot of a run that ended, handed on (schedulerActor.refill)
		}
		now := a.sys.clock.Now()
		a.sys.faults.holdPaced(a.book)
		llm, ok := a.book.Choose(m.Task, a.book.Free(now), now)
		if ok && !a.book.Acquire(llm) {
			ok = false
		}
		if ok {
			a.book.Grant(m.Task.GetId(), llm, m.Task.GetRequiresDeepMode(), now)
		}
		if !ok {
			llm = ""
		}
		ctx.Send(a.sys.schedulerPID, &pb.Allocated{TaskId: m.Task.GetId(), Llm: llm, Free: a.changedView()})
	case *pb.SlotPassed:
		a.book.Grant(m.TaskId, m.Backend, m.Deep, a.sys.clock.Now())
	case *pb.ReleaseSlot:
		a.book.Release(m.Backend) // one nobody holds is ignored
		a.publish(ctx)
	case *pb.UseQuota:
		ev, err := a.book.DecideUse(m.Backend, m.Deep, m.TaskId, a.sys.clock.Now())
		a.charge(ctx, ev, err)
	case *pb.RateLimited:
		rl := allocator.RateLimit{RetryAfter: time.Duration(m.RetryAfterNs), Until: timeOf(m.Until), Cap: m.Cap, Reason: m.Reason}
		ev := a.book.DecideRateLimit(m.Backend, rl, m.TaskId, a.sys.clock.Now())
		a.sys.faults.logRateLimit(m.Backend, ev.GetRateLimitRecorded())
		a.persistAndRespond(ctx, ev, nil)
	case *pb.BackendCondition:
		now := a.sys.clock.Now()
		if a.rechecked == nil {
			a.rechecked = map[string]time.Time{}
		}
		if m.Sent != 0 && timeOf(m.Sent).Before(a.rechecked[m.Backend]) {
			respond(ctx, &pb.Done{})
			return
		}
		if m.State == allocator.StateReady {
			a.rechecked[m.Backend] = now
		}
		ev, err := a.book.DecideCondition(m.Backend, m.State, m.Reason, timeOf(m.Until), now)
		if err != nil || ev == nil {
			respond(ctx, doneOf(err))
			return
		}
		if a.announced == nil {
			a.announced = map[string]string{}
		}
		a.sys.faults.logCondition(m.Backend, ev.GetBackendConditionRecorded(), a.announced[m.Backend])
		a.announced[m.Backend] = ev.GetBackendConditionRecorded().GetState()
		a.persistAndRespond(ctx, ev, nil)
	case *pb.ReleaseQuota:
		ev, err := a.book.DecideRelease(m.Backend, m.Deep, m.TaskId, a.sys.clock.Now())
		a.persistAndRespond(ctx, ev, err)
	case *pb.LearnRate:
		window := time.Duration(m.WindowNs)
		if ev := a.book.DecideRateLearned(m.Backend, int(m.Limit), window, a.sys.clock.Now()); ev != nil {
			a.sys.logger.Info().Str("event", "actors.allocator.rate_learned").Str("backend", m.Backend).
				Int32("limit", m.Limit).Dur("window", window).Msg("learned the provider's request rate")
			a.j.persist([]*pb.Event{ev}, nil)
		}
	case *pb.BackendPause:
		now := a.sys.clock.Now()
		var ev *pb.Event
		var err error
		if m.Pause {
			ev, err = a.book.DecidePause(m.Backend, m.Reason, now)
		} else {
			ev, err = a.book.DecideResume(m.Backend, now)
		}
		a.persistAndRespond(ctx, ev, err)
	case *pb.Barrier:
		respond(ctx, &pb.BarrierReply{})
	case *pb.Checkpoint:
		if !a.sys.checkpoints.due(ownerAllocator, a.last) {
			respond(ctx, doneOf(nil))
			return
		}
		respond(ctx, doneOf(a.sys.checkpoints.save(ownerAllocator, a.last, a.book.Snapshot())))
	}
}

// persistAndRespond persists a decided event and answers the sender with
// pb.Done once it is applied; a decision error is answered at once.
func (a *allocatorActor) persistAndRespond(ctx actor.Context, ev *pb.Event, err error) {
	if err != nil {
		respond(ctx, doneOf(err))
		return
	}
	a.j.persist([]*pb.Event{ev}, a.applied(ev, ctx.Sender()))
}

// applied is the continuation of a decided event's batch, in the actor
// once the event is applied or could not be written: it publishes the
// view, then answers sender.
func (a *allocatorActor) applied(ev *pb.Event, sender *actor.PID) func([]uint64, error) {
	return func(_ []uint64, err error) {
		cur := a.sys.state.allocator.Load()
		if err != nil && cur == a {
			// Never applied: the charge this book decided for it is no
			// longer in flight. (A restarted instance rebuilt its book from
			// the WAL and never counted it.)
			a.book.Abandon(ev)
		}
		// Published before the answer: the scheduler passes slots on by the
		// quota view (schedulerActor.refill), and a task that goes on from
		// this answer may end and free its slot before the publish that
		// follows the whole group of events.
		if fs := cur.changedView(); fs != nil {
			a.sys.root.Send(a.sys.schedulerPID, fs)
		}
		a.sys.asks.respondLater(sender, doneOf(err))
	}
}

// charge persists a decided quota charge and answers the sender with
// pb.Done once it is durable, before it is applied (see batch.durable):
// the request waits for this answer, and the view the scheduler passes
// slots on by (schedulerActor.refill) holds the charge from the decision
// on, as the book counts it in flight. A charge that could not be written
// is answered as persistAndRespond answers, once it is abandoned.
func (a *allocatorActor) charge(ctx actor.Context, ev *pb.Event, err error) {
	if err != nil {
		respond(ctx, doneOf(err))
		return
	}
	a.publish(ctx)
	sender := ctx.Sender()
	a.j.persistDurable([]*pb.Event{ev}, func(_ []uint64, err error) {
		if err == nil {
			a.sys.asks.respondLater(sender, &pb.Done{})
		}
	}, func(seqs []uint64, err error) {
		if err != nil {
			a.applied(ev, sender)(seqs, err) // made only then: a charge a task
		}
	})
}

func (a *allocatorActor) start(ctx actor.Context) {
	if st := a.sys.recovery.takeAllocator(); st != nil {
		a.book, a.last = st.book, st.last
	} else {
		st, err := a.sys.recovery.recoverAllocator()
		if err != nil {
			panic(fmt.Errorf("allocator: recover after restart: %w", err))
		}
		a.book, a.last = st.book, st.last
		// Slots are not in the WAL: take back exactly those the previous
		// instance held, so a release sent to it and handled here is
		// neither lost nor counted twice.
		for llm, n := range a.heir.inUse {
			for i := 0; i < n; i++ {
				a.book.Acquire(llm)
			}
		}
		a.heir.inUse = nil
		a.sys.logger.Warn().Str("event", "actors.allocator.restarted").Uint64("seq", a.last).Msg("allocator restarted from the WAL")
	}
	a.j = newJournal(a.sys, ownerAllocator, ctx.Self())
	a.sys.state.allocator.Store(a)
}

// publish tells the scheduler which backends can take work now, unless
// that is what it was told last: a quota charged or released seldom
// changes whether a backend can take work, and the scheduler would only
// look for work again (three views a task were sent, one of them always
// the same as the one before).
func (a *allocatorActor) publish(ctx actor.Context) {
	if fs := a.changedView(); fs != nil {
		ctx.Send(a.sys.schedulerPID, fs)
	}
}

// changedView is the free view to tell the scheduler, nil if it is the
// one told last (see publish).
func (a *allocatorActor) changedView() *pb.FreeSlots {
	a.sys.faults.holdPaced(a.book)
	views := a.book.AppendFreeViews(a.views[:0], a.sys.clock.Now())
	if a.told && slices.Equal(views, a.published) {
		a.views = views
		return nil
	}
	if !a.told || !sameQuota(views, a.published) {
		quota := make(map[string]*pb.BackendFree, len(views))
		for _, v := range views {
			quota[v.Name] = &pb.BackendFree{Normal: v.Normal, Deep: v.Deep}
		}
		a.sys.inputs.setQuotaView(quota)
	}
	fs := &pb.FreeSlots{Backends: map[string]*pb.BackendFree{}}
	for _, v := range views {
		if v.Slots > 0 && (v.Normal || v.Deep) {
			fs.Backends[v.Name] = &pb.BackendFree{Normal: v.Normal, Deep: v.Deep, Slots: int32(v.Slots)}
		}
	}
	a.views, a.published, a.told = a.published, views, true
	return fs
}

// sameQuota: the two views say the same of every backend's quota.
func sameQuota(x, y []allocator.FreeView) bool {
	return slices.EqualFunc(x, y, func(a, b allocator.FreeView) bool {
		return a.Name == b.Name && a.Normal == b.Normal && a.Deep == b.Deep
	})
}

// slotHeir is handed from one allocator instance to the next by the
// orchestrator's producer: the failing instance writes it while
// restarting, its successor reads it as it starts.
type slotHeir struct{ inUse map[string]int }
