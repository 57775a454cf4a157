// Package ratelimit paces requests to one API model so that fano stays under
// the provider's rate limit instead of discovering it through 429s
// (500 uncoordinated workers met tens of thousands of 429s an hour).
//
// A Limiter is a token bucket (in GCRA form: a theoretical arrival time
// advanced by one interval per grant) with an explicit first-come,
// first-served queue of waiters. It starts at a conservative rate, learns the
// real one from the x-ratelimit-* response headers, and a 429 pauses the
// whole model — every waiter — until the server's reset time.
package ratelimit

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"fano/gateway"
)

// Defaults for Config fields left zero.
const (
	DefaultInitialRPM = 20
	DefaultWindow     = time.Minute
	DefaultHeadroom   = 0.02
)

// ErrNotSent marks a Wait that ended before a slot was granted: the
// request never reached the backend, so it says nothing about the
// backend's health (the circuit breaker ignores it) and used no quota.
// It is gateway.ErrNotSent itself, so one errors.Is works everywhere.
var ErrNotSent = gateway.ErrNotSent

// Config configures a Limiter.
type Config struct {
	// Name identifies the model (or backend) in errors and Stats.
	Name string
	// InitialRPM is the rate used until a response tells the real one. It
	// should be conservative: too low costs a few seconds at start-up, too
	// high costs 429s.
	InitialRPM int
	// Window is the period x-ratelimit-limit-requests counts over (one
	// minute for OpenAI-compatible APIs). The benchmark shrinks it.
	Window time.Duration
	// Headroom is the share of the learned limit left unused (default
	// 2 %): the pace is (1-Headroom)*limit per Window, and no sliding
	// window a little longer than Window (by Headroom/2) ever holds more
	// than the pace allows for that length (at most limit-1), so a
	// request delayed between our grant and the server's count by up to
	// Headroom/2 of a Window cannot push the server's window over the
	// limit.
	Headroom float64
	// CatchUp is how far grants may fall behind the pace and still catch
	// up (default 10 % of Window), at no more than twice the pace: a late
	// timer or a busy machine costs no throughput. The window cap still
	// bounds every window.
	CatchUp time.Duration
	// MaxPauseWait is the longest pause a waiter sits out in the queue
	// (default: Window). A longer one — the server's budget is gone for a
	// while — ends the waits at once with a *PausedError, so the caller
	// can park the task instead of holding a worker (and its deadline).
	MaxPauseWait time.Duration
}

// PausedError says the model is paused (after a 429 or an exhausted
// budget) until Until, longer than a waiter should wait. It wraps
// ErrNotSent. State and Window are the condition that paused it
// (StateRateLimited with "requests" when nothing more was said).
type PausedError struct {
	Name   string
	Until  time.Time
	State  gateway.State
	Window string
}

func (e *PausedError) Error() string {
	return fmt.Sprintf("rate limiter %s: %s: paused until %s", e.Name, ErrNotSent, e.Until.UTC().Format(time.RFC3339))
}

func (e *PausedError) Unwrap() error { return ErrNotSent }

// Limiter paces one model's requests. Safe for concurrent use.
//
// Three rules decide when the next slot is due: a token bucket (in GCRA
// form: a theoretical arrival time tat advanced one interval per grant,
// with tolerance tau for catching up) spreads grants evenly at the paced
// rate; two grants are never closer than half an interval, so catching up
// is never a burst; and a log of the grants of the last Window caps any
// sliding window (a little longer than the server's) at the paced count,
// whatever the timing.
//
// Waiters are served strictly in the order their Wait calls queued; a
// waiter whose context ends leaves the queue and never consumes a slot (or
// gives back the slot it was granted at the same moment). Every granted
// slot counts against the budget whatever becomes of the request: a failed
// request cost the provider's quota too.
type Limiter struct {
	clock clockwork.Clock
	name  string

	mu       sync.Mutex
	window   time.Duration
	headroom float64
	catchUp  time.Duration
	maxPause time.Duration
	limit    int           // learned requests per window; 0 = not learned
	rpm      float64       // requests per window we pace to
	capacity int           // most grants in any guard window
	guard    time.Duration // the capped window: Window plus a margin
	interval time.Duration // time between grants at the pace
	tau      time.Duration // how far grants may run ahead of tat
	tat      time.Time     // theoretical arrival time of the next grant
	last     time.Time     // the latest grant
	recent   []time.Time   // grant times of the last window, oldest first
	paused   time.Time     // no grant before this
	pausedBy pauseCause    // the condition that set paused
	queue    []*waiter
	timer    clockwork.Timer
	timerGen uint64
	timerAt  time.Time

	remaining int // last x-ratelimit-remaining-requests, -1 = unknown

	// The tokens-per-window budget, learned from x-ratelimit-*-tokens:
	// tokLimit tokens per window (0: not learned, not paced), at most
	// tokCap in any guard window, counted in tokLog by grant.
	tokLimit     int
	tokCap       int
	tokLog       []tokGrant
	tokRemaining int     // last x-ratelimit-remaining-tokens, -1 = unknown
	tokScale     float64 // what the server counted per estimated token, learned by Settle
	seq          uint64  // numbers grants for Settle
	granted      uint64
	cancelled    uint64
	pauses       uint64
	observed     uint64

	// Test hooks, called under the lock: onQueue with the waiter's context
	// once it is queued, onGrant when a queued waiter is granted (before
	// it wakes).
	onQueue func(ctx context.Context)
	onGrant func()
}

