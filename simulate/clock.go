package simulate

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
)

// Clock is a clockwork fake clock that also knows when each of its timers
// is due, so the driver can jump straight to the next one. Tickers are
// kept apart: they fire forever and say nothing about when work is due.
type Clock struct {
	*clockwork.FakeClock

	mu      sync.Mutex
	timers  map[*trackedTimer]time.Time // live one-shot timers -> deadline
	tickers []*trackedTicker
	ops     atomic.Int64 // timers made, reset or stopped: activity
}

// NewClock returns a fake clock at start.
func NewClock(start time.Time) *Clock {
	return &Clock{FakeClock: clockwork.NewFakeClockAt(start), timers: map[*trackedTimer]time.Time{}}
}

var _ clockwork.Clock = (*Clock)(nil)

type trackedTimer struct {
	clockwork.Timer
	c *Clock
}

func (t *trackedTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	t.c.timers[t] = t.c.Now().Add(d)
	t.c.mu.Unlock()
	t.c.ops.Add(1)
	return t.Timer.Reset(d)
}

func (t *trackedTimer) Stop() bool {
	t.c.mu.Lock()
	delete(t.c.timers, t)
	t.c.mu.Unlock()
	t.c.ops.Add(1)
	return t.Timer.Stop()
}

func (c *Clock) track(d time.Duration, mk func() clockwork.Timer) clockwork.Timer {
	t := &trackedTimer{c: c}
	c.mu.Lock()
	// The deadline is recorded before the timer exists, so an Advance
	// that races with its creation can only fire it late, never lose it.
	due := c.Now().Add(d)
	t.Timer = mk()
	c.timers[t] = due
	c.mu.Unlock()
	c.ops.Add(1)
	return t
}

// NewTimer is clockwork's, tracked.
func (c *Clock) NewTimer(d time.Duration) clockwork.Timer {
	return c.track(d, func() clockwork.Timer { return c.FakeClock.NewTimer(d) })
}

// AfterFunc is clockwork's, tracked.
func (c *Clock) AfterFunc(d time.Duration, f func()) clockwork.Timer {
	return c.track(d, func() clockwork.Timer { return c.FakeClock.AfterFunc(d, f) })
}

// After is NewTimer's channel.
func (c *Clock) After(d time.Duration) <-chan time.Time { return c.NewTimer(d).Chan() }

// Sleep waits on a tracked timer.
func (c *Clock) Sleep(d time.Duration) { <-c.After(d) }

type trackedTicker struct {
	clockwork.Ticker
	c       *Clock
	period  time.Duration
	next    time.Time
	stopped bool
}

func (t *trackedTicker) Reset(d time.Duration) {
	t.c.mu.Lock()
	t.period, t.next, t.stopped = d, t.c.Now().Add(d), false
	t.c.mu.Unlock()
	t.Ticker.Reset(d)
}

func (t *trackedTicker) Stop() {
	t.c.mu.Lock()
	t.stopped = true
	t.c.mu.Unlock()
	t.Ticker.Stop()
}

// NewTicker is clockwork's; its ticks are known (NextTick) but are not
// deadlines of work (see Next).
func (c *Clock) NewTicker(d time.Duration) clockwork.Ticker {
	c.ops.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &trackedTicker{c: c, period: d, next: c.Now().Add(d), Ticker: c.FakeClock.NewTicker(d)}
	c.tickers = append(c.tickers, t)
	return t
}

// NextTick returns the first tick of a live ticker after now, if any.
func (c *Clock) NextTick() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.Now()
	var next time.Time
	live := c.tickers[:0]
	for _, t := range c.tickers {
		if t.stopped {
			continue
		}
		live = append(live, t)
		for !t.next.After(now) {
			// Catch up as clockwork does: a tick per period passed.
			t.next = t.next.Add(t.period)
		}
		if next.IsZero() || t.next.Before(next) {
			next = t.next
		}
	}
	c.tickers = live
	return next, !next.IsZero()
}

// Next returns the earliest deadline of a live timer after now, if any;
// timers already due are forgotten.
func (c *Clock) Next() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.Now()
	var next time.Time
	for t, due := range c.timers {
		if !due.After(now) {
			delete(c.timers, t)
			continue
		}
		if next.IsZero() || due.Before(next) {
			next = due
		}
	}
	return next, !next.IsZero()
}

// Ops counts timer activity; a change means someone is still working.
func (c *Clock) Ops() int64 { return c.ops.Load() }

// AdvanceTo moves the clock to t (never back).
func (c *Clock) AdvanceTo(t time.Time) {
	if d := t.Sub(c.Now()); d > 0 {
		c.Advance(d)
	}
}
