package ratelimit

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/gateway"
)

func tokenHeaders(limit, remaining string, reset string) http.Header {
	h := http.Header{}
	h.Set(HeaderLimit, "10000") // requests never bind here
	h.Set(HeaderLimitTokens, limit)
	h.Set(HeaderRemainingTokens, remaining)
	h.Set(HeaderResetTokens, reset)
	return h
}

// Once the token budget is learned, a request waits until the last
// window has room for its tokens; before that tokens do not pace.
func TestTokensPaceOnceLearned(t *testing.T) {
	clock := clockwork.NewFakeClock()
	l := New(Config{Name: "m", InitialRPM: 1 << 20}, clock)
	ctx := context.Background()
	for range 5 {
		clock.Advance(time.Second)     // past the request pacing
		_, err := l.Acquire(ctx, 5000) // not learned: no token pacing
		require.NoError(t, err)
	}
	l.Observe(tokenHeaders("10000", "9000", "6s"))
	assert.Equal(t, 10000, l.Stats().TokenLimit)
	// 25,000 estimated tokens already in the window: the next 5,000 wait
	// until enough grants leave it: with the headroom the window holds
	// 9,800, so until the last of the five leaves, four seconds after the
	// first.
	clock.Advance(time.Second)
	done := make(chan time.Time, 1)
	first := clock.Now().Add(-5 * time.Second)
	go func() {
		_, err := l.Acquire(ctx, 5000)
		assert.NoError(t, err)
		done <- clock.Now()
	}()
	require.NoError(t, clock.BlockUntilContext(ctx, 1))
	select {
	case <-done:
		t.Fatal("granted although the token window is full")
	default:
	}
	clock.Advance(first.Add(4*time.Second + l.guard).Sub(clock.Now()))
	select {
	case at := <-done:
		assert.Equal(t, first.Add(4*time.Second+l.guard), at)
	case <-time.After(deadline):
		t.Fatal("never granted")
	}
}

// Settle replaces a grant's estimate with what the server counted, once,
// and learns the ratio for the next estimates.
func TestSettleReplacesTheEstimateOnce(t *testing.T) {
	clock := clockwork.NewFakeClock()
	l := New(Config{Name: "m", InitialRPM: 1 << 20}, clock)
	l.Observe(tokenHeaders("100000", "100000", "1s"))
	g, err := l.Acquire(context.Background(), 1000)
	require.NoError(t, err)
	assert.Equal(t, 1000, l.Stats().TokensInWindow)
	l.Settle(g, 1200)
	assert.Equal(t, 1200, l.Stats().TokensInWindow)
	l.Settle(g, 1200)
	assert.Equal(t, 1200, l.Stats().TokensInWindow, "settled once, never added twice")
	assert.InDelta(t, 1+0.2/8, l.Stats().TokenScale, 1e-9)
	clock.Advance(time.Second)
	_, err = l.Acquire(context.Background(), 1000)
	require.NoError(t, err)
	assert.Equal(t, 1200+1025, l.Stats().TokensInWindow, "the next estimate scaled by what was learned")
}

// A waiter cancelled in the queue counts no tokens, and its error is the
// executor's ErrNotSent.
func TestQueuedWaiterCancelledCountsNoTokens(t *testing.T) {
	clock := clockwork.NewFakeClock()
	l := New(Config{Name: "m", InitialRPM: 1}, clock)
	l.Observe(tokenHeaders("100000", "100000", "1s"))
	_, err := l.Acquire(context.Background(), 1000)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := l.Acquire(ctx, 3000); errc <- err }()
	require.NoError(t, clock.BlockUntilContext(context.Background(), 1))
	cancel()
	err = <-errc
	require.ErrorIs(t, err, gateway.ErrNotSent, "the executor's ErrNotSent")
	assert.Equal(t, 1000, l.Stats().TokensInWindow)
}

// remaining-tokens 0 pauses the model until reset-tokens, and a pause
// too long to wait in the queue names its condition.
func TestSpentTokensPauseAndNameTheWindow(t *testing.T) {
	clock := clockwork.NewFakeClock()
	l := New(Config{Name: "m", InitialRPM: 1 << 20}, clock)
	l.ObserveSince(tokenHeaders("100000", "0", "1.5s"), clock.Now())
	assert.Equal(t, clock.Now().Add(1500*time.Millisecond), l.Stats().PausedUntil)

	l.PauseFor(clock.Now().Add(10*time.Hour), gateway.StateCapped, "day")
	_, err := l.Acquire(context.Background(), 10)
	var pe *PausedError
	require.True(t, errors.As(err, &pe))
	assert.Equal(t, gateway.StateCapped, pe.State)
	assert.Equal(t, "day", pe.Window)
	require.ErrorIs(t, err, gateway.ErrNotSent)
}

// Headers are hints: -1 and garbage teach nothing.
func TestBadTokenHeadersAreIgnored(t *testing.T) {
	clock := clockwork.NewFakeClock()
	l := New(Config{Name: "m"}, clock)
	l.Observe(tokenHeaders("-1", "garbage", "-1"))
	l.Observe(tokenHeaders("many", "-1", "soon"))
	s := l.Stats()
	assert.Zero(t, s.TokenLimit)
	assert.Equal(t, -1, s.TokenRemaining)
	assert.True(t, s.PausedUntil.IsZero())
}

// A budget learned before a restart paces from the first request: the
// second request waits for room, with no header seen in this run.
func TestLearnTokensPacesFromTheStart(t *testing.T) {
	clock := clockwork.NewFakeClock()
	l := New(Config{Name: "m", InitialRPM: 1 << 20}, clock)
	l.LearnTokens(20000, 2*time.Minute) // 10,000 a minute, ours
	limit, window := l.LearnedTokens()
	assert.Equal(t, 10000, limit)
	assert.Equal(t, time.Minute, window)
	_, err := l.Acquire(context.Background(), 6000)
	require.NoError(t, err)
	clock.Advance(time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { _, err := l.Acquire(ctx, 6000); errc <- err }()
	require.NoError(t, clock.BlockUntilContext(context.Background(), 1))
	assert.Equal(t, 1, l.Stats().Waiting, "no room for 6,000 more in 9,800")
	clock.Advance(l.guard)
	require.NoError(t, <-errc)
}
