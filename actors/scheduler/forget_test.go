package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Finished tasks past their retention leave memory (oldest first); their
// keys stay taken, so the same work is not queued again.
func TestDecideForgetTakesOldFinishedTasks(t *testing.T) {
	s := New(Config{})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, subj := range []string{"a", "b", "c"} {
		tk := task("explorer", "exploration", subj)
		submit(t, s, tk, t0)
		apply(t, s, evStarted(tk.Id, "chatgpt", t0))
		if i < 2 {
			apply(t, s, evCompleted(tk.Id, t0.Add(time.Duration(i)*time.Hour)))
		}
	}
	tasks, evs := s.DecideForget(t0.Add(2*time.Hour), 90*time.Minute, 10)
	require.Len(t, tasks, 1, "only a finished more than 90 minutes ago; c still runs")
	require.Equal(t, "explorer/exploration/a", tasks[0].Id)
	for _, e := range evs {
		apply(t, s, e)
	}
	_, ok := s.Task("explorer/exploration/a")
	require.False(t, ok)
	_, err := s.DecideSubmit(task("explorer", "exploration", "a"), t0.Add(3*time.Hour))
	require.Error(t, err, "a forgotten key is still taken")
	checkInvariants(t, s)

	tasks, _ = s.DecideForget(t0.Add(10*time.Hour), 0, 10)
	require.Empty(t, tasks, "retention 0: never forget")
}
