package breaker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/gateway"
	"fano/gateway/ratelimit"
)

// scripted is an LLM whose next outcomes the test sets; calls counts the
// Sends that reached it. block, if set, holds each Send until it is closed.
type scripted struct {
	mu    sync.Mutex
	errs  []error // consumed in order; empty = success
	calls int
	block chan struct{}
	in    chan struct{} // signalled when a Send starts
}

func (s *scripted) Name() string { return "llm-a" }

func (s *scripted) Send(ctx context.Context, req gateway.Request) (gateway.Response, error) {
	s.mu.Lock()
	s.calls++
	var err error
	if len(s.errs) > 0 {
		err, s.errs = s.errs[0], s.errs[1:]
	}
	block, in := s.block, s.in
	s.mu.Unlock()
	if in != nil {
		in <- struct{}{}
	}
	if block != nil {
		<-block
	}
	if err != nil {
		return gateway.Response{}, err
	}
	return gateway.Response{Content: "ok"}, nil
}

func (s *scripted) Health(context.Context) error { return nil }
func (s *scripted) Close() error                 { return nil }

func (s *scripted) script(errs ...error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs = append(s.errs, errs...)
}

func (s *scripted) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

type transition struct{ from, to string }

func setup(t *testing.T) (*Backend, *scripted, *clockwork.FakeClock, chan transition) {
	t.Helper()
	inner := &scripted{}
	clock := clockwork.NewFakeClock()
	changes := make(chan transition, 100)
	b := Wrap(inner, Config{FailureThreshold: 5, RecoveryTimeout: 300 * time.Second, HalfOpenRequests: 3, Clock: clock,
		OnStateChange: func(backend, from, to string) {
			assert.Equal(t, "llm-a", backend)
			changes <- transition{from, to}
		}})
	return b, inner, clock, changes
}

func send(b *Backend) error {
	_, err := b.Send(context.Background(), gateway.Request{TaskID: "t", Prompt: "p"})
	return err
}

func expectChange(t *testing.T, ch chan transition, from, to string) {
	t.Helper()
	select {
	case c := <-ch:
		require.Equal(t, transition{from, to}, c)
	default:
		t.Fatalf("no %s -> %s transition", from, to)
	}
}

func transient() error { return gateway.Transient("llm-a", "HTTP 503") }

func TestOpensAfterFiveConsecutiveFailures(t *testing.T) {
	b, inner, _, changes := setup(t)
	// A success in between resets the run.
	inner.script(transient(), transient(), transient(), transient(), nil)
	for range 5 {
		_ = send(b)
	}
	assert.Equal(t, Closed, b.State())

	inner.script(transient(), transient(), transient(), transient())
	for range 4 {
		require.ErrorIs(t, send(b), gateway.ErrTransient)
	}
	assert.Equal(t, Closed, b.State())
	inner.script(&gateway.Error{Backend: "llm-a", Kind: gateway.ErrTransient, Msg: "timed out", Err: context.DeadlineExceeded})
	require.ErrorIs(t, send(b), context.DeadlineExceeded, "a timeout is a failure")
	assert.Equal(t, Open, b.State())
	expectChange(t, changes, Closed, Open)
	calls := inner.count()

	err := send(b)
	require.ErrorIs(t, err, gateway.ErrUnavailable)
	assert.Equal(t, "unavailable", gateway.Kind(err))
	assert.Contains(t, err.Error(), "llm-a")
	assert.Contains(t, err.Error(), "circuit open")
	assert.Equal(t, calls, inner.count(), "an open circuit sends nothing")
	require.ErrorIs(t, b.Health(context.Background()), gateway.ErrUnavailable)
	assert.EqualValues(t, 1, b.Opened())
}

func TestRateLimitsCancellationsAndUnsentAreNotFailures(t *testing.T) {
	b, inner, _, _ := setup(t)
	for range 4 {
		inner.script(
			&gateway.RateLimitedError{Backend: "llm-a", RetryAfter: time.Minute},
			fmt.Errorf("llm-a: request cancelled: %w", context.Canceled),
			fmt.Errorf("llm-a: not sent: %w", fmt.Errorf("rate limiter m: %w: %w", ratelimit.ErrNotSent, context.DeadlineExceeded)),
		)
	}
	for range 12 {
		require.Error(t, send(b))
	}
	assert.Equal(t, Closed, b.State())
	// ... and they do not break a run of failures either way.
	inner.script(transient(), transient(), transient(), transient(), &gateway.RateLimitedError{Backend: "llm-a"}, transient())
	for range 6 {
		_ = send(b)
	}
	assert.Equal(t, Open, b.State())
}

