package ratelimit_test

import (
	"container/heap"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
)

// simClock is a discrete-event clock for BenchmarkIncident429: time moves
// only when every simulated actor waits on the clock (or in the limiter's
// queue), and then jumps to the next timer. The machine's load therefore
// cannot distort the simulated minutes, and an hour takes seconds.
//
// Quiescence is tracked with tokens: each worker holds one while it does
// anything; whoever makes it wait gives the token up after registering
// the wait (a timer, the limiter queue), and whoever wakes it takes one on
// its behalf before waking it (a firing timer, a limiter grant). The
// driver advances the clock only when no token is held.
type simClock struct {
	tokens *tokens

	mu     sync.Mutex
	now    time.Time
	timers timerHeap
	seq    uint64
}

var _ clockwork.Clock = (*simClock)(nil)

func newSimClock(start time.Time, t *tokens) *simClock {
	return &simClock{now: start, tokens: t}
}

// tokens counts busy actors; quiet gets a signal each time it drops to 0.
type tokens struct {
	n     atomic.Int64
	quiet chan struct{}
}

func newTokens(n int) *tokens {
	t := &tokens{quiet: make(chan struct{}, 1)}
	t.n.Store(int64(n))
	return t
}

func (t *tokens) add(d int64) {
	if t.n.Add(d) == 0 {
		select {
		case t.quiet <- struct{}{}:
		default:
		}
	}
}

// waitQuiet returns once no token is held, or when stop closes.
func (t *tokens) waitQuiet(stop <-chan struct{}) bool {
	for t.n.Load() != 0 {
		select {
		case <-t.quiet:
		case <-stop:
			return false
		}
	}
	return true
}

type simTimer struct {
	c     *simClock
	at    time.Time
	seq   uint64
	ch    chan time.Time // nil for AfterFunc
	f     func()
	index int // in the heap; -1 when not scheduled
}

func (t *simTimer) Chan() <-chan time.Time { return t.ch }

func (t *simTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	return t.c.unscheduleLocked(t)
}

func (t *simTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.c.unscheduleLocked(t)
	t.c.scheduleLocked(t, d)
	return was
}

func (c *simClock) unscheduleLocked(t *simTimer) bool {
	if t.index < 0 {
		return false
	}
	heap.Remove(&c.timers, t.index)
	t.index = -1
	return true
}

func (c *simClock) scheduleLocked(t *simTimer, d time.Duration) {
	t.at = c.now.Add(max(d, 0))
	c.seq++
	t.seq = c.seq
	heap.Push(&c.timers, t)
}

func (c *simClock) newTimer(d time.Duration, f func()) *simTimer {
	t := &simTimer{c: c, f: f, index: -1}
	if f == nil {
		t.ch = make(chan time.Time, 1)
	}
	c.mu.Lock()
	c.scheduleLocked(t, d)
	c.mu.Unlock()
	return t
}

func (c *simClock) After(d time.Duration) <-chan time.Time { return c.newTimer(d, nil).ch }

func (c *simClock) Sleep(d time.Duration) { <-c.After(d) }

func (c *simClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *simClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (c *simClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

func (c *simClock) NewTicker(time.Duration) clockwork.Ticker {
	panic("simClock: tickers are not simulated")
}

func (c *simClock) NewTimer(d time.Duration) clockwork.Timer { return c.newTimer(d, nil) }

func (c *simClock) AfterFunc(d time.Duration, f func()) clockwork.Timer { return c.newTimer(d, f) }

// next is the time of the earliest timer.
func (c *simClock) next() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 {
		return time.Time{}, false
	}
	return c.timers[0].at, true
}

// advanceTo moves the clock to t and fires every timer due by then, each
// with a token for whoever it wakes.
func (c *simClock) advanceTo(t time.Time) {
	c.mu.Lock()
	if t.After(c.now) {
		c.now = t
	}
	var due []*simTimer
	for len(c.timers) > 0 && !c.timers[0].at.After(c.now) {
		tm := heap.Pop(&c.timers).(*simTimer)
		tm.index = -1
		due = append(due, tm)
	}
	c.mu.Unlock()
	for _, tm := range due {
		c.tokens.add(1)
		if tm.f == nil {
			tm.ch <- tm.at
			continue
		}
		go func() {
			tm.f()
			c.tokens.add(-1)
		}()
	}
}

type timerHeap []*simTimer

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
	t := x.(*simTimer)
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