type waiter struct {
	ch      chan struct{} // closed on grant or on err
	err     error         // set when released without a grant (long pause)
	granted bool
	at      time.Time // grant time
	tokens  int       // estimated tokens it asks for (scaled)
	seq     uint64    // its grant's number
}

// tokGrant is the tokens one grant counts against the window.
type tokGrant struct {
	at      time.Time
	seq     uint64
	tokens  int
	settled bool // tokens is what the server counted
}

// pauseCause is what a pause stands for, for the PausedError it gives.
type pauseCause struct {
	state  gateway.State
	window string
}

// Grant is one slot Acquire granted: Settle corrects its tokens once the
// answer tells how many the server counted.
type Grant struct {
	seq      uint64
	at       time.Time
	estimate int // the caller's estimate, before scaling
}

// New returns a Limiter pacing at cfg.InitialRPM until headers say
// otherwise.
func New(cfg Config, clock clockwork.Clock) *Limiter {
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	if cfg.InitialRPM <= 0 {
		cfg.InitialRPM = DefaultInitialRPM
	}
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.Headroom <= 0 || cfg.Headroom >= 1 {
		cfg.Headroom = DefaultHeadroom
	}
	if cfg.CatchUp <= 0 {
		cfg.CatchUp = cfg.Window / 10
	}
	if cfg.MaxPauseWait <= 0 {
		cfg.MaxPauseWait = cfg.Window
	}
	l := &Limiter{clock: clock, name: cfg.Name, window: cfg.Window, headroom: cfg.Headroom, catchUp: cfg.CatchUp, maxPause: cfg.MaxPauseWait, remaining: -1,
		tokRemaining: -1, tokScale: 1,
		guard: cfg.Window + time.Duration(float64(cfg.Window)*cfg.Headroom/2)}
	// The initial rate is already a cautious guess: pace at it exactly,
	// one request at a time, with no catching up.
	l.setRateLocked(float64(cfg.InitialRPM), cfg.InitialRPM, 0)
	return l
}

// setRateLocked paces perWindow requests per window, at most capacity in
// any window, letting grants catch up by tau.
func (l *Limiter) setRateLocked(perWindow float64, capacity int, tau time.Duration) {
	if perWindow < 1e-3 {
		perWindow = 1e-3
	}
	l.rpm = perWindow
	l.capacity = max(capacity, 1)
	l.interval = time.Duration(float64(l.window) / perWindow)
	if l.interval <= 0 {
		l.interval = 1
	}
	l.tau = tau
}

// Wait blocks until the caller may send one request, or ctx ends (then it
// returns an error wrapping ctx.Err() and consumes nothing).
func (l *Limiter) Wait(ctx context.Context) error {
	_, err := l.Acquire(ctx, 0)
	return err
}

