package scheduler

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/pb"
)

func submitErr(t *testing.T, err error, code string) *SubmitError {
	t.Helper()
	var se *SubmitError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, code, se.Code, se.Error())
	return se
}

func TestDecideSubmitFills(t *testing.T) {
	s := New(Config{})
	in := task("explorer", "synthesis", "t1")
	in.State = pb.TaskState_TASK_STATE_COMPLETED
	in.Context = map[string]string{"seed": "x"}
	e, err := s.DecideSubmit(in, t0)
	require.NoError(t, err)
	assert.Equal(t, pb.TaskState_TASK_STATE_COMPLETED, in.State, "input untouched")
	assert.Equal(t, t0.UnixNano(), e.At)
	got := e.GetTaskSubmitted().GetTask()
	assert.Equal(t, pb.TaskState_TASK_STATE_PENDING, got.State)
	assert.Equal(t, t0.UnixNano(), got.CreatedAt)
	assert.Equal(t, t0.UnixNano(), got.UpdatedAt)
	assert.Equal(t, int32(50), got.MessageLimit)
	assert.Equal(t, int32(60), got.BasePriority)
	assert.Equal(t, "x", got.Context["seed"])
	assert.Equal(t, 0, s.Len(), "decide does not apply")
	require.NoError(t, s.Apply(e))
	assert.Equal(t, 1, s.Pending())
}

func TestDecideSubmitInvalid(t *testing.T) {
	s := New(Config{})
	bad := []*pb.Task{
		nil,
		{Id: "/x/y", TaskType: "x", Subject: "y"},
		{Id: "explorer//y", Module: "explorer", Subject: "y"},
		{Id: "explorer/exploration/other", Module: "explorer", TaskType: "exploration", Subject: "y"},
		{Id: "", Module: "explorer", TaskType: "exploration", Subject: "y"},
		{Id: "explorer/exploration/y", Module: "explorer", TaskType: "exploration", Subject: "y", LlmPreference: "a", LlmExclude: []string{"a"}},
	}
	for _, tk := range bad {
		_, err := s.DecideSubmit(tk, t0)
		submitErr(t, err, "invalid")
	}
	assert.Zero(t, s.Pending())
}

func TestDecideSubmitDuplicates(t *testing.T) {
	s := New(Config{})
	tk := task("explorer", "insight_review", "42")
	e := submit(t, s, tk, t0)

	_, err := s.DecideSubmit(tk, t0)
	se := submitErr(t, err, "duplicate")
	assert.Equal(t, tk.Id, se.TaskID)
	assert.Contains(t, err.Error(), tk.Id)

	// Applying the same submit again (replay, redelivery) is harmless.
	again := e
	require.NoError(t, s.Apply(again))
	assert.Equal(t, 1, s.Len())

	// Decided but not yet applied.
	other := task("explorer", "insight_review", "43")
	_, err = s.DecideSubmit(other, t0)
	require.NoError(t, err)
	_, err = s.DecideSubmit(other, t0)
	submitErr(t, err, "duplicate")
	s.Abandon(other.Id)
	_, err = s.DecideSubmit(other, t0)
	require.NoError(t, err, "abandoned decisions release the key")

	// Finished, then forgotten: still refused, and a replayed submit is ignored.
	apply(t, s, evStarted(tk.Id, "a", t0))
	apply(t, s, evCompleted(tk.Id, t0.Add(time.Minute)))
	_, err = s.DecideSubmit(tk, t0)
	submitErr(t, err, "duplicate")
	apply(t, s, evForgotten(tk.Id, t0.Add(time.Hour)))
	_, ok := s.Task(tk.Id)
	assert.False(t, ok)
	_, err = s.DecideSubmit(tk, t0.Add(2*time.Hour))
	submitErr(t, err, "duplicate")
	require.NoError(t, s.Apply(e))
	_, ok = s.Task(tk.Id)
	assert.False(t, ok, "a forgotten task does not come back")
	assert.Equal(t, 1, s.Forgotten())
}

func TestDecideSubmitFull(t *testing.T) {
	s := New(Config{MaxPending: 3})
	submit(t, s, task("explorer", "exploration", "1"), t0)
	submit(t, s, task("explorer", "exploration", "2"), t0)
	third, err := s.DecideSubmit(task("explorer", "exploration", "3"), t0)
	require.NoError(t, err)

	_, err = s.DecideSubmit(task("explorer", "exploration", "4"), t0)
	se := submitErr(t, err, "full")
	assert.Contains(t, se.Reason, "max_pending")
	assert.Contains(t, se.Reason, "3")

	require.NoError(t, s.Apply(third))
	_, err = s.DecideSubmit(task("explorer", "exploration", "4"), t0)
	submitErr(t, err, "full")

	// A paused task still counts; a running one does not.
	apply(t, s, evStarted("explorer/exploration/1", "a", t0))
	assert.Equal(t, 2, s.Pending())
	apply(t, s, evPaused("explorer/exploration/1", "preempted", time.Time{}, t0))
	assert.Equal(t, 3, s.Pending())
	_, err = s.DecideSubmit(task("explorer", "exploration", "4"), t0)
	submitErr(t, err, "full")
	apply(t, s, evStarted("explorer/exploration/2", "a", t0))
	apply(t, s, evCompleted("explorer/exploration/2", t0))
	_, err = s.DecideSubmit(task("explorer", "exploration", "4"), t0)
	require.NoError(t, err)
}

