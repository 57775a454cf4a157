package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"fano/pb"
)

// A resume decided from a state that a later event changed before it was
// applied changes nothing: the stuck-task check pauses a task at once
// (the executor's pause), then writes its own pause with a later
// not_before; a tick that read the first pause decides a resume, which
// lands after the second. The task must stay paused until not_before.
func TestResumeDecidedBeforeALaterPauseIsStale(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	s := New(Config{})
	tk := task("m", "t", "a")
	submit(t, s, tk, t0)
	apply(t, s, evStarted(tk.Id, "x", t0))
	apply(t, s, evPaused(tk.Id, "preempted", time.Time{}, t0.Add(time.Second)))

	resumes := s.DecideResume(t0.Add(2 * time.Second))
	require.Len(t, resumes, 1, "the immediate pause is due at once")
	// The follow-up is applied before the resume that was decided earlier.
	apply(t, s, evPaused(tk.Id, "stuck: running for 1h1m", t0.Add(time.Minute), t0.Add(2*time.Second)))
	apply(t, s, resumes[0])

	got, ok := s.Task(tk.Id)
	require.True(t, ok)
	require.Equal(t, pb.TaskState_TASK_STATE_PAUSED, got.State)
	require.Equal(t, "stuck: running for 1h1m", got.PauseReason)
	checkInvariants(t, s)

	// Due, it is resumed as usual.
	for _, e := range s.DecideResume(t0.Add(time.Minute)) {
		apply(t, s, e)
	}
	got, _ = s.Task(tk.Id)
	require.Equal(t, pb.TaskState_TASK_STATE_PENDING, got.State)
	checkInvariants(t, s)
}
