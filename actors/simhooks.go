package actors

import (
	"context"
	"sync"
)

// waitKey marks the context of a task's LLM call with its system's set
// of waiting calls (see CallWaiting).
type waitKey struct{}

func withWaitCounter(ctx context.Context, w *waitingCalls) context.Context {
	return context.WithValue(ctx, waitKey{}, w)
}

// waitingCalls are the task calls that said they wait (CallWaiting), by
// their context. A call counts as waiting only while its context is not
// done: the moment a cancel or a deadline ends the wait, the call is busy
// again, before its goroutine has even run; a counter lowered by that
// goroutine left the clock free to move in between.
type waitingCalls struct {
	mu    sync.Mutex
	calls map[context.Context]int
	idle  *idleSignal // poked when a call begins to wait
}

func (w *waitingCalls) add(ctx context.Context, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.calls == nil {
		w.calls = map[context.Context]int{}
	}
	w.calls[ctx] += n
	if w.calls[ctx] <= 0 {
		delete(w.calls, ctx)
	}
	if n > 0 && w.idle != nil {
		w.idle.poke()
	}
}

// count is the number of waits whose context is still live.
func (w *waitingCalls) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for ctx, k := range w.calls {
		if ctx.Err() == nil {
			n += k
		}
	}
	return n
}

// CallWaiting is told by a simulated backend that the task call in ctx
// now waits on the clock or on ctx (true) or woke (false); calls that are
// not a task's (a health probe) are not counted. `fano simulate` moves
// its clock only while every running task's call waits so. A wait on the
// clock must end (false) inside the clock's own callback (an AfterFunc),
// not in the goroutine it wakes: see waitingCalls.
func CallWaiting(ctx context.Context, waiting bool) {
	w, ok := ctx.Value(waitKey{}).(*waitingCalls)
	if !ok {
		return
	}
	if waiting {
		w.add(ctx, 1)
	} else {
		w.add(ctx, -1)
	}
}

// idleSignal is poked whenever a piece of the system's work ends: an
// actor's mailbox drained, a task's call began to wait on the clock.
// `fano simulate` waits on it (Activity) for the system to go idle at an
// instant instead of polling; a poke is a hint to look, never a promise.
type idleSignal struct {
	once sync.Once
	ch   chan struct{}
}

func (s *idleSignal) channel() chan struct{} {
	s.once.Do(func() { s.ch = make(chan struct{}, 1) })
	return s.ch
}

func (s *idleSignal) poke() {
	select {
	case s.channel() <- struct{}{}:
	default:
	}
}

// SimHooks is what `fano simulate` reads of a running system to tell
// when it has nothing left to do at an instant of its virtual clock.
type SimHooks struct{ s *System }

// Simulation returns the system's hooks for `fano simulate`.
func (s *System) Simulation() SimHooks { return SimHooks{s} }

// Activity receives (at most one pending value) when a piece of the
// system's work has ended since the last receive: an actor handled all
// its messages, or a task's call began to wait on the clock. Whether the
// system is then idle is for the caller to check (QueuedMessages,
// WaitingCalls).
func (h SimHooks) Activity() <-chan struct{} { return h.s.mailboxes.idle.channel() }

// WaitingCalls is the number of running tasks that wait for something
// outside the system: a call blocked on the clock (see CallWaiting), or
// the storage gate held shut by a WAL write fault.
func (h SimHooks) WaitingCalls() int {
	return h.s.callsWaiting.count() + h.s.storageGate.held()
}

// held is the number of runs parked at the gate while it is shut: once it
// reopens they are busy again, before their goroutines run to unpark.
func (g *storageGate) held() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
		return 0
	default:
		return g.parked
	}
}

// QueuedMessages is the number of user messages waiting in (or being
// handled from) the mailboxes of the system's own actors: orchestrator,
// scheduler, allocator, module hosts and gateway hosts, not executors.
// `fano simulate` advances its virtual clock only when none wait. It reads
// the counters the mailbox middleware keeps (mailbox.go), so it sends no
// message and is cheap enough to call thousands of times a second.
func (h SimHooks) QueuedMessages() int {
	s := h.s
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