// Acquire is Wait for a request of about tokens tokens (prompt and
// answer; 0 when unknown): once the tokens-per-window budget is learned,
// the request also waits until the window has room for them, so long
// prompts are paced by tokens as short ones are by requests.
func (l *Limiter) Acquire(ctx context.Context, tokens int) (Grant, error) {
	if err := ctx.Err(); err != nil {
		return Grant{}, fmt.Errorf("rate limiter %s: %w: %w", l.name, ErrNotSent, err)
	}
	l.mu.Lock()
	now := l.clock.Now()
	if err := l.longPauseLocked(now); err != nil {
		l.mu.Unlock()
		return Grant{}, err
	}
	scaled := int(math.Ceil(float64(max(tokens, 0)) * l.tokScale))
	if len(l.queue) == 0 && l.mayGrantLocked(now, scaled) {
		seq := l.grantLocked(now, scaled)
		l.mu.Unlock()
		return Grant{seq: seq, at: now, estimate: tokens}, nil
	}
	w := &waiter{ch: make(chan struct{}), tokens: scaled}
	l.queue = append(l.queue, w)
	l.dispatchLocked(now)
	if l.onQueue != nil {
		l.onQueue(ctx)
	}
	l.mu.Unlock()

	select {
	case <-w.ch:
		return Grant{seq: w.seq, at: w.at, estimate: tokens}, w.err
	case <-ctx.Done():
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.err != nil {
		return Grant{}, w.err // released by a long pause as ctx ended
	}
	l.cancelled++
	if w.granted {
		// Granted as the context ended: give the slot back so the next
		// waiter can use it.
		l.refundLocked(w.at, w.seq)
	} else {
		for i, q := range l.queue {
			if q == w {
				l.queue = append(l.queue[:i], l.queue[i+1:]...)
				break
			}
		}
	}
	l.dispatchLocked(l.clock.Now())
	return Grant{}, fmt.Errorf("rate limiter %s: %w: %w", l.name, ErrNotSent, ctx.Err())
}

// Settle tells the limiter how many tokens the server counted for g's
// request (prompt and answer, from the answer's usage). It replaces the
// estimate in the window, once: a second Settle of the same grant, or of
// a grant that already left the window, changes nothing. It also learns
// how the server's count compares with the estimates. A request that
// never answered (cut, failed) is not settled: its estimate stays
// counted, as the server counted its prompt.
func (l *Limiter) Settle(g Grant, actual int) {
	if g.seq == 0 || actual <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	found := false
	for i := range l.tokLog {
		if e := &l.tokLog[i]; e.seq == g.seq {
			if e.settled {
				return
			}
			e.tokens, e.settled, found = actual, true, true
			break
		}
	}
	if !found && g.at.After(l.clock.Now().Add(-l.guard)) {
		return // given back (refunded), or never counted
	}
	if g.estimate > 0 {
		// A moving average of the server's tokens per estimated token,
		// between a half and four times: a tokenizer that counts more than
		// the estimate (or answers that add to it) paces from the next
		// request on.
		ratio := min(4, max(0.5, float64(actual)/float64(g.estimate)))
		l.tokScale += (ratio - l.tokScale) / 8
	}
	l.dispatchLocked(l.clock.Now())
}

// nextGrantLocked is the earliest time the next slot, for a request of
// tokens tokens, may be granted.
func (l *Limiter) nextGrantLocked(now time.Time, tokens int) time.Time {
	at := l.tat.Add(-l.tau)
	if l.paused.After(at) {
		at = l.paused
	}
	if l.tau > 0 {
		if gap := l.last.Add(l.interval / 2); gap.After(at) {
			at = gap
		}
	}
	l.forgetLocked(now)
	if n := len(l.recent); n >= l.capacity {
		// The window is full: wait until its oldest counted grant leaves.
		if free := l.recent[n-l.capacity].Add(l.guard); free.After(at) {
			at = free
		}
	}
	if l.tokLimit > 0 && tokens > 0 {
		// The token window: wait until grants leave it to make room (a
		// request larger than the whole budget waits for an empty one).
		need, used := min(tokens, l.tokCap), 0
		for _, g := range l.tokLog {
			used += g.tokens
		}
		for i := 0; used+need > l.tokCap && i < len(l.tokLog); i++ {
			used -= l.tokLog[i].tokens
			if free := l.tokLog[i].at.Add(l.guard); free.After(at) {
				at = free
			}
		}
	}
	return at
}

// forgetLocked drops grants that left the window.
func (l *Limiter) forgetLocked(now time.Time) {
	cut := now.Add(-l.guard)
	i := 0
	for i < len(l.recent) && !l.recent[i].After(cut) {
		i++
	}
	if i > 0 {
		l.recent = append(l.recent[:0], l.recent[i:]...)
	}
	i = 0
	for i < len(l.tokLog) && !l.tokLog[i].at.After(cut) {
		i++
	}
	if i > 0 {
		l.tokLog = append(l.tokLog[:0], l.tokLog[i:]...)
	}
}

func (l *Limiter) mayGrantLocked(now time.Time, tokens int) bool {
	return !now.Before(l.nextGrantLocked(now, tokens))
}

// grantLocked grants a slot of tokens tokens at now and numbers it.
func (l *Limiter) grantLocked(now time.Time, tokens int) uint64 {
	if l.tat.Before(now) {
		l.tat = now
	}
	l.tat = l.tat.Add(l.interval)
	l.last = now
	l.recent = append(l.recent, now)
	l.granted++
	l.seq++
	if tokens > 0 {
		l.tokLog = append(l.tokLog, tokGrant{at: now, seq: l.seq, tokens: tokens})
	}
	return l.seq
}

// refundLocked gives back the slot granted at t as grant seq.
func (l *Limiter) refundLocked(t time.Time, seq uint64) {
	l.tat = l.tat.Add(-l.interval)
	for i := len(l.recent) - 1; i >= 0; i-- {
		if l.recent[i].Equal(t) {
			l.recent = append(l.recent[:i], l.recent[i+1:]...)
			break
		}
	}
	for i := len(l.tokLog) - 1; i >= 0; i-- {
		if l.tokLog[i].seq == seq {
			l.tokLog = append(l.tokLog[:i], l.tokLog[i+1:]...)
			break
		}
	}
}

// dispatchLocked grants the head of the queue while slots are due and arms
// the timer for the next one.
func (l *Limiter) dispatchLocked(now time.Time) {
	for len(l.queue) > 0 && l.mayGrantLocked(now, l.queue[0].tokens) {
		w := l.queue[0]
		l.queue[0] = nil
		l.queue = l.queue[1:]
		w.seq = l.grantLocked(now, w.tokens)
		w.granted, w.at = true, now
		if l.onGrant != nil {
			l.onGrant()
		}
		close(w.ch)
	}
	if len(l.queue) == 0 {
		l.stopTimerLocked()
		return
	}
	at := l.nextGrantLocked(now, l.queue[0].tokens)
	if l.timer != nil && l.timerAt.Equal(at) {
		return
	}
	l.stopTimerLocked()
	l.timerGen++
	gen := l.timerGen
	l.timerAt = at
	l.timer = l.clock.AfterFunc(at.Sub(now), func() { l.fire(gen) })
}

func (l *Limiter) stopTimerLocked() {
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
}

func (l *Limiter) fire(gen uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if gen != l.timerGen {
		return // superseded
	}
	l.timer = nil
	l.dispatchLocked(l.clock.Now())
}

// Pause holds every waiter, queued or future, until until: the server said
// the model's budget is spent. Pauses only ever extend. After the pause the
// queue resumes at the paced rate, without a burst.
func (l *Limiter) Pause(until time.Time) {
	l.PauseFor(until, gateway.StateRateLimited, "requests")
}

// PauseFor is Pause for a named condition: a rate window ("requests",
// "tokens") or a quota window (StateCapped: "hour", "day"). Waiters the
// pause turns away get a *PausedError naming it.
func (l *Limiter) PauseFor(until time.Time, st gateway.State, window string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pauses++
	if l.pauseLocked(until, pauseCause{st, window}) {
		l.dispatchLocked(l.clock.Now())
	}
}

// pauseLocked extends the pause to until; false if it already lasts
// longer. A pause longer than MaxPauseWait releases the queue with a
// *PausedError.
func (l *Limiter) pauseLocked(until time.Time, cause pauseCause) bool {
	if !until.After(l.paused) {
		return false
	}
	l.paused, l.pausedBy = until, cause
	if resume := until.Add(l.tau); l.tat.Before(resume) {
		l.tat = resume
	}
	if err := l.longPauseLocked(l.clock.Now()); err != nil {
		for _, w := range l.queue {
			w.err = err
			if l.onGrant != nil {
				l.onGrant() // it wakes, like a grant
			}
			close(w.ch)
		}
		clear(l.queue)
		l.queue = l.queue[:0]
	}
	return true
}

// longPauseLocked is a *PausedError if the pause outlasts MaxPauseWait.
func (l *Limiter) longPauseLocked(now time.Time) error {
	if l.paused.Sub(now) > l.maxPause {
		st, w := l.pausedBy.state, l.pausedBy.window
		if st == "" {
			st, w = gateway.StateRateLimited, "requests"
		}
		return &PausedError{Name: l.name, Until: l.paused, State: st, Window: w}
	}
	return nil
}

// Observe learns from a response's headers (any status), taking their
// durations as relative to now. See ObserveSince.
func (l *Limiter) Observe(h http.Header) { l.ObserveSince(h, time.Time{}) }

// ObserveSince learns from the headers of a response to a request sent at
// sent: x-ratelimit-limit-requests sets the paced rate to the limit per
// Window minus the headroom; x-ratelimit-remaining-requests of 0 pauses
// the model until x-ratelimit-reset-requests, before a 429 does. The
// -tokens triple does the same for the tokens-per-window budget Acquire
// paces by. Servers compute these headers when they admit a request, but
// a whole answer arrives only after the model has written it, so the
// reset counts from sent, not from now (zero sent: from now). Values
// that are not counts (-1, garbage) are ignored: headers are hints.
func (l *Limiter) ObserveSince(h http.Header, sent time.Time) {
	limit, okLimit := headerInt(h, HeaderLimit)
	remaining, okRemaining := headerInt(h, HeaderRemaining)
	reset, okReset := ParseDuration(h.Get(HeaderReset))
	tokLimit, okTokLimit := headerInt(h, HeaderLimitTokens)
	tokRemaining, okTokRemaining := headerInt(h, HeaderRemainingTokens)
	tokReset, okTokReset := ParseDuration(h.Get(HeaderResetTokens))

	l.mu.Lock()
	defer l.mu.Unlock()
	l.observed++
	from := sent
	if from.IsZero() {
		from = l.clock.Now()
	}
	if okLimit && limit > 0 && limit != l.limit {
		l.learnLocked(limit)
	}
	if okRemaining {
		l.remaining = remaining
		if remaining == 0 && okReset && reset > 0 {
			if l.pauseLocked(from.Add(reset), pauseCause{gateway.StateRateLimited, "requests"}) {
				l.pauses++
			}
		}
	}
	if okTokLimit && tokLimit > 0 && tokLimit != l.tokLimit {
		l.tokLimit = tokLimit
		l.tokCap = max(1, int(float64(tokLimit)*(1-l.headroom)))
	}
	if okTokRemaining {
		l.tokRemaining = tokRemaining
		if tokRemaining == 0 && okTokReset && tokReset > 0 {
			if l.pauseLocked(from.Add(tokReset), pauseCause{gateway.StateRateLimited, "tokens"}) {
				l.pauses++
			}
		}
	}
	l.dispatchLocked(l.clock.Now())
}

func (l *Limiter) learnLocked(limit int) {
	l.limit = limit
	pace := float64(limit) * (1 - l.headroom)
	capacity := min(int(math.Ceil(pace*float64(l.guard)/float64(l.window))), limit-1)
	old := l.interval
	l.setRateLocked(pace, capacity, l.catchUp)
	// The slot already promised at the old rate is rescaled, so a
	// conservative start does not delay the first paced grant.
	if now := l.clock.Now(); l.tat.After(now) {
		l.tat = now.Add(time.Duration(float64(l.tat.Sub(now)) * float64(l.interval) / float64(old)))
	}
}

// Learned is the limit per Window the headers told (0: none yet).
func (l *Limiter) Learned() (int, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.limit, l.window
}

// Learn paces at limit per window as if a response had said so: the rate
// learned before a restart, so the first requests after it neither burst
// nor crawl at InitialRPM. A limit counted over another window is
// scaled to ours.
func (l *Limiter) Learn(limit int, window time.Duration) {
	if limit <= 0 || window <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if limit = l.inWindow(limit, window); limit <= 0 {
		return
	}
	if limit != l.limit {
		l.learnLocked(limit)
		// No catch-up credit: after a restart the server's window still
		// holds the grants of the previous run, which we no longer see.
		// Pacing from now on, never faster, keeps it under the limit.
		now := l.clock.Now()
		if start := now.Add(l.tau); l.tat.Before(start) {
			l.tat = start
		}
		l.dispatchLocked(now)
	}
}

// inWindow is limit per window counted over the limiter's own window
// (0: less than one). Called with mu held.
func (l *Limiter) inWindow(limit int, window time.Duration) int {
	if window == l.window {
		return limit
	}
	return int(float64(limit) * float64(l.window) / float64(window))
}

// LearnedTokens is the tokens-per-Window budget the headers told (0:
// none yet).
func (l *Limiter) LearnedTokens() (int, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.tokLimit, l.window
}

// LearnTokens paces by a tokens budget of limit per window as if a
// response had said so: the budget learned before a restart, so long
// prompts are paced from the first request on. A budget counted over
// another window is scaled to ours.
func (l *Limiter) LearnTokens(limit int, window time.Duration) {
	if limit <= 0 || window <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if limit = l.inWindow(limit, window); limit <= 0 {
		return
	}
	l.tokLimit = limit
	l.tokCap = max(1, int(float64(limit)*(1-l.headroom)))
	l.dispatchLocked(l.clock.Now())
}

// ShortBackoff is how long to hold the model after a 429 that named no
// reset (or "0s"): three intervals of the paced rate, between 2 s and a
// minute.
func (l *Limiter) ShortBackoff() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return min(time.Minute, max(2*time.Second, 3*l.interval))
}

