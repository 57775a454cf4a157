package gateway

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Kind routes a Fault, wrapped or not, by its class: a rate or quota
// window "rate_limited", a refused key "credentials", another person's
// condition "unavailable", a passing fault "transient".
func TestKindRoutesAFaultByItsClass(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		f    *Fault
		kind string
		is   error
	}{
		{RateFault("a", "tokens", "429", now, now.Add(time.Second)), "rate_limited", nil},
		{QuotaFault("a", "day", "per day", now, now.Add(time.Hour)), "rate_limited", nil},
		{PersonFault("a", StateCredentials, "401", now), "credentials", ErrCredentials},
		{PersonFault("a", StateCredits, "402", now), "unavailable", ErrUnavailable},
		{PersonFault("a", StateLogin, "login wall", now), "unavailable", ErrUnavailable},
		{PersonFault("a", StateChallenge, "Just a moment", now), "unavailable", ErrUnavailable},
		{TransientFault("a", "529", now, nil), "transient", ErrTransient},
		{TransientFault("a", "cut", now, ErrCut), "transient", ErrCut},
	}
	for _, c := range cases {
		t.Run(string(c.f.Condition.State), func(t *testing.T) {
			wrapped := fmt.Errorf("task t1: %w", c.f)
			assert.Equal(t, c.kind, Kind(c.f))
			assert.Equal(t, c.kind, Kind(wrapped))
			if c.is != nil {
				assert.ErrorIs(t, wrapped, c.is)
			}
			got, ok := ConditionOf(wrapped)
			require.True(t, ok)
			assert.Equal(t, c.f.Condition, got)
			assert.False(t, errors.Is(wrapped, ErrNotSent))
		})
	}
}

// A rate or quota fault reads as a *RateLimitedError for the readers that
// still ask for one (the wire, the breaker): same end, Cap for a quota.
func TestRateFaultReadsAsRateLimitedError(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	f := QuotaFault("a", "day", "free-models-per-day", now, now.Add(5*time.Hour))
	f.NotSent = true
	var rl *RateLimitedError
	require.True(t, errors.As(fmt.Errorf("x: %w", f), &rl))
	assert.Equal(t, "a", rl.Backend)
	assert.True(t, rl.Cap)
	assert.True(t, rl.NotSent)
	assert.Equal(t, 5*time.Hour, rl.RetryAfter)
	assert.Equal(t, now.Add(5*time.Hour), rl.Until)
	assert.True(t, errors.Is(f, ErrNotSent))

	require.False(t, errors.As(TransientFault("a", "500", now, nil), &rl), "a transient fault is no rate limit")
	require.False(t, errors.As(PersonFault("a", StateCredits, "402", now), &rl))
}

// A cancellation stays a cancellation whatever wraps it.
func TestKindCancelledFirst(t *testing.T) {
	assert.Equal(t, "cancelled", Kind(fmt.Errorf("limiter: %w: %w", ErrNotSent, context.Canceled)))
}
