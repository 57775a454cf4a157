package simulate

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"fano/actors"
	"fano/gateway"
)

// Turns lines up the backend calls of one virtual instant. Calls that
// start at one instant (the tasks a tick dispatched, retries due at once)
// reach a backend in whatever order the OS runs their goroutines, and
// what a backend does depends on that order: which failure trips a
// circuit, which probes a half-open circuit lets through, which request
// takes the last slot of a 429 storm's minute. Each call waits (Wait)
// until the driver, once everything else of the instant is done, lets the
// calls go one at a time in task order (Next), each handled as far as it
// goes before the next is let go.
type Turns struct {
	mu     sync.Mutex
	parked []*turn
	seq    uint64 // calls parked so far
}

type turn struct {
	ctx  context.Context
	task string
	turn int // the request's place in its conversation
	seq  uint64
	go_  chan struct{}
}

// NewTurns returns an empty line.
func NewTurns() *Turns { return &Turns{} }

// order is task order, then the conversation's turn; arrival breaks a
// tie (calls without a task: a probe's).
func (t *turn) order(o *turn) int {
	return cmp.Or(cmp.Compare(t.task, o.task), cmp.Compare(t.turn, o.turn), cmp.Compare(t.seq, o.seq))
}

// Wait parks the call until Next lets it go, or its context ends. While
// parked a task's call counts as waiting (actors.CallWaiting): the
// instant is done for it until its turn.
func (ts *Turns) Wait(ctx context.Context, req gateway.Request) error {
	t := &turn{ctx: ctx, task: req.TaskID, turn: len(req.History), go_: make(chan struct{})}
	// Counted waiting before Next can see it: Next counts it busy again.
	actors.CallWaiting(ctx, true)
	ts.mu.Lock()
	ts.seq++
	t.seq = ts.seq
	ts.parked = append(ts.parked, t)
	ts.mu.Unlock()
	select {
	case <-t.go_:
		return nil
	case <-ctx.Done():
		if ts.remove(t) {
			actors.CallWaiting(ctx, false)
		} else {
			<-t.go_ // Next took it first and counted it busy: it goes
		}
		return ctx.Err()
	}
}

func (ts *Turns) remove(t *turn) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	i := slices.Index(ts.parked, t)
	if i < 0 {
		return false
	}
	ts.parked = slices.Delete(ts.parked, i, i+1)
	return true
}

// Next lets the first parked call in task order go and reports whether
// there was one. Its call is busy again (actors.CallWaiting) before its
// goroutine runs, so the driver's next settle waits for it.
func (ts *Turns) Next() bool {
	ts.mu.Lock()
	if len(ts.parked) == 0 {
		ts.mu.Unlock()
		return false
	}
	first := 0
	for i, t := range ts.parked {
		if t.order(ts.parked[first]) < 0 {
			first = i
		}
	}
	t := ts.parked[first]
	ts.parked = slices.Delete(ts.parked, first, first+1)
	ts.mu.Unlock()
	actors.CallWaiting(t.ctx, false)
	close(t.go_)
	return true
}

// Parked is how many calls wait for their turn.
func (ts *Turns) Parked() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return len(ts.parked)
}