// Window is the period the learned limit counts over.
func (l *Limiter) Window() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.window
}

// Stats is a snapshot of a Limiter.
type Stats struct {
	Name string `json:"name"`
	// RPM is the rate paced to, in requests per Window.
	RPM float64 `json:"rpm"`
	// LimitRPM is the learned limit per Window; 0 = still on the initial
	// rate.
	LimitRPM int `json:"limit_rpm"`
	// Capacity is the most grants any guard window (Window plus
	// Headroom/2) may hold; InWindow the grants of the last one.
	Capacity int `json:"capacity"`
	InWindow int `json:"in_window"`
	// Remaining is the last x-ratelimit-remaining-requests seen (-1 none).
	Remaining int `json:"remaining"`
	// TokenLimit is the learned tokens per Window (0: not paced by
	// tokens); TokensInWindow what the last guard window holds;
	// TokenRemaining the last x-ratelimit-remaining-tokens (-1 none);
	// TokenScale the server's tokens per estimated token.
	TokenLimit     int       `json:"token_limit,omitempty"`
	TokensInWindow int       `json:"tokens_in_window,omitempty"`
	TokenRemaining int       `json:"token_remaining"`
	TokenScale     float64   `json:"token_scale"`
	Waiting        int       `json:"waiting"`
	Granted        uint64    `json:"granted"`
	Cancelled      uint64    `json:"cancelled"`
	Pauses         uint64    `json:"pauses"`
	PausedUntil    time.Time `json:"paused_until,omitzero"`
}

