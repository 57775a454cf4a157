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

	// mu also serializes AdvanceTo with the making of timers, so every
	// deadline recorded here is the one clockwork fires at.
	mu     sync.Mutex
	timers map[*trackedTimer]time.Time // live one-shot timers -> deadline
	ops    atomic.Int64                // timers made, reset or stopped: activity
	// fired holds timers whose tick is in their channel until it is taken;
	// funcs counts AfterFunc callbacks fired and not yet returned. Until
	// both are done, someone woken by the clock has not yet acted on it.
	fired map[*trackedTimer]struct{}
	funcs atomic.Int64
	watch time.Duration // tickers of this period tick first (see DeliverTicks)
	held  []*heldTicker
	// done is poked when what the clock fired was acted on: an AfterFunc
	// callback returned, a ticker's reader is back at its select.
	done chan struct{}
}

// Done receives when something the clock fired was acted on since the
// last receive (at most one pending value): a hint for the driver to look
// whether the system went idle.
func (c *Clock) Done() <-chan struct{} { return c.done }

func (c *Clock) poke() {
	select {
	case c.done <- struct{}{}:
	default:
	}
}

// WatchTickers makes the tickers of period (the system's tick interval)
// the ones whose ticks come first at an instant (see DeliverTicks).
func (c *Clock) WatchTickers(period time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.watch = period
}

// NewClock returns a fake clock at start.
func NewClock(start time.Time) *Clock {
	return &Clock{FakeClock: clockwork.NewFakeClockAt(start), timers: map[*trackedTimer]time.Time{}, fired: map[*trackedTimer]struct{}{},
		done: make(chan struct{}, 1)}
}

var _ clockwork.Clock = (*Clock)(nil)

type trackedTimer struct {
	clockwork.Timer
	c  *Clock
	fn bool // an AfterFunc: no channel, a callback
}

// Reset and Stop hold c.mu over clockwork's own call: an AdvanceTo then
// sees the timer either before or after, never halfway.
func (t *trackedTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	delete(t.c.fired, t)
	t.c.ops.Add(1)
	if d <= 0 {
		t.c.expiresNow(t)
	} else {
		t.c.timers[t] = t.c.Now().Add(d)
	}
	return t.Timer.Reset(d)
}

func (t *trackedTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	delete(t.c.timers, t)
	delete(t.c.fired, t)
	t.c.ops.Add(1)
	return t.Timer.Stop()
}

// expiresNow notes a timer clockwork fires at once (d <= 0). c.mu held.
func (c *Clock) expiresNow(t *trackedTimer) {
	delete(c.timers, t)
	if t.fn {
		c.funcs.Add(1)
	} else {
		c.fired[t] = struct{}{}
	}
}

func (c *Clock) track(t *trackedTimer, d time.Duration, mk func() clockwork.Timer) clockwork.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ops.Add(1)
	if d <= 0 {
		c.expiresNow(t)
	} else {
		c.timers[t] = c.Now().Add(d)
	}
	t.Timer = mk()
	return t
}

// NewTimer is clockwork's, tracked.
func (c *Clock) NewTimer(d time.Duration) clockwork.Timer {
	t := &trackedTimer{c: c}
	return c.track(t, d, func() clockwork.Timer { return c.FakeClock.NewTimer(d) })
}

// AfterFunc is clockwork's, tracked: the callback counts as pending from
// the moment the clock fires it until it returns.
func (c *Clock) AfterFunc(d time.Duration, f func()) clockwork.Timer {
	t := &trackedTimer{c: c, fn: true}
	return c.track(t, d, func() clockwork.Timer {
		return c.FakeClock.AfterFunc(d, func() {
			defer c.poke()
			defer c.funcs.Add(-1)
			f()
		})
	})
}

// Undelivered counts what the clock fired that nobody has acted on yet:
// a timer's tick still in its channel, an AfterFunc callback not yet
// returned. While it is not 0 the system is not idle, whatever
// its mailboxes say.
func (c *Clock) Undelivered() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := int(c.funcs.Load())
	for t := range c.fired {
		if len(t.Chan()) > 0 {
			n++
		} else {
			delete(c.fired, t)
		}
	}
	// A ticker's tick counts from its delivery until its reader is back
	// at its select (see heldTicker.Chan): the actors' tick until its
	// message is sent, a health check until it is done.
	for _, t := range c.held {
		if !t.stopped && (t.pending || len(t.ch) > 0) {
			n++
		}
	}
	return n
}

