package actors

import (
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"fano/actors/allocator"
	"fano/pb"
)

// allocatorActor owns all quota and rate-limit state (the single source of
// truth, C6/C8) through an allocator.Book, and the request slots of every
// backend.
type allocatorActor struct {
	sys  *System
	book *allocator.Book
	j    *journal
	last uint64
	// announced is the condition last alerted per backend, so two tasks
	// meeting the same fault at once raise one alert.
	announced map[string]string
	// rechecked is when each backend was last re-checked and found ready
	// (see backendCondition.sent).
	rechecked map[string]time.Time
	ticking   bool // a tick's events are written but not yet applied
}

func (a *allocatorActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.start(ctx)
		a.publish(ctx)
	case *actor.Restarting, *actor.Stopping:
		if a.j != nil {
			a.j.close()
		}
	case *persisted:
		a.sys.applyPersisted(ownerAllocator, &a.last, m, a.book.Apply)
		a.publish(ctx)
	case *tick:
		// One tick's decisions at a time: until they are applied a later
		// tick would decide (and write) the same window resets again.
		if a.ticking {
			a.publish(ctx)
			return
		}
		if evs := a.book.DecideTick(timeOf(m.now)); len(evs) > 0 {
			a.ticking = true
			a.j.persist(evs, func([]uint64, error) { a.ticking = false })
		}
		a.publish(ctx)
	case *allocate:
		now := a.sys.clock.Now()
		llm, ok := a.book.Choose(m.task, a.book.Free(now), now)
		if ok && !a.book.Acquire(llm) {
			ok = false
		}
		if ok {
			a.sys.slots.add(llm, 1)
		}
		if !ok {
			llm = ""
		}
		ctx.Send(a.sys.schedulerPID, &allocated{taskID: m.task.GetId(), llm: llm})
		a.publish(ctx)
	case *release:
		if a.sys.slots.add(m.backend, -1) {
			a.book.Release(m.backend)
		}
		a.publish(ctx)
	case *useQuota:
		ev, err := a.book.DecideUse(m.backend, m.deep, m.taskID, a.sys.clock.Now())
		if err != nil {
			m.reply <- err
			return
		}
		a.j.persist([]*pb.Event{ev}, func(_ []uint64, err error) { m.reply <- err })
	case *rateLimited:
		rl := allocator.RateLimit{RetryAfter: m.err.RetryAfter, Until: m.err.Until, Cap: m.err.Cap, Reason: m.err.Reason}
		ev := a.book.DecideRateLimit(m.backend, rl, m.taskID, a.sys.clock.Now())
		until := timeOf(ev.GetRateLimitRecorded().GetUntil())
		a.sys.logRateLimit(m.backend, ev.GetRateLimitRecorded())
		a.j.persist([]*pb.Event{ev}, func(_ []uint64, _ error) {
			if m.reply != nil {
				m.reply <- until
			}
		})
	case *backendCondition:
		now := a.sys.clock.Now()
		if a.rechecked == nil {
			a.rechecked = map[string]time.Time{}
		}
		if !m.sent.IsZero() && m.sent.Before(a.rechecked[m.backend]) {
			if m.reply != nil {
				m.reply <- nil
			}
			return
		}
		if m.state == allocator.StateReady {
			a.rechecked[m.backend] = now
		}
		ev, err := a.book.DecideCondition(m.backend, m.state, m.reason, m.until, now)
		if err != nil || ev == nil {
			if m.reply != nil {
				m.reply <- err
			}
			return
		}
		if a.announced == nil {
			a.announced = map[string]string{}
		}
		a.sys.logCondition(m.backend, ev.GetBackendConditionRecorded(), a.announced[m.backend])
		a.announced[m.backend] = ev.GetBackendConditionRecorded().GetState()
		a.j.persist([]*pb.Event{ev}, func(_ []uint64, err error) {
			if m.reply != nil {
				m.reply <- err
			}
		})
	case *releaseQuota:
		ev, err := a.book.DecideRelease(m.backend, m.deep, m.taskID, a.sys.clock.Now())
		if err != nil {
			m.reply <- err
			return
		}
		a.j.persist([]*pb.Event{ev}, func(_ []uint64, err error) { m.reply <- err })
	case *rateLearned:
		if ev := a.book.DecideRateLearned(m.backend, m.limit, m.window, a.sys.clock.Now()); ev != nil {
			a.sys.logger.Info().Str("event", "actors.allocator.rate_learned").Str("backend", m.backend).
				Int("limit", m.limit).Dur("window", m.window).Msg("learned the provider's request rate")
			a.j.persist([]*pb.Event{ev}, nil)
		}
	case *backendPause:
		now := a.sys.clock.Now()
		var ev *pb.Event
		var err error
		if m.pause {
			ev, err = a.book.DecidePause(m.backend, m.reason, now)
		} else {
			ev, err = a.book.DecideResume(m.backend, now)
		}
		if err != nil {
			m.reply <- err
			return
		}
		a.j.persist([]*pb.Event{ev}, func(_ []uint64, err error) { m.reply <- err })
	case *query:
		m.fn(a.book)
		close(m.done)
	case *checkpointNow:
		m.reply <- a.sys.saveCheckpoint(ownerAllocator, a.last, a.book.Snapshot())
	}
}