// Stats returns the current figures.
func (l *Limiter) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	l.forgetLocked(now)
	s := Stats{
		Name: l.name, RPM: l.rpm, LimitRPM: l.limit, Capacity: l.capacity, InWindow: len(l.recent), Remaining: l.remaining,
		Waiting: len(l.queue), Granted: l.granted, Cancelled: l.cancelled, Pauses: l.pauses,
		TokenLimit: l.tokLimit, TokenRemaining: l.tokRemaining, TokenScale: l.tokScale,
	}
	for _, g := range l.tokLog {
		s.TokensInWindow += g.tokens
	}
	if l.paused.After(now) {
		s.PausedUntil = l.paused
	}
	return s
}

// Registry hands out one Limiter per key (say base URL + model), so
// backends that share a provider's model share its budget. Safe for
// concurrent use.
type Registry struct {
	mu    sync.Mutex
	clock clockwork.Clock
	m     map[string]*Limiter
}

// NewRegistry returns an empty Registry whose limiters use clock.
func NewRegistry(clock clockwork.Clock) *Registry {
	return &Registry{clock: clock, m: map[string]*Limiter{}}
}

// Get returns key's Limiter, creating it from cfg on first use (later cfgs
// for the same key are ignored: the first backend configures the model).
func (r *Registry) Get(key string, cfg Config) *Limiter {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l, ok := r.m[key]; ok {
		return l
	}
	l := New(cfg, r.clock)
	r.m[key] = l
	return l
}

// SetHooks lets a discrete-event simulation (package simclock) account
// for waiters: queued runs when a wait joins l's queue, granted when a
// queued waiter is woken (granted, or turned away by a long pause),
// before it wakes.
func SetHooks(l *Limiter, queued, granted func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.onQueue = func(context.Context) { queued() }
	l.onGrant = granted
}
