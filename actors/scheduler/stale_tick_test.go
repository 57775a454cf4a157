package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A tick that waited in the mailbox behind later events is not the clock
// going back: it re-keys nothing and the scheduler's clock stays at the
// latest event, so a task due by then can be picked. A tick more than
// StaleTick behind is the clock going back: everything is re-keyed at it.
func TestStaleTickKeepsTheClock(t *testing.T) {
	s := New(Config{})
	a, b := TaskKey("explorer", "exploration", "a"), TaskKey("explorer", "exploration", "b")
	submit(t, s, task("explorer", "exploration", "a"), t0)
	submit(t, s, task("explorer", "exploration", "b"), t0)
	got, ok := s.Pick([]string{"api"}, t0)
	require.True(t, ok)
	require.Equal(t, a, got.Id)
	apply(t, s, evStarted(a, "api", t0.Add(time.Millisecond)))
	// a is retried from t0+8ms; b starts at t0+10ms, the latest event.
	apply(t, s, evRetry(a, "again", t0.Add(8*time.Millisecond), t0.Add(2*time.Millisecond)))
	got, ok = s.Pick([]string{"api"}, t0.Add(3*time.Millisecond))
	require.True(t, ok)
	require.Equal(t, b, got.Id)
	apply(t, s, evStarted(b, "api", t0.Add(10*time.Millisecond)))

	s.Recompute(t0.Add(5*time.Millisecond), Env{}) // sent before b's start was applied
	require.Equal(t, uint64(0), s.rekeyAlls, "a stale tick re-keyed the whole queue")
	require.Equal(t, t0.Add(10*time.Millisecond).UnixNano(), s.at, "the clock went back for a stale tick")
	got, ok = s.Pick([]string{"api"}, t0.Add(5*time.Millisecond))
	require.True(t, ok, "a is due by the scheduler's clock")
	require.Equal(t, a, got.Id)
	s.Unpick(a)

	back := t0.Add(10*time.Millisecond - StaleTick - time.Millisecond)
	s.Recompute(back, Env{})
	require.Equal(t, uint64(1), s.rekeyAlls, "the clock went back: everything is re-keyed once")
	require.Equal(t, back.UnixNano(), s.at)
	_, ok = s.Pick([]string{"api"}, back)
	require.False(t, ok, "a is not due yet at the earlier time")
}
