// Package breaker wraps a gateway.Backend in a circuit breaker
// (sony/gobreaker/v2): after FailureThreshold consecutive
// failures the circuit opens and every Send is refused at once as
// gateway.Unavailable("circuit open"); after RecoveryTimeout it goes
// half-open and lets HalfOpenRequests probes through; that many successes
// close it, one failure opens it again.
//
// A rate limit, a cancellation and a request the rate limiter never sent
// say nothing about the backend's health: they are neither failures nor
// successes. A timeout is a failure.
package breaker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/sony/gobreaker/v2"

	"fano/gateway"
)

// States as State reports them.
const (
	Closed   = "closed"
	Open     = "open"
	HalfOpen = "half-open"
)

// Config configures a breaker; zero fields take the spec's defaults
// (config llm.circuit_breaker: 5, 300 s, 3).
type Config struct {
	FailureThreshold int
	RecoveryTimeout  time.Duration
	HalfOpenRequests int
	// Clock times the open period (so tests and the fake-clock simulation
	// control it).
	Clock clockwork.Clock
	// OnStateChange, if set, hears every transition. It is called
	// synchronously inside the breaker: it must not block nor call the
	// Backend.
	OnStateChange func(backend, from, to string)
	// Turn, if set, is called before a request reaches the circuit and
	// returns once it may go on (an error, its context's: it gives up).
	// The circuit's verdicts depend on the order of the requests (the
	// failure that trips it, the probes a half-open circuit lets
	// through): `fano simulate` lines up there the requests of one
	// virtual instant in task order, so one seed gives one run.
	Turn func(ctx context.Context, req gateway.Request) error
}

// Backend is a gateway.Backend guarded by a circuit breaker. Safe for
// concurrent use.
type Backend struct {
	inner    gateway.Backend
	cb       *gobreaker.CircuitBreaker[gateway.Response]
	clock    clockwork.Clock
	timeout  time.Duration
	probes   uint32 // requests let through while half-open
	onChange func(backend, from, to string)
	turn     func(ctx context.Context, req gateway.Request) error

	mu        sync.Mutex
	openUntil time.Time
	opened    uint64
	// announcedOpen: "open" was reported and "half-open" not yet. gobreaker
	// goes half-open the moment any call returns after a trip (its own open
	// period is 1 ns); we report half-open when our clock ends the open
	// period and a probe is let through, when it really happens.
	announcedOpen bool
}

var _ gateway.Conditioner = (*Backend)(nil)

var _ gateway.Backend = (*Backend)(nil)

// probeWait is how long a request refused while the half-open probes are
// in flight waits before the backend is tried again.
const probeWait = 10 * time.Second

// errOpen marks a request gobreaker admitted although our clock still
// holds the circuit open; it is excluded from the counts.
var errOpen = errors.New("circuit open")

// Wrap guards inner with a circuit breaker.
func Wrap(inner gateway.Backend, cfg Config) *Backend {
	if cfg.FailureThreshold <= 0 {
		cfg.FailureThreshold = 5
	}
	if cfg.RecoveryTimeout <= 0 {
		cfg.RecoveryTimeout = 300 * time.Second
	}
	if cfg.HalfOpenRequests <= 0 {
		cfg.HalfOpenRequests = 3
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	b := &Backend{inner: inner, clock: cfg.Clock, timeout: cfg.RecoveryTimeout, onChange: cfg.OnStateChange, probes: uint32(cfg.HalfOpenRequests),
		turn: cfg.Turn}
	threshold := uint32(cfg.FailureThreshold)
	b.cb = gobreaker.NewCircuitBreaker[gateway.Response](gobreaker.Settings{
		Name:        inner.Name(),
		MaxRequests: uint32(cfg.HalfOpenRequests),
		// gobreaker times the open state with time.Now. We time it on
		// our clock instead (openUntil) and let gobreaker's own open
		// period lapse at once, so it is half-open whenever we let a
		// request reach it.
		Timeout:     time.Nanosecond,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= threshold },
		IsExcluded:  notAFailure,
		OnStateChange: func(_ string, from, to gobreaker.State) {
			b.stateChanged(from, to)
		},
	})
	return b
}

// notAFailure: rate and quota windows, conditions only a person ends
// (their own condition parks the backend; an open circuit would hide
// it), cancellations and unsent requests do not count.
func notAFailure(err error) bool {
	var rl *gateway.RateLimitedError
	if c, ok := gateway.ConditionOf(err); ok && c.Class() != gateway.ClassTransient {
		return true
	}
	return errors.As(err, &rl) || errors.Is(err, context.Canceled) ||
		errors.Is(err, gateway.ErrNotSent) || errors.Is(err, errOpen)
}