type backendPause struct {
	backend, reason string
	pause           bool
	reply           chan error
}

func (a *allocatorActor) start(ctx actor.Context) {
	if st := a.sys.takeAllocator(); st != nil {
		a.book, a.last = st.book, st.last
	} else {
		st, err := a.sys.recoverAllocator()
		if err != nil {
			panic(fmt.Errorf("allocator: recover after restart: %w", err))
		}
		a.book, a.last = st.book, st.last
		// Slots are not in the WAL: take back exactly those the previous
		// instance held (see slotCounts), so a release sent to it and
		// handled here is neither lost nor counted twice.
		for llm, n := range a.sys.slots.snapshot() {
			for i := 0; i < n; i++ {
				a.book.Acquire(llm)
			}
		}
		a.sys.logger.Warn().Str("event", "actors.allocator.restarted").Uint64("seq", a.last).Msg("allocator restarted from the WAL")
	}
	a.j = newJournal(a.sys.log, ownerAllocator, a.sys.root, ctx.Self())
}

// publish tells the scheduler which backends can take work now.
func (a *allocatorActor) publish(ctx actor.Context) {
	now := a.sys.clock.Now()
	fs := &freeSlots{slots: map[string]int{}, quota: map[string]quotaView{}}
	for _, st := range a.book.Status(now) {
		fs.quota[st.Name] = quotaView{normal: a.book.CanUse(st.Name, false, now), deep: a.book.CanUse(st.Name, true, now)}
		if n := st.MaxConcurrency - st.InUse; n > 0 && (fs.quota[st.Name].normal || fs.quota[st.Name].deep) {
			fs.slots[st.Name] = n
		}
	}
	a.sys.setQuotaView(fs.quota)
	ctx.Send(a.sys.schedulerPID, fs)
}

// slotCounts mirrors the allocator's request slots outside the actor
// instance, so a restarted allocator takes back exactly the slots its
// predecessor held. Only the allocator actor changes it.
type slotCounts struct {
	mu    sync.Mutex
	inUse map[string]int
}

// add changes backend's count by delta; a release of a slot nobody holds
// reports false and changes nothing.
func (c *slotCounts) add(backend string, delta int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inUse == nil {
		c.inUse = map[string]int{}
	}
	if c.inUse[backend]+delta < 0 {
		return false
	}
	c.inUse[backend] += delta
	return true
}

func (c *slotCounts) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.inUse))
	for k, v := range c.inUse {
		out[k] = v
	}
	return out
}
