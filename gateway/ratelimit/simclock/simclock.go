// Package simclock is a discrete-event clock for simulations in tests and
// benchmarks: time moves only when every simulated actor waits on the
// clock (or in a rate limiter's queue), and then jumps to the next timer.
// The machine's load therefore cannot distort the simulated minutes, and
// an hour takes seconds.
package simclock

import (
	"container/heap"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
)

// Clock is the discrete-event clock.
//
// Quiescence is tracked with tokens: each worker holds one while it does
// anything; whoever makes it wait gives the token up after registering
// the wait (a timer, the limiter queue), and whoever wakes it takes one on
// its behalf before waking it (a firing timer, a limiter grant). The
// driver advances the clock only when no token is held.
type Clock struct {
	tokens *Tokens

	mu     sync.Mutex
	now    time.Time
	timers timerHeap
	seq    uint64
}

var _ clockwork.Clock = (*Clock)(nil)

// New is a clock at start whose actors hold t.
func New(start time.Time, t *Tokens) *Clock {
	return &Clock{now: start, tokens: t}
}

// Tokens counts busy actors; quiet gets a signal each time it drops to 0.
type Tokens struct {
	n     atomic.Int64
	quiet chan struct{}
}

// NewTokens is n busy actors.
func NewTokens(n int) *Tokens {
	t := &Tokens{quiet: make(chan struct{}, 1)}
	t.n.Store(int64(n))
	return t
}

// Add changes the number of busy actors by d.
func (t *Tokens) Add(d int64) {
	if t.n.Add(d) == 0 {
		select {
		case t.quiet <- struct{}{}:
		default:
		}
	}
}

// Busy is the number of busy actors.
func (t *Tokens) Busy() int64 { return t.n.Load() }

// WaitQuiet returns true once no token is held, or false when stop closes.
func (t *Tokens) WaitQuiet(stop <-chan struct{}) bool {
	for t.n.Load() != 0 {
		select {
		case <-t.quiet:
		case <-stop:
			return false
		}
	}
	return true
}

type timer struct {
	c     *Clock
	at    time.Time
	seq   uint64
	ch    chan time.Time // nil for AfterFunc
	f     func()
	index int // in the heap; -1 when not scheduled
}

func (t *timer) Chan() <-chan time.Time { return t.ch }

func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	return t.c.unscheduleLocked(t)
}

func (t *timer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.c.unscheduleLocked(t)
	t.c.scheduleLocked(t, d)
	return was
}

func (c *Clock) unscheduleLocked(t *timer) bool {
	if t.index < 0 {
		return false
	}
	heap.Remove(&c.timers, t.index)
	t.index = -1
	return true
}

func (c *Clock) scheduleLocked(t *timer, d time.Duration) {
	t.at = c.now.Add(max(d, 0))
	c.seq++
	t.seq = c.seq
	heap.Push(&c.timers, t)
}

func (c *Clock) newTimer(d time.Duration, f func()) *timer {
	t := &timer{c: c, f: f, index: -1}
	if f == nil {
		t.ch = make(chan time.Time, 1)
	}
	c.mu.Lock()
	c.scheduleLocked(t, d)
	c.mu.Unlock()
	return t
}

func (c *Clock) After(d time.Duration) <-chan time.Time { return c.newTimer(d, nil).ch }

func (c *Clock) Sleep(d time.Duration) { <-c.After(d) }

func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *Clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (c *Clock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

func (c *Clock) NewTicker(time.Duration) clockwork.Ticker {
	panic("simclock: tickers are not simulated")
}

func (c *Clock) NewTimer(d time.Duration) clockwork.Timer { return c.newTimer(d, nil) }

func (c *Clock) AfterFunc(d time.Duration, f func()) clockwork.Timer { return c.newTimer(d, f) }

// Tokens are the clock's busy actors.
func (c *Clock) Tokens() *Tokens { return c.tokens }

// Next is the time of the earliest timer.
func (c *Clock) Next() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 {
		return time.Time{}, false
	}
	return c.timers[0].at, true
}

// AdvanceTo moves the clock to t and fires every timer due by then, each
// with a token for whoever it wakes.
func (c *Clock) AdvanceTo(t time.Time) {
	c.mu.Lock()
	if t.After(c.now) {
		c.now = t
	}
	var due []*timer
	for len(c.timers) > 0 && !c.timers[0].at.After(c.now) {
		tm := heap.Pop(&c.timers).(*timer)
		tm.index = -1
		due = append(due, tm)
	}
	c.mu.Unlock()
	for _, tm := range due {
		c.tokens.Add(1)
		if tm.f == nil {
			tm.ch <- tm.at
			continue
		}
		go func() {
			tm.f()
			c.tokens.Add(-1)
		}()
	}
}

type timerHeap []*timer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].at.Equal(h[j].at) {
		return h[i].seq < h[j].seq
	}
	return h[i].at.Before(h[j].at)
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *timerHeap) Push(x any) {
	t := x.(*timer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return t
}