// After is NewTimer's channel.
func (c *Clock) After(d time.Duration) <-chan time.Time { return c.NewTimer(d).Chan() }

// Sleep waits on a tracked timer.
func (c *Clock) Sleep(d time.Duration) { <-c.After(d) }

// heldTicker is every ticker of this clock: AdvanceTo does not fire it,
// DeliverTicks does. A timer and a tick due at one instant would race (a
// task's answer and the tick that reads what the modules saw of it; the
// actors' tick and a health check that lets work start again); held back,
// the ticks come in a fixed order once what the timers woke was handled.
type heldTicker struct {
	c       *Clock
	ch      chan time.Time
	period  time.Duration
	next    time.Time
	stopped bool
	pending bool // a tick sent and its reader not yet back (see Chan)
}

// Chan is asked for again by a reader back at its select (the actors'
// tick loop asks on every turn): a tick taken counts as undelivered until
// then, for between its receipt and the message it leads to the reader
// shows no sign of work.
func (t *heldTicker) Chan() <-chan time.Time {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if len(t.ch) == 0 && t.pending {
		t.pending = false
		t.c.poke()
	}
	return t.ch
}

func (t *heldTicker) Reset(d time.Duration) {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.period, t.next, t.stopped = d, t.c.Now().Add(d), false
}

func (t *heldTicker) Stop() {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.stopped, t.pending = true, false
}

// TicksDue reports whether a ticker of the watched period (watched true)
// or of another (false) has a tick due.
func (c *Clock) TicksDue(watched bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.Now()
	for _, t := range c.held {
		if !t.stopped && c.watched(t) == watched && !t.next.After(now) {
			return true
		}
	}
	return false
}

func (c *Clock) watched(t *heldTicker) bool { return c.watch > 0 && t.period == c.watch }

// DeliverTicks sends the ticks due of the tickers of the watched period
// (watched true) or of the others (one per ticker, however many periods
// passed, as a ticker drops the ticks its reader missed) and reports
// whether it sent any.
func (c *Clock) DeliverTicks(watched bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.Now()
	sent := false
	live := c.held[:0]
	for _, t := range c.held {
		if t.stopped {
			continue
		}
		live = append(live, t)
		if c.watched(t) != watched || t.next.After(now) {
			continue
		}
		for !t.next.After(now) {
			t.next = t.next.Add(t.period)
		}
		select {
		case t.ch <- now:
			sent, t.pending = true, true
		default:
		}
	}
	c.held = live
	return sent
}

// NewTicker is a held ticker (see heldTicker); its ticks are known
// (NextTick) but are not deadlines of work (see Next).
func (c *Clock) NewTicker(d time.Duration) clockwork.Ticker {
	if d <= 0 {
		panic("simulate: non-positive interval for NewTicker")
	}
	c.ops.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &heldTicker{c: c, ch: make(chan time.Time, 1), period: d, next: c.Now().Add(d)}
	c.held = append(c.held, t)
	return t
}

// NextTick returns the first tick of a live ticker after now, if any.
func (c *Clock) NextTick() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.Now()
	var next time.Time
	for _, t := range c.held {
		if t.stopped {
			continue
		}
		// Due ticks are caught up by DeliverTicks: the first after now.
		due := t.next
		for !due.After(now) {
			due = due.Add(t.period)
		}
		if next.IsZero() || due.Before(next) {
			next = due
		}
	}
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

// AdvanceTo moves the clock to t (never back), noting the timers it
// fires (see Undelivered), and returns how many it fired.
func (c *Clock) AdvanceTo(t time.Time) (fired int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := t.Sub(c.Now())
	if d <= 0 {
		return 0
	}
	for tm, due := range c.timers {
		if !due.After(t) {
			c.expiresNow(tm)
			fired++
		}
	}
	c.Advance(d)
	return fired
}