// stateChanged runs under gobreaker's lock (never call cb here).
func (b *Backend) stateChanged(from, to gobreaker.State) {
	b.mu.Lock()
	report := true
	switch {
	case to == gobreaker.StateOpen:
		b.openUntil = b.clock.Now().Add(b.timeout)
		b.opened++
		b.announcedOpen = true
	case from == gobreaker.StateOpen && to == gobreaker.StateHalfOpen:
		report = false // reported by halfOpenDue when our clock says so
	}
	b.mu.Unlock()
	if report && b.onChange != nil {
		b.onChange(b.inner.Name(), from.String(), to.String())
	}
}

// halfOpenDue reports the open -> half-open transition once the open
// period has ended on our clock.
func (b *Backend) halfOpenDue() {
	b.mu.Lock()
	due := b.announcedOpen && !b.clock.Now().Before(b.openUntil)
	if due {
		b.announcedOpen = false
	}
	b.mu.Unlock()
	if due && b.onChange != nil {
		b.onChange(b.inner.Name(), Open, HalfOpen)
	}
}

// Condition is circuit_open until the half-open time while the circuit
// is open, else what the wrapped backend says of itself.
//
// While half-open with every probe in flight it is circuit_open for a
// short while too: a request refused then is no news of the backend (its
// circuit is known to be on trial), so it must not park it as down.
func (b *Backend) Condition() gateway.Condition {
	if until, open := b.openedUntil(); open {
		return gateway.Condition{State: gateway.StateCircuitOpen, Reason: "circuit open after repeated failures", Until: until}
	}
	if b.cb.State() == gobreaker.StateHalfOpen && b.cb.Counts().Requests >= b.probes {
		return gateway.Condition{State: gateway.StateCircuitOpen, Reason: "circuit half-open: its probe requests are in flight",
			Until: b.clock.Now().Add(probeWait)}
	}
	if c, ok := b.inner.(gateway.Conditioner); ok {
		return c.Condition()
	}
	return gateway.Condition{State: gateway.StateReady}
}

func (b *Backend) openedUntil() (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.openUntil, b.clock.Now().Before(b.openUntil)
}

// Name is the wrapped backend's name.
func (b *Backend) Name() string { return b.inner.Name() }

// Unwrap returns the guarded backend (for its own Stats).
func (b *Backend) Unwrap() gateway.Backend { return b.inner }

// State is "closed", "open" or "half-open", for status displays.
func (b *Backend) State() string {
	if _, open := b.openedUntil(); open {
		return Open
	}
	b.halfOpenDue()
	return b.cb.State().String()
}

// Opened counts how often the circuit has opened.
func (b *Backend) Opened() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.opened
}

func (b *Backend) openError() error {
	until, _ := b.openedUntil()
	return &gateway.Error{Backend: b.inner.Name(), Kind: gateway.ErrUnavailable, Err: gateway.ErrNotSent,
		Msg: fmt.Sprintf("circuit open until %s after repeated failures", until.UTC().Format(time.RFC3339))}
}

// Send passes req to the backend unless the circuit is open (or half-open
// with all its probes in flight): then it fails at once with
// gateway.Unavailable naming the backend.
func (b *Backend) Send(ctx context.Context, req gateway.Request) (gateway.Response, error) {
	if b.turn != nil {
		if err := b.turn(ctx, req); err != nil {
			return gateway.Response{}, fmt.Errorf("%s: waiting for its turn: %w", b.inner.Name(), err)
		}
	}
	if _, open := b.openedUntil(); open {
		return gateway.Response{}, b.openError()
	}
	b.halfOpenDue()
	resp, err := b.cb.Execute(func() (gateway.Response, error) {
		if _, open := b.openedUntil(); open {
			return gateway.Response{}, errOpen // opened while we were admitted
		}
		return b.inner.Send(ctx, req)
	})
	switch {
	case errors.Is(err, errOpen), errors.Is(err, gobreaker.ErrOpenState):
		return resp, b.openError()
	case errors.Is(err, gobreaker.ErrTooManyRequests):
		return resp, &gateway.Error{Backend: b.inner.Name(), Kind: gateway.ErrUnavailable, Err: gateway.ErrNotSent,
			Msg: "circuit half-open: its probe requests are in flight"}
	}
	return resp, err
}

// Health is Unavailable while the circuit is open, else the backend's.
func (b *Backend) Health(ctx context.Context) error {
	if _, open := b.openedUntil(); open {
		return b.openError()
	}
	return b.inner.Health(ctx)
}

// Close closes the backend.
func (b *Backend) Close() error { return b.inner.Close() }
