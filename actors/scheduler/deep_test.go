package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A deep-mode task is offered only the backends whose deep budget is not
// spent; work that needs no deep mode is not held up behind it.
func TestPickForKeepsDeepTasksToDeepBackends(t *testing.T) {
	s := New(Config{})
	now := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	deep := task("explorer", "synthesis", "deep")
	deep.RequiresDeepMode = true
	submit(t, s, deep, now)
	plain := task("explorer", "exploration", "plain")
	submit(t, s, plain, now.Add(time.Second))
	s.Recompute(now.Add(2*time.Second), Env{})

	// synthesis (60) outranks exploration (50), but gemini has no deep budget left.
	got, ok := s.PickFor([]string{"gemini"}, nil, now.Add(2*time.Second))
	require.True(t, ok)
	require.Equal(t, plain.Id, got.Id)

	got, ok = s.PickFor([]string{"chatgpt"}, []string{"chatgpt"}, now.Add(2*time.Second))
	require.True(t, ok)
	require.Equal(t, deep.Id, got.Id)
	checkInvariants(t, s)
}
