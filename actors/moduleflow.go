package actors

import (
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"fano/modules"
	"fano/pb"
)

// Flows between modules (pb/flows.proto). A sending module's host sends
// the messages its module's outbox lists once the events implying them
// are durable; the receiving module's host decides, persists and applies
// its own events for a message, on the system's clock, and acknowledges
// it only then; the sender records the acknowledgment as an event of its
// own, which takes the message out of its outbox. What is in flight here
// is transient: after a restart the outbox, derived from the sender's
// state, says what to send again, and the receiver's idempotent receipt
// (by message id) makes a resend harmless.

// resendAfter is how long a sent message waits for its acknowledgment
// before it is sent again (the receiver's host may have restarted, or its
// storage failed).
const resendAfter = time.Minute

// moduleFlows is a module host's transient view of its flows.
type moduleFlows struct {
	outgoing  map[string]*outgoing // message id -> sent, not yet acknowledged
	receiving map[string]bool      // message ids whose receipt is being persisted
}

type outgoing struct {
	msg    *pb.ModuleMessage
	sentAt time.Time
	acking bool // the acknowledgment's events are being persisted
}

// startFlows resets the transient view. At the system's start the outbox
// waits for SendOutbox (sent once every host exists, so no message goes
// to a host not yet spawned); a host restarted by its supervisor sends at
// once.
func (h *moduleHost) startFlows(ctx actor.Context, restarted bool) {
	h.flows = moduleFlows{outgoing: map[string]*outgoing{}, receiving: map[string]bool{}}
	if restarted {
		h.sendOutbox(ctx, nil)
	}
}

// sendOutbox sends what applying events implied (events nil: the whole
// outbox).
func (h *moduleHost) sendOutbox(ctx actor.Context, events []*pb.Event) {
	s, ok := h.mod.(modules.Sender)
	if !ok {
		return
	}
	if events == nil {
		h.send(ctx, s.Outbox(nil))
		return
	}
	for _, e := range events {
		if me := e.GetModuleEvent(); me != nil {
			h.send(ctx, s.Outbox(me))
		}
	}
}

// send sends each message not already on its way. A message to a module
// that is not configured is not sent: it stays in the outbox.
func (h *moduleHost) send(ctx actor.Context, msgs []*pb.ModuleMessage) {
	for _, msg := range msgs {
		if _, inFlight := h.flows.outgoing[msg.Id]; inFlight {
			continue
		}
		pid, ok := h.sys.modulePIDs[msg.To]
		if !ok {
			continue
		}
		msg.From = h.mod.Name()
		h.flows.outgoing[msg.Id] = &outgoing{msg: msg, sentAt: h.sys.clock.Now()}
		ctx.Send(pid, msg)
	}
}

// resendOverdue sends again the messages unacknowledged for resendAfter.
func (h *moduleHost) resendOverdue(ctx actor.Context) {
	now := h.sys.clock.Now()
	var overdue []string
	for id, o := range h.flows.outgoing {
		if !o.acking && now.Sub(o.sentAt) >= resendAfter {
			overdue = append(overdue, id)
		}
	}
	slices.Sort(overdue)
	for _, id := range overdue {
		o := h.flows.outgoing[id]
		if pid, ok := h.sys.modulePIDs[o.msg.To]; ok {
			o.sentAt = now
			ctx.Send(pid, o.msg)
		}
	}
}

