package actors

import (
	"fmt"

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
		if evs := a.book.DecideTick(timeOf(m.now)); len(evs) > 0 {
			a.j.persist(evs, nil)
		}
		a.publish(ctx)
	case *allocate:
		now := a.sys.clock.Now()
		llm, ok := a.book.Choose(m.task, a.book.Free(now), now)
		if ok && !a.book.Acquire(llm) {
			ok = false
		}
		if !ok {
			llm = ""
		}
		ctx.Send(a.sys.schedulerPID, &allocated{taskID: m.task.GetId(), llm: llm})
		a.publish(ctx)
	case *release:
		a.book.Release(m.backend)
		a.publish(ctx)
	case *useQuota:
		ev, err := a.book.DecideUse(m.backend, m.deep, m.taskID, a.sys.clock.Now())
		if err != nil {
			m.reply <- err
			return
		}
		a.j.persist([]*pb.Event{ev}, func(_ []uint64, err error) { m.reply <- err })
	case *rateLimited:
		ev := a.book.DecideRateLimit(m.backend, m.err.RetryAfter, m.taskID, a.sys.clock.Now())
		a.j.persist([]*pb.Event{ev}, nil)
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
		// Slots of calls still running are not in the WAL: take them again.
		for _, llm := range a.sys.runningLLMs() {
			a.book.Acquire(llm)
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
