package actors

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
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
	desk   *desk
	offers *moduleOffers
	// lastPropose throttles proposals after events to one per tick
	// interval: a module with thousands of open tasks rebuilds them all.
	lastPropose time.Time
	flows       moduleFlows // see moduleflow.go
	// ahead counts, per task, the batches of the module's events that
	// were answered once queued (ModuleAnswer.reply_when_queued) and are
	// not applied yet; waiting holds the NextAction asks for such a task,
	// answered once they are: the module decides on its applied state.
	ahead   map[string]int
	waiting map[string][]waitingNext
	// mailed counts the NextAction asks that came through the mailbox
	// (see nextActionNow), for tests.
	mailed atomic.Int64
}

// waitingNext is a NextAction ask held until the task's events apply.
type waitingNext struct {
	sender *actor.PID
	ask    *pb.NextAction
}

func (h *moduleHost) Receive(ctx actor.Context) {
	if h.desk == nil {
		h.desk = h.sys.desks.desk(moduleOwner(h.mod.Name()))
	}
	h.desk.guard.Lock()
	defer h.desk.guard.Unlock()
	switch m := ctx.Message().(type) {
	case *actor.Started:
		h.start(ctx)
	case *actor.Restarting:
		h.sys.moduleHosts[h.mod.Name()].CompareAndSwap(h, nil)
		if h.j != nil {
			h.j.close() // the next instance takes what it delivered
		}
	case *actor.Stopping:
		h.sys.moduleHosts[h.mod.Name()].CompareAndSwap(h, nil)
		if h.j != nil {
			h.j.close()
			h.sys.desks.applyLeft(h.owner, &h.last, h.apply)
		}
	case *pb.Persisted:
		applied := h.sys.desks.applyPersisted(h.owner, &h.last, m, h.apply)
		if err := h.sys.recovery.writeExports(h.mod, exportsOf(h.mod, applied)); err != nil {
			h.sys.logger.Error().Err(err).Str("event", "actors."+h.owner+".export_failed").Msg("output file not written; recovery will write it")
		}
		if bl, ok := h.mod.(modules.Backlogger); ok {
			h.sys.inputs.backlogs.Store(h.mod.Name(), bl.Backlog())
		}
		h.sendOutbox(ctx, applied)
		if h.sys.clock.Since(h.lastPropose) >= h.sys.opts.TickInterval {
			h.propose(ctx)
		}
	case *pb.Tick:
		h.propose(ctx)
		h.resendOverdue(ctx)
	case *pb.SendOutbox:
		h.sendOutbox(ctx, nil)
	case *pb.ModuleMessage:
		h.receive(ctx, m)
	case *pb.ModuleMessageAck:
		h.acknowledged(m)
	case *pb.TaskSubmitBatchReply:
		for _, r := range m.Replies {
			if !r.Accepted && !r.Duplicate {
				h.offers.forget(r.TaskId) // refused for now (queue full): offer again later
			}
		}
	case *pb.NextAction:
		h.mailed.Add(1)
		if h.ahead[m.Task.GetId()] > 0 {
			h.waiting[m.Task.Id] = append(h.waiting[m.Task.Id], waitingNext{ctx.Sender(), m})
			return
		}
		h.nextAction(ctx.Sender(), m)
	case *pb.ModuleAnswer:
		if ut, ok := h.mod.(modules.UsageTaker); ok && m.Response != nil {
			ut.TakeUsage(m.Task.GetId(), modules.Usage{PromptTokens: m.Response.PromptTokens, CompletionTokens: m.Response.CompletionTokens})
		}
		if m.EndIfDone {
			h.answerEnding(ctx.Sender(), m)
			return
		}
		evs, err := h.mod.DecideResponse(m.Task, m.Answer, h.sys.clock.Now())
		if m.ReplyWhenQueued && err == nil && len(evs) > 0 {
			h.persistAhead(ctx, m.Task.GetId(), evs)
			return
		}
		h.persist(ctx, evs, err)
	case *pb.ModuleEnd:
		now := h.sys.clock.Now()
		var evs []*pb.ModuleEvent
		var err error
		if m.Failed {
			evs, err = h.mod.DecideFailure(m.Task, m.Reason, now)
		} else {
			evs, err = h.mod.DecideCompletion(m.Task, now)
		}
		id := m.Task.GetId()
		if err != nil || len(evs) == 0 {
			if err == nil {
				h.offers.forget(id)
			}
			respond(ctx, doneOf(err))
			return
		}
		sender := ctx.Sender()
		if m.ReplyWhenQueued {
			h.j.persistQueued(h.events(evs), nil, func(err error) { h.sys.asks.respondLater(sender, doneOf(err)) }, h.ended(id))
			return
		}
		h.j.persist(h.events(evs), func(seqs []uint64, err error) {
			h.ended(id)(seqs, err)
			h.sys.asks.respondLater(sender, doneOf(err))
		})
	case *pb.ModuleCommand:
		h.command(ctx, m)
	case *pb.ModuleQuery:
		respond(ctx, modules.View(h.mod, m))
	case *pb.Barrier:
		if m.Applied {
			// Behind every batch queued before: the journal delivers in
			// order, and an empty batch waits for no write.
			sender := ctx.Sender()
			h.j.persist(nil, func([]uint64, error) { h.sys.asks.respondLater(sender, &pb.BarrierReply{}) })
			return
		}
		respond(ctx, &pb.BarrierReply{})
	case *pb.Checkpoint:
		if !h.sys.checkpoints.due(h.owner, h.last) {
			respond(ctx, doneOf(nil))
			return
		}
		data, err := h.mod.Snapshot()
		if err != nil {
			respond(ctx, doneOf(fmt.Errorf("%s: snapshot: %w", h.owner, err)))
			return
		}
		respond(ctx, doneOf(h.sys.checkpoints.saveBytes(h.owner, h.last, data)))
	}
}