// Faults read into a condition: rate and quota windows and conditions a
// person ends are the backend's condition, never breaker failures (an
// open circuit would hide "add credits" behind "circuit open"); a
// transient fault is one.
func TestConditionFaultsAndTheBreaker(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	b, inner, _, _ := setup(t)
	for range 4 {
		inner.script(
			gateway.RateFault("llm-a", "tokens", "HTTP 429", now, now.Add(time.Second)),
			gateway.QuotaFault("llm-a", "day", "free-models-per-day", now, now.Add(time.Hour)),
			gateway.PersonFault("llm-a", gateway.StateCredits, "HTTP 402", now.Add(30*time.Minute)),
			gateway.PersonFault("llm-a", gateway.StateCredentials, "HTTP 401", now.Add(30*time.Minute)),
		)
	}
	for range 16 {
		require.Error(t, send(b))
	}
	assert.Equal(t, Closed, b.State())
	for range 5 {
		inner.script(gateway.TransientFault("llm-a", "HTTP 529", now, nil))
	}
	for range 5 {
		_ = send(b)
	}
	assert.Equal(t, Open, b.State())
}

func TestHalfOpenAfterRecoveryTimeoutThenClosesAfterThreeSuccesses(t *testing.T) {
	b, inner, clock, changes := setup(t)
	for range 5 {
		inner.script(transient())
		_ = send(b)
	}
	expectChange(t, changes, Closed, Open)

	clock.Advance(299 * time.Second)
	assert.Equal(t, Open, b.State())
	require.ErrorIs(t, send(b), gateway.ErrUnavailable)

	clock.Advance(time.Second)
	assert.Equal(t, HalfOpen, b.State())
	expectChange(t, changes, Open, HalfOpen)

	require.NoError(t, send(b))
	require.NoError(t, send(b))
	assert.Equal(t, HalfOpen, b.State())
	require.NoError(t, send(b))
	assert.Equal(t, Closed, b.State())
	expectChange(t, changes, HalfOpen, Closed)
}

func TestHalfOpenFailureReopensForAnotherTimeout(t *testing.T) {
	b, inner, clock, changes := setup(t)
	for range 5 {
		inner.script(transient())
		_ = send(b)
	}
	clock.Advance(300 * time.Second)
	require.NoError(t, send(b))
	inner.script(transient())
	require.ErrorIs(t, send(b), gateway.ErrTransient)
	assert.Equal(t, Open, b.State())
	expectChange(t, changes, Closed, Open)
	expectChange(t, changes, Open, HalfOpen)
	expectChange(t, changes, HalfOpen, Open)

	clock.Advance(299 * time.Second)
	assert.Equal(t, Open, b.State())
	clock.Advance(time.Second)
	assert.Equal(t, HalfOpen, b.State())
	assert.EqualValues(t, 2, b.Opened())
}

// Half-open lets exactly three probes through at once.
func TestHalfOpenAdmitsThreeProbes(t *testing.T) {
	b, inner, clock, _ := setup(t)
	for range 5 {
		inner.script(transient())
		_ = send(b)
	}
	clock.Advance(300 * time.Second)

	release := make(chan struct{})
	inner.mu.Lock()
	inner.block, inner.in = release, make(chan struct{}, 3)
	inner.mu.Unlock()
	errs := make(chan error, 3)
	for range 3 {
		go func() { errs <- send(b) }()
	}
	for range 3 {
		select {
		case <-inner.in:
		case <-time.After(5 * time.Second):
			t.Fatal("probe not admitted")
		}
	}
	err := send(b)
	require.ErrorIs(t, err, gateway.ErrUnavailable)
	assert.Contains(t, err.Error(), "half-open")
	// What the refused request's task sees: the circuit on trial, not a
	// backend that went down.
	c := b.Condition()
	assert.Equal(t, gateway.StateCircuitOpen, c.State)
	assert.Equal(t, clock.Now().Add(probeWait), c.Until)
	close(release)
	for range 3 {
		require.NoError(t, <-errs)
	}
	assert.Equal(t, Closed, b.State())
	assert.Equal(t, gateway.StateReady, b.Condition().State)
}

func TestPassesThroughNameUnwrapAndErrors(t *testing.T) {
	b, inner, _, _ := setup(t)
	assert.Equal(t, "llm-a", b.Name())
	assert.Same(t, inner, b.Unwrap())
	perm := gateway.Permanent("llm-a", "HTTP 400")
	inner.script(perm)
	assert.True(t, errors.Is(send(b), gateway.ErrPermanent))
	require.NoError(t, b.Health(context.Background()))
	require.NoError(t, b.Close())
}