func TestDecideCancel(t *testing.T) {
	s := New(Config{})
	w := task("explorer", "exploration", "w")
	r := task("explorer", "exploration", "r")
	d := task("explorer", "exploration", "d")
	for _, tk := range []*pb.Task{w, r, d} {
		submit(t, s, tk, t0)
	}
	apply(t, s, evStarted(r.Id, "a", t0))
	apply(t, s, evStarted(d.Id, "a", t0))
	apply(t, s, evCompleted(d.Id, t0))

	_, err := s.DecideCancel("explorer/exploration/none", "x", t0)
	var nf *NotFoundError
	require.ErrorAs(t, err, &nf)
	assert.Equal(t, "explorer/exploration/none", nf.TaskID)

	_, err = s.DecideCancel(r.Id, "x", t0)
	require.ErrorIs(t, err, ErrRunning)
	assert.Contains(t, err.Error(), r.Id)

	_, err = s.DecideCancel(d.Id, "x", t0)
	require.ErrorIs(t, err, ErrFinished)
	assert.Contains(t, err.Error(), "already finished")
	apply(t, s, evForgotten(d.Id, t0))
	_, err = s.DecideCancel(d.Id, "x", t0)
	require.ErrorIs(t, err, ErrFinished)

	e, err := s.DecideCancel(w.Id, "operator asked", t0.Add(time.Second))
	require.NoError(t, err)
	assert.Equal(t, pb.TaskState_TASK_STATE_PENDING, s.tasks[w.Id].t.State, "decide changes nothing")
	apply(t, s, e)
	got, _ := s.Task(w.Id)
	assert.Equal(t, pb.TaskState_TASK_STATE_CANCELLED, got.State)
	assert.Equal(t, t0.Add(time.Second).UnixNano(), got.UpdatedAt)
	_, ok := s.Pick([]string{"a"}, t0.Add(time.Second))
	assert.False(t, ok)
	assert.Zero(t, s.Pending())
	checkInvariants(t, s)
}

func TestDecideResume(t *testing.T) {
	s := New(Config{})
	a := task("explorer", "exploration", "a")
	b := task("explorer", "exploration", "b")
	c := task("explorer", "exploration", "c")
	for _, tk := range []*pb.Task{a, b, c} {
		submit(t, s, tk, t0)
		apply(t, s, evStarted(tk.Id, "x", t0))
	}
	apply(t, s, evPaused(a.Id, "shutdown", time.Time{}, t0))
	apply(t, s, evPaused(b.Id, "rate_limited", t0.Add(time.Hour), t0))
	apply(t, s, evPaused(c.Id, PauseOperator, time.Time{}, t0))

	evs := s.DecideResume(t0.Add(time.Minute))
	require.Len(t, evs, 1)
	assert.Equal(t, a.Id, evs[0].GetTaskResumed().GetTaskId())
	evs = s.DecideResume(t0.Add(time.Hour))
	require.Len(t, evs, 2)
	assert.Equal(t, a.Id, evs[0].GetTaskResumed().GetTaskId())
	assert.Equal(t, b.Id, evs[1].GetTaskResumed().GetTaskId())
	for _, e := range evs {
		apply(t, s, e)
	}
	got, _ := s.Task(b.Id)
	assert.Equal(t, pb.TaskState_TASK_STATE_PENDING, got.State)
	assert.Empty(t, got.PauseReason)
	assert.Empty(t, s.DecideResume(t0.Add(2*time.Hour)), "operator pauses stay")
	checkInvariants(t, s)
	n := 0
	for {
		if _, ok := s.Pick([]string{"x"}, t0.Add(time.Hour)); !ok {
			break
		}
		n++
	}
	assert.Equal(t, 2, n)
}

func TestErrorsNameTheTask(t *testing.T) {
	s := New(Config{})
	err := s.Apply(evCompleted("explorer/exploration/ghost", t0))
	var ut *UnknownTaskError
	require.True(t, errors.As(err, &ut))
	assert.Equal(t, "explorer/exploration/ghost", ut.TaskID)
	assert.Contains(t, err.Error(), "explorer/exploration/ghost")
	assert.Contains(t, err.Error(), "task_completed")
}