// acknowledged records a receiver's answer as the sender's events.
func (h *moduleHost) acknowledged(ack *pb.ModuleMessageAck) {
	o := h.flows.outgoing[ack.Id]
	if o != nil && o.acking {
		return // an answer to a resend; the first is being recorded
	}
	switch ack.Outcome {
	case pb.DeliveryOutcome_DELIVERY_OUTCOME_TAKEN:
	case pb.DeliveryOutcome_DELIVERY_OUTCOME_REFUSED:
		h.sys.logger.Warn().Str("event", "actors."+h.owner+".message_refused").Str("flow_message", ack.Id).Str("by", ack.From).
			Str("reason", ack.Reason).Msg("a module refused a message for good; recorded as handled")
	default: // RETRY: sent again when overdue
		h.sys.logger.Warn().Str("event", "actors."+h.owner+".message_not_taken").Str("flow_message", ack.Id).Str("by", ack.From).
			Str("reason", ack.Reason).Msg("a module could not take a message now; it is sent again later")
		return
	}
	s, ok := h.mod.(modules.Sender)
	if !ok {
		return
	}
	evs, err := s.DecideAcknowledged(ack, h.sys.clock.Now())
	if err != nil || len(evs) == 0 {
		if err != nil {
			h.sys.logger.Error().Err(err).Str("event", "actors."+h.owner+".ack_failed").Str("flow_message", ack.Id).Msg("acknowledgment not recorded")
		}
		delete(h.flows.outgoing, ack.Id)
		return
	}
	if o == nil { // sent before this host restarted
		o = &outgoing{sentAt: h.sys.clock.Now()}
		h.flows.outgoing[ack.Id] = o
	}
	o.acking = true
	h.persistEvents(evs, func(err error) {
		if err != nil {
			// Still in the outbox: sent again when overdue, and the
			// receiver acknowledges again.
			o.acking = false
			h.sys.logger.Error().Err(err).Str("event", "actors."+h.owner+".ack_failed").Str("flow_message", ack.Id).Msg("acknowledgment not recorded")
			if o.msg == nil {
				delete(h.flows.outgoing, ack.Id)
			}
			return
		}
		delete(h.flows.outgoing, ack.Id)
	})
}

// receive has the module decide its events for a message, persists them
// and acknowledges the message once they are applied.
func (h *moduleHost) receive(ctx actor.Context, msg *pb.ModuleMessage) {
	if h.flows.receiving[msg.Id] {
		return // a resend; the receipt in progress answers
	}
	answer := func(outcome pb.DeliveryOutcome, reason string) {
		if pid, ok := h.sys.modulePIDs[msg.From]; ok {
			ctx.Send(pid, &pb.ModuleMessageAck{Id: msg.Id, From: h.mod.Name(), To: msg.From, Outcome: outcome, Reason: reason})
		}
	}
	r, ok := h.mod.(modules.Receiver)
	if !ok {
		h.sys.logger.Error().Str("event", "actors."+h.owner+".message_refused").Str("flow_message", msg.Id).Str("from", msg.From).
			Msg("a message to a module that takes none")
		answer(pb.DeliveryOutcome_DELIVERY_OUTCOME_REFUSED, "module "+h.mod.Name()+" takes no messages")
		return
	}
	evs, err := r.DecideReceive(msg, h.sys.clock.Now())
	if err != nil {
		h.sys.logger.Warn().Err(err).Str("event", "actors."+h.owner+".message_refused").Str("flow_message", msg.Id).Str("from", msg.From).
			Msg("message refused")
		answer(pb.DeliveryOutcome_DELIVERY_OUTCOME_REFUSED, err.Error())
		return
	}
	if len(evs) == 0 { // taken before
		answer(pb.DeliveryOutcome_DELIVERY_OUTCOME_TAKEN, "")
		return
	}
	h.flows.receiving[msg.Id] = true
	h.persistEvents(evs, func(err error) {
		delete(h.flows.receiving, msg.Id)
		if err != nil {
			answer(pb.DeliveryOutcome_DELIVERY_OUTCOME_RETRY, err.Error())
			return
		}
		h.sys.logger.Info().Str("event", "actors."+h.owner+".message_taken").Str("flow_message", msg.Id).Str("from", msg.From).Msg("message taken")
		answer(pb.DeliveryOutcome_DELIVERY_OUTCOME_TAKEN, "")
	})
}

// persistEvents writes a decision's events under the module's owner; then
// runs in the host once they are applied (or with the error, nothing
// applied).
func (h *moduleHost) persistEvents(evs []*pb.ModuleEvent, then func(error)) {
	h.j.persist(h.events(evs), func(_ []uint64, err error) { then(err) })
}

// events wraps a decision's module events as WAL events of this module,
// stamped now.
func (h *moduleHost) events(evs []*pb.ModuleEvent) []*pb.Event {
	at := nanos(h.sys.clock.Now())
	events := make([]*pb.Event, len(evs))
	for i, me := range evs {
		me.Module = h.mod.Name()
		events[i] = &pb.Event{At: at, Body: &pb.Event_ModuleEvent{ModuleEvent: me}}
	}
	return events
}