// The half-open transition is reported when the open period ends on our
// clock, not when a call that was in flight at the trip returns.
func TestHalfOpenReportedWhenItHappens(t *testing.T) {
	b, inner, clock, changes := setup(t)
	ctx := context.Background()
	slowBlock := make(chan struct{})
	inner.mu.Lock()
	inner.block, inner.in = slowBlock, make(chan struct{}, 10)
	inner.mu.Unlock()
	// One slow call in flight, then five failures trip the circuit.
	slow := make(chan error, 1)
	go func() { _, err := b.Send(ctx, gateway.Request{}); slow <- err }()
	<-inner.in
	inner.mu.Lock()
	inner.block = nil
	inner.mu.Unlock()
	inner.script(gateway.Transient("llm-a", "503"), gateway.Transient("llm-a", "503"), gateway.Transient("llm-a", "503"),
		gateway.Transient("llm-a", "503"), gateway.Transient("llm-a", "503"))
	for range 5 {
		_, err := b.Send(ctx, gateway.Request{})
		require.Error(t, err)
		<-inner.in
	}
	require.Equal(t, transition{Closed, Open}, <-changes)
	c := b.Condition()
	assert.Equal(t, gateway.StateCircuitOpen, c.State)
	assert.Equal(t, clock.Now().Add(300*time.Second), c.Until)

	// The slow call now succeeds, and its return makes gobreaker go
	// half-open at once: nothing may be reported yet.
	close(slowBlock)
	require.NoError(t, <-slow)
	assert.Equal(t, Open, b.State())
	select {
	case tr := <-changes:
		t.Fatalf("reported %v while the circuit is open for 300 s", tr)
	default:
	}
	clock.Advance(300 * time.Second)
	_, err := b.Send(ctx, gateway.Request{})
	require.NoError(t, err)
	require.Equal(t, transition{Open, HalfOpen}, <-changes)
	assert.Equal(t, gateway.StateReady, b.Condition().State)
}

// Config.Turn comes before the circuit: of two calls to a half-open
// circuit with one probe, the one its turn lets go first is the probe,
// whichever arrived first.
func TestTurnDecidesWhichCallIsTheProbe(t *testing.T) {
	inner := &scripted{}
	clock := clockwork.NewFakeClock()
	gates := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}
	arrived := make(chan string, 2)
	b := Wrap(inner, Config{FailureThreshold: 1, RecoveryTimeout: time.Minute, HalfOpenRequests: 1, Clock: clock,
		Turn: func(ctx context.Context, req gateway.Request) error {
			if g, ok := gates[req.TaskID]; ok {
				arrived <- req.TaskID
				select {
				case <-g:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		}})
	inner.script(transient())
	require.ErrorIs(t, send(b), gateway.ErrTransient)
	require.Equal(t, Open, b.State())
	clock.Advance(time.Minute)

	release := make(chan struct{})
	inner.mu.Lock()
	inner.block, inner.in = release, make(chan struct{}, 2)
	inner.mu.Unlock()
	errs := map[string]chan error{"a": make(chan error, 1), "b": make(chan error, 1)}
	for _, task := range []string{"a", "b"} {
		go func() {
			_, err := b.Send(context.Background(), gateway.Request{TaskID: task, Prompt: "p"})
			errs[task] <- err
		}()
		select { // a reaches the breaker first
		case got := <-arrived:
			require.Equal(t, task, got)
		case err := <-errs[task]:
			t.Fatalf("%s: done before its turn: %v", task, err)
		case <-time.After(5 * time.Second):
			t.Fatalf("%s never waited for its turn", task)
		}
	}
	close(gates["b"])
	select {
	case <-inner.in:
	case <-time.After(5 * time.Second):
		t.Fatal("b's probe did not reach the backend")
	}
	close(gates["a"])
	err := <-errs["a"]
	require.ErrorIs(t, err, gateway.ErrUnavailable)
	assert.Contains(t, err.Error(), "half-open")
	close(release)
	require.NoError(t, <-errs["b"])
	assert.Equal(t, 2, inner.count(), "the trip and b's probe")
}

// A call that gives up waiting for its turn never reaches the circuit:
// not a failure, nothing sent.
func TestTurnGivenUpIsNotAFailure(t *testing.T) {
	inner := &scripted{}
	b := Wrap(inner, Config{FailureThreshold: 1, Clock: clockwork.NewFakeClock(),
		Turn: func(ctx context.Context, _ gateway.Request) error {
			<-ctx.Done()
			return ctx.Err()
		}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 3 {
		_, err := b.Send(ctx, gateway.Request{TaskID: "t", Prompt: "p"})
		require.ErrorIs(t, err, context.Canceled)
		assert.Contains(t, err.Error(), "llm-a: waiting for its turn")
	}
	assert.Zero(t, inner.count())
	assert.Equal(t, Closed, b.State())
}