func (h *moduleHost) start(ctx actor.Context) {
	h.owner = moduleOwner(h.mod.Name())
	h.offers.reset()
	h.ahead, h.waiting = map[string]int{}, map[string][]waitingNext{}
	restarted := false
	if last, ok := h.sys.recovery.takeModule(h.mod.Name()); ok {
		h.last = last
	} else {
		restarted = true
		last, err := h.sys.recovery.recoverModule(h.mod)
		if err != nil {
			panic(fmt.Errorf("%s: recover after restart: %w", h.owner, err))
		}
		h.last = last
	}
	h.j = newJournal(h.sys, h.owner, ctx.Self())
	h.startFlows(ctx, restarted)
	h.propose(ctx)
	h.sys.moduleHosts[h.mod.Name()].Store(h) // executors may ask it in place
}

func (h *moduleHost) apply(e *pb.Event) error {
	me := e.GetModuleEvent()
	if me == nil {
		return fmt.Errorf("%s: not a module event: %s", h.owner, eventType(e))
	}
	return h.mod.Apply(me, timeOf(e.At))
}

// persist writes a decision's events and answers the sender once they are
// applied. A decision error (e.g. a *modules.ValidationError) is answered
// at once, with nothing written.
func (h *moduleHost) persist(ctx actor.Context, evs []*pb.ModuleEvent, err error) {
	if err != nil || len(evs) == 0 {
		respond(ctx, doneOf(err))
		return
	}
	sender := ctx.Sender()
	h.persistEvents(evs, func(err error) { h.sys.asks.respondLater(sender, doneOf(err)) })
}

// persistAhead writes the module's events for an answer and answers the
// sender once they are queued in the WAL: the sender's next write, queued
// after, can never be durable without them. Until they are applied, a
// NextAction for the task waits (see waiting).
func (h *moduleHost) persistAhead(ctx actor.Context, id string, evs []*pb.ModuleEvent) {
	sender := ctx.Sender()
	h.ahead[id]++
	h.j.persistQueued(h.events(evs), nil, func(err error) { h.sys.asks.respondLater(sender, doneOf(err)) }, h.settled(id))
}

// settled is the callback of a batch counted in ahead: once it is applied
// (written or not, the state the module decides on is final then), the
// NextActions waiting for the task are answered.
func (h *moduleHost) settled(id string) func([]uint64, error) {
	return func(_ []uint64, _ error) {
		if h.ahead[id]--; h.ahead[id] > 0 {
			return
		}
		delete(h.ahead, id)
		for _, w := range h.waiting[id] {
			h.nextAction(w.sender, w.ask)
		}
		delete(h.waiting, id)
	}
}

// answerEnding decides an answer asked with end_if_done and answers with
// a NextActionReply once its events are queued. A module that knows the
// answer ends the task (modules.AnswerEnder) has its completion written
// in the same batch: the reply says ended, and the executor completes
// the task without a NextAction, which would wait for the answer's
// events to be applied (persistAhead).
func (h *moduleHost) answerEnding(sender *actor.PID, m *pb.ModuleAnswer) {
	now := h.sys.clock.Now()
	var evs, end []*pb.ModuleEvent
	var ends bool
	var err error
	if ae, ok := h.mod.(modules.AnswerEnder); ok {
		evs, ends, end, err = ae.DecideResponseEnd(m.Task, m.Answer, now)
	} else {
		evs, err = h.mod.DecideResponse(m.Task, m.Answer, now)
	}
	id := m.Task.GetId()
	r := &pb.NextActionReply{Task: m.Task}
	switch {
	case err != nil:
		r.Error = errorToWire(err)
		h.sys.asks.respondLater(sender, r)
	case ends:
		r.Ended = true
		all := append(slices.Clip(evs), end...)
		if len(all) == 0 {
			h.offers.forget(id)
			h.sys.asks.respondLater(sender, r)
			return
		}
		h.j.persistQueued(h.events(all), nil, func(err error) {
			r.EndError = errorToWire(err)
			h.sys.asks.respondLater(sender, r)
		}, h.ended(id))
	case len(evs) == 0:
		h.sys.asks.respondLater(sender, r)
	default:
		h.ahead[id]++
		h.j.persistQueued(h.events(evs), nil, func(err error) {
			r.Error = errorToWire(err)
			h.sys.asks.respondLater(sender, r)
		}, h.settled(id))
	}
}

