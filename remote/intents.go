package remote

import (
	"sync"
	"time"

	"fano/pb"
)

// intentKey names one request of one orchestrator's WAL: the ledger (the
// orchestrator's WAL) and the intent's sequence, or, for a request that
// has no intent, the orchestrator's own number for it.
type intentKey struct {
	ledger string
	intent uint64
	call   uint64
}

func keyOf(m *pb.RemoteCall) intentKey {
	if m.Intent != 0 {
		return intentKey{ledger: m.Ledger, intent: m.Intent}
	}
	return intentKey{ledger: m.Ledger, call: m.Call}
}

// intentBook is a host's memory of the intents it was asked: the running
// ones with who waits for them, and the outcome of each finished one for
// a while, so a repeated intent (its message or its answer was lost on
// the way) is answered from what the host did and never asked again.
// Safe for concurrent use.
type intentBook struct {
	mu      sync.Mutex
	keep    time.Duration
	max     int
	entries map[intentKey]*intentEntry
	order   []intentKey // finished, oldest first
}

type intentEntry struct {
	answer  *pb.RemoteAnswer // nil while running
	waiters []waiter
	cancel  func(shutdown bool)
	done    time.Time
}

// waiter is one delivery of an intent that wants its answer.
type waiter struct {
	call  uint64
	reply func(*pb.RemoteAnswer)
}

// beginOutcome says what a host does with a call.
type beginOutcome int

const (
	beginRun      beginOutcome = iota // new: run it
	beginAttached                     // running: answered when it ends
	beginAnswered                     // done before: answered from the book
)

func newIntentBook(keep time.Duration, max int) *intentBook {
	return &intentBook{keep: keep, max: max, entries: map[intentKey]*intentEntry{}}
}

// begin records a delivery of intent k. For a new intent the caller runs
// it and calls finish; for a running one w is answered when it ends; for
// a finished one the stored answer is returned (w is not kept).
func (b *intentBook) begin(k intentKey, w waiter, now time.Time) (beginOutcome, *pb.RemoteAnswer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expire(now)
	if e, ok := b.entries[k]; ok {
		if e.answer != nil {
			return beginAnswered, e.answer
		}
		for _, had := range e.waiters {
			if had.call == w.call {
				return beginAttached, nil // the same delivery again: answered once
			}
		}
		e.waiters = append(e.waiters, w)
		return beginAttached, nil
	}
	b.entries[k] = &intentEntry{waiters: []waiter{w}}
	return beginRun, nil
}

// running sets how a running intent is cancelled.
func (b *intentBook) running(k intentKey, cancel func(shutdown bool)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.entries[k]; ok && e.answer == nil {
		e.cancel = cancel
	}
}

// finish stores the outcome of intent k and returns who waits for it.
// An outcome that says the call never reached the backend (cancelled
// before it left) is not kept: a later delivery may run it.
func (b *intentBook) finish(k intentKey, a *pb.RemoteAnswer, keep bool, now time.Time) []waiter {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[k]
	if !ok {
		return nil
	}
	ws := e.waiters
	e.waiters, e.cancel = nil, nil
	if !keep {
		delete(b.entries, k)
		return ws
	}
	e.answer, e.done = a, now
	b.order = append(b.order, k)
	for len(b.order) > b.max {
		delete(b.entries, b.order[0])
		b.order = b.order[1:]
	}
	return ws
}

// cancel ends the delivery call of intent k; the call itself stops only
// when no other delivery still waits for it.
func (b *intentBook) cancel(k intentKey, call uint64, shutdown bool) {
	b.mu.Lock()
	e, ok := b.entries[k]
	if !ok || e.answer != nil {
		b.mu.Unlock()
		return
	}
	kept := e.waiters[:0]
	for _, w := range e.waiters {
		if w.call != call {
			kept = append(kept, w)
		}
	}
	e.waiters = kept
	stop := len(kept) == 0 && e.cancel != nil
	cancel := e.cancel
	b.mu.Unlock()
	if stop {
		cancel(shutdown)
	}
}

// cancelAll stops every running call (the host is stopping).
func (b *intentBook) cancelAll(shutdown bool) {
	b.mu.Lock()
	var cs []func(bool)
	for _, e := range b.entries {
		if e.answer == nil && e.cancel != nil {
			cs = append(cs, e.cancel)
		}
	}
	b.mu.Unlock()
	for _, c := range cs {
		c(shutdown)
	}
}

// counts: running intents and finished ones kept.
func (b *intentBook) counts() (running, kept int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.entries) - len(b.order), len(b.order)
}

func (b *intentBook) expire(now time.Time) {
	n := 0
	for _, k := range b.order {
		e := b.entries[k]
		if e == nil || now.Sub(e.done) <= b.keep {
			break
		}
		delete(b.entries, k)
		n++
	}
	b.order = b.order[n:]
}

// delivered notes that the answers of these intents (and calls without
// one) reached the orchestrator: the book keeps only that they were
// answered, so a late repeat still never runs them again, without
// holding the answers.
func (b *intentBook) delivered(ledger string, intents, calls []uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	forget := func(k intentKey) {
		if e, ok := b.entries[k]; ok && e.answer != nil {
			e.answer = deliveredAnswer
		}
	}
	for _, i := range intents {
		forget(intentKey{ledger: ledger, intent: i})
	}
	for _, c := range calls {
		forget(intentKey{ledger: ledger, call: c})
	}
}

// deliveredAnswer is the kept outcome of every intent whose answer was
// delivered: a repeat gets it as a permanent error no call waits for
// (with the repeat's own intent, call and backend). Shared: never
// changed.
var deliveredAnswer = &pb.RemoteAnswer{Error: &pb.RemoteError{Kind: "permanent",
	Message: "the answer to this request was delivered already"}}
