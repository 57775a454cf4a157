package actors

import (
	"context"
	"sync/atomic"
)

// waitKey marks the context of a task's LLM call with the counter of its
// system's waiting calls (see CallWaiting).
type waitKey struct{}

func withWaitCounter(ctx context.Context, n *atomic.Int64) context.Context {
	return context.WithValue(ctx, waitKey{}, n)
}

// CallWaiting is told by a simulated backend that the task call in ctx
// now waits on the clock or on ctx (true) or woke (false); calls that are
// not a task's (a health probe) are not counted. `fano simulate` moves
// its clock only while every running task's call waits so.
func CallWaiting(ctx context.Context, waiting bool) {
	n, ok := ctx.Value(waitKey{}).(*atomic.Int64)
	if !ok {
		return
	}
	if waiting {
		n.Add(1)
	} else {
		n.Add(-1)
	}
}

// WaitingCalls is the number of running tasks that wait for something
// outside the system: a call blocked on the clock (see CallWaiting), or
// the storage gate held shut by a WAL write fault.
func (s *System) WaitingCalls() int {
	parked, _ := s.storageGate.waiting()
	return int(s.callsWaiting.Load()) + parked
}

// QueuedMessages is the number of user messages waiting in (or being
// handled from) the mailboxes of the system's own actors: orchestrator,
// scheduler, allocator, module hosts and gateway hosts, not executors.
// `fano simulate` advances its virtual clock only when none wait. It reads
// the counters the mailbox middleware keeps (mailbox.go), so it sends no
// message and is cheap enough to call thousands of times a second.
func (s *System) QueuedMessages() int {
	select {
	case <-s.dead:
		return 0
	default:
	}
	// Work handed off the actors (a WAL append, an archive write) comes
	// back as a message: it counts as waiting from the moment it leaves.
	n := int(s.offActor.Load())
	n += s.mailboxes.queued(s.orchestratorPID.GetId()) + s.mailboxes.queued(s.schedulerPID.GetId()) + s.mailboxes.queued(s.allocatorPID.GetId())
	for _, pid := range s.modulePIDs {
		n += s.mailboxes.queued(pid.GetId())
	}
	for _, pid := range s.gatewayPIDs {
		n += s.mailboxes.queued(pid.GetId())
	}
	return n
}