// nextAction answers sender what the task does next. A task that is done
// is ended too if the ask says so: the module decides its completion and
// the answer waits until those events are queued in the WAL, as a
// ModuleEnd's with reply_when_queued.
func (h *moduleHost) nextAction(sender *actor.PID, m *pb.NextAction) {
	r := actionToWire(h.mod.NextAction(m.Task))
	if !m.EndIfDone || r.Error != nil || modules.ActionKind(r.Kind) != modules.ActionDone {
		h.sys.asks.respondLater(sender, r)
		return
	}
	r.Ended = true
	evs, err := h.mod.DecideCompletion(m.Task, h.sys.clock.Now())
	if err != nil || len(evs) == 0 {
		r.EndError = errorToWire(err)
		h.sys.asks.respondLater(sender, r)
		return
	}
	h.j.persistQueued(h.events(evs), nil, func(err error) {
		r.EndError = errorToWire(err)
		h.sys.asks.respondLater(sender, r)
	}, h.ended(m.Task.GetId()))
}

// nextActionNow is what the task does next, decided by the module in the
// asking executor's goroutine, under the host's guard (as its Receive
// decides): an ask through the mailbox woke the host's goroutine and then
// the executor's again, for a decision that reads the module's state and
// writes nothing. now is false, and the executor asks through the mailbox
// (nextAction), where the mailbox does more than answer: when the host is
// not running (h nil), when the task's module events answered once queued
// are not applied yet (the ask waits for them there), and when the task
// is done (the module ends it in the same ask, writing its events).
func (h *moduleHost) nextActionNow(t *pb.Task) (r *pb.NextActionReply, now bool) {
	if h == nil {
		return nil, false
	}
	g := &h.desk.guard
	g.Lock()
	defer g.Unlock()
	if h.sys.moduleHosts[h.mod.Name()].Load() != h || h.ahead[t.GetId()] > 0 {
		return nil, false // stopped or restarted meanwhile; or events to wait for
	}
	r = actionToWire(h.mod.NextAction(t))
	if r.Error == nil && modules.ActionKind(r.Kind) == modules.ActionDone {
		return nil, false
	}
	return r, true
}

// ended is the callback for a task's end events: once they are applied,
// the module no longer proposes the task, and its offer leaves. (Left
// earlier, a proposal in between would offer the task again.)
func (h *moduleHost) ended(id string) func([]uint64, error) {
	return func(_ []uint64, err error) {
		if err == nil {
			h.offers.forget(id)
		}
	}
}

// command has the module decide a command's events on its current state,
// persists and applies them, and answers with their types. A refusal
// (bad input, or a command the module does not take) is answered at
// once, with nothing written.
func (h *moduleHost) command(ctx actor.Context, cmd *pb.ModuleCommand) {
	evs, result, err := modules.DecideCommand(h.mod, cmd, h.sys.clock.Now())
	reply := &pb.ModuleCommandReply{Result: result}
	if err != nil {
		reply.Refused, reply.Unsupported = err.Error(), errors.Is(err, modules.ErrUnsupportedCommand)
		respond(ctx, reply)
		return
	}
	if len(evs) == 0 {
		respond(ctx, reply)
		return
	}
	for _, e := range evs {
		reply.EventTypes = append(reply.EventTypes, e.GetType())
	}
	sender := ctx.Sender()
	h.persistEvents(evs, func(err error) {
		reply.Error = errorToWire(err)
		h.sys.asks.respondLater(sender, reply)
	})
}

// propose submits the tasks the module wants that it has not offered
// yet, all in one batch: one message and one durable write per round.
func (h *moduleHost) propose(ctx actor.Context) {
	if !h.sys.Accepting() {
		return
	}
	h.lastPropose = h.sys.clock.Now()
	var fresh []*pb.Task
	for _, t := range h.mod.Propose(h.lastPropose) {
		if h.offers.offer(t.Id) {
			fresh = append(fresh, t)
		}
	}
	if len(fresh) > 0 {
		ctx.Request(h.sys.schedulerPID, &pb.TaskSubmitBatch{Tasks: fresh})
	}
}

// moduleOffers is the set of task ids a module host has submitted and
// whose tasks have not ended (nor been refused): a module proposes a task
// until it ends, and an offered id is not submitted again. An id leaves
// once its task's end is applied, so over weeks the set holds the open
// tasks, not every task ever proposed. Used only on the host's goroutine;
// a restarted host starts it empty.
type moduleOffers struct{ ids map[string]struct{} }

func (o *moduleOffers) reset() { o.ids = map[string]struct{}{} }

// offer marks id offered; false if it already was.
func (o *moduleOffers) offer(id string) bool {
	if _, ok := o.ids[id]; ok {
		return false
	}
	o.ids[id] = struct{}{}
	return true
}

func (o *moduleOffers) forget(id string) { delete(o.ids, id) }

func (o *moduleOffers) len() int { return len(o.ids) }
