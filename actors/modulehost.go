package actors

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"fano/modules"
	"fano/pb"
)

// moduleHost owns one module's domain state. It asks the module to decide
// events, persists them under the owner "module/<name>", then applies
// them; it submits the tasks the module proposes.
type moduleHost struct {
	sys    *System
	mod    modules.Module
	owner  string
	j      *journal
	last   uint64
	offers map[string]bool // task ids proposed and not refused (transient)
	// lastPropose throttles proposals after events to one per tick
	// interval: a module with thousands of open tasks rebuilds them all.
	lastPropose time.Time
	flows       moduleFlows // see moduleflow.go
}

func (h *moduleHost) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		h.start(ctx)
	case *actor.Restarting, *actor.Stopping:
		if h.j != nil {
			h.j.close()
		}
	case *persisted:
		h.sys.applyPersisted(h.owner, &h.last, m, h.apply)
		var applied []*pb.Event
		for _, b := range m.batches {
			if b.err == nil {
				applied = append(applied, b.events...)
			}
		}
		if err := h.sys.writeExports(h.mod, exportsOf(h.mod, applied)); err != nil {
			h.sys.logger.Error().Err(err).Str("event", "actors."+h.owner+".export_failed").Msg("output file not written; recovery will write it")
		}
		if bl, ok := h.mod.(modules.Backlogger); ok {
			h.sys.backlogs.Store(h.mod.Name(), bl.Backlog())
		}
		h.sendOutbox(ctx, applied)
		if h.sys.clock.Since(h.lastPropose) >= h.sys.opts.TickInterval {
			h.propose(ctx)
		}
	case *tick:
		h.propose(ctx)
		h.resendOverdue(ctx)
	case *pb.SendOutbox:
		h.sendOutbox(ctx, nil)
	case *pb.ModuleMessage:
		h.receive(ctx, m)
	case *pb.ModuleMessageAck:
		h.acknowledged(m)
	case *pb.TaskSubmitReply:
		if !m.Accepted && !m.Duplicate {
			delete(h.offers, m.TaskId) // refused for now (queue full): offer again later
		}
	case *nextAction:
		act, err := h.mod.NextAction(m.task)
		m.reply <- actionReply{action: act, err: err}
	case *moduleAnswer:
		evs, err := h.mod.DecideResponse(m.task, m.answer, h.sys.clock.Now())
		h.persist(evs, err, m.reply)
	case *moduleEnd:
		now := h.sys.clock.Now()
		var evs []*pb.ModuleEvent
		var err error
		if m.failed {
			evs, err = h.mod.DecideFailure(m.task, m.reason, now)
		} else {
			evs, err = h.mod.DecideCompletion(m.task, now)
		}
		h.persist(evs, err, m.reply)
	case *moduleCommand:
		evs, err := m.decide(h.mod)
		h.persist(evs, err, m.reply)
	case *query:
		m.fn(h.mod)
		close(m.done)
	case *checkpointNow:
		data, err := h.mod.Snapshot()
		if err != nil {
			m.reply <- fmt.Errorf("%s: snapshot: %w", h.owner, err)
			return
		}
		m.reply <- h.sys.saveCheckpointBytes(h.owner, h.last, data)
	}
}

func (h *moduleHost) start(ctx actor.Context) {
	h.owner = moduleOwner(h.mod.Name())
	h.offers = map[string]bool{}
	restarted := false
	if last, ok := h.sys.takeModule(h.mod.Name()); ok {
		h.last = last
	} else {
		restarted = true
		last, err := h.sys.recoverModule(h.mod)
		if err != nil {
			panic(fmt.Errorf("%s: recover after restart: %w", h.owner, err))
		}
		h.last = last
	}
	h.j = newJournal(h.sys.log, h.owner, h.sys.root, ctx.Self())
	h.startFlows(ctx, restarted)
	h.propose(ctx)
}

func (h *moduleHost) apply(e *pb.Event) error {
	me := e.GetModuleEvent()
	if me == nil {
		return fmt.Errorf("%s: not a module event: %s", h.owner, eventType(e))
	}
	return h.mod.Apply(me, timeOf(e.At))
}

// persist writes a decision's events and answers reply once they are
// applied. A decision error (e.g. a *modules.ValidationError) is answered
// at once, with nothing written.
func (h *moduleHost) persist(evs []*pb.ModuleEvent, err error, reply chan error) {
	if err != nil || len(evs) == 0 {
		reply <- err
		return
	}
	at := nanos(h.sys.clock.Now())
	events := make([]*pb.Event, len(evs))
	for i, me := range evs {
		me.Module = h.mod.Name()
		events[i] = &pb.Event{At: at, Body: &pb.Event_ModuleEvent{ModuleEvent: me}}
	}
	h.j.persist(events, func(_ []uint64, err error) { reply <- err })
}

// propose submits the tasks the module wants that it has not offered yet.
func (h *moduleHost) propose(ctx actor.Context) {
	if !h.sys.acceptingWork() {
		return
	}
	h.lastPropose = h.sys.clock.Now()
	for _, t := range h.mod.Propose(h.lastPropose) {
		if h.offers[t.Id] {
			continue
		}
		h.offers[t.Id] = true
		ctx.Request(h.sys.schedulerPID, &pb.TaskSubmit{Task: t})
	}
}
