package scheduler

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"fano/pb"
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
	tasks, evs := s.DecideForget(t0.Add(2*time.Hour), 90*time.Minute, 0, 10)
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

	tasks, _ = s.DecideForget(t0.Add(10*time.Hour), 0, 0, 10)
	require.Empty(t, tasks, "retention 0 and no bound: never forget")
}

// With more finished tasks in memory than it keeps, the oldest leave it
// (whatever the retention), in batched events; counts, the taken keys and
// a snapshot still know them.
func TestDecideForgetKeepsTheNewestFinished(t *testing.T) {
	s := New(Config{})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const n = 2500
	ids := make([]string, n)
	for i := range n {
		tk := task("pipeline", "pipeline_llm", fmt.Sprintf("item-%04d", i))
		ids[i] = tk.Id
		submit(t, s, tk, t0)
		apply(t, s, evStarted(tk.Id, "api", t0))
		if i%10 == 9 {
			apply(t, s, &pb.Event{At: t0.Add(time.Duration(i) * time.Second).UnixNano(), Body: &pb.Event_TaskFailed{TaskFailed: &pb.TaskFailed{TaskId: tk.Id, Error: "no"}}})
		} else {
			apply(t, s, evCompleted(tk.Id, t0.Add(time.Duration(i)*time.Second)))
		}
	}
	running := task("pipeline", "pipeline_llm", "still-running")
	submit(t, s, running, t0)
	apply(t, s, evStarted(running.Id, "api", t0))
	require.Equal(t, n, s.FinishedInMemory())
	before := s.Counts()

	tasks, evs := s.DecideForget(t0.Add(time.Hour), 0, 500, 100000)
	require.Len(t, tasks, n-500, "all but the 500 newest finished")
	require.Equal(t, ids[0], tasks[0].Id, "oldest first")
	require.Len(t, evs, 2, "%d ids in events of at most %d", n-500, forgetBatch)
	require.Len(t, evs[0].GetTaskForgotten().IDs(), forgetBatch)
	for _, e := range evs {
		apply(t, s, e)
	}
	require.Equal(t, 500, s.FinishedInMemory())
	require.Equal(t, 500+1, s.Len(), "500 finished and the running one")
	require.Equal(t, before, s.Counts(), "forgotten tasks still count in their final state")
	_, ok := s.Task(ids[0])
	require.False(t, ok)
	_, ok = s.Task(ids[n-1])
	require.True(t, ok, "the newest stay")
	_, err := s.DecideSubmit(task("pipeline", "pipeline_llm", "item-0000"), t0.Add(2*time.Hour))
	require.Error(t, err, "a forgotten key is still taken")
	_, err = s.DecideCancel(ids[1], "x", t0.Add(2*time.Hour))
	require.ErrorIs(t, err, ErrFinished)
	// Applied again (a replay over a snapshot that has them): nothing changes.
	for _, e := range evs {
		require.Error(t, s.Apply(e), "the first id of a batch must be in memory")
	}
	require.Equal(t, before, s.Counts())
	checkInvariants(t, s)

	// A snapshot keeps the forgotten keys taken and their counts.
	data, err := s.SnapshotBytes()
	require.NoError(t, err)
	var snap pb.SchedulerSnapshot
	require.NoError(t, proto.Unmarshal(data, &snap))
	r, err := Restore(Config{}, &snap)
	require.NoError(t, err)
	require.Equal(t, before, r.Counts())
	require.Equal(t, 500, r.FinishedInMemory())
	_, err = r.DecideSubmit(task("pipeline", "pipeline_llm", "item-0001"), t0.Add(2*time.Hour))
	require.Error(t, err, "a forgotten key is still taken after a restore")
	_, err = r.DecideSubmit(task("pipeline", "pipeline_llm", "item-new"), t0.Add(2*time.Hour))
	require.NoError(t, err, "a new key is free")
	r2, err := Restore(Config{}, s.Snapshot())
	require.NoError(t, err)
	require.Equal(t, before, r2.Counts(), "Snapshot and SnapshotBytes hold the same")
}

// An older snapshot's tombstones (a Task with only an id) still keep their
// keys taken.
func TestRestoreReadsTombstones(t *testing.T) {
	tomb := &pb.Task{Id: "explorer/exploration/a"}
	r, err := Restore(Config{}, &pb.SchedulerSnapshot{Tasks: []*pb.Task{tomb}})
	require.NoError(t, err)
	_, err = r.DecideSubmit(task("explorer", "exploration", "a"), time.Now())
	require.Error(t, err)
}

// Starts of a module within a second share one entry: an hour of many
// starts a second stays a few thousand entries, with the same shares.
func TestStartsOfASecondShareAnEntry(t *testing.T) {
	s := New(Config{})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	for i := range 30000 {
		module := "pipeline"
		if i%3 == 0 {
			module = "explorer"
		}
		s.recordStart(module, t0+int64(i)*int64(time.Millisecond)/10) // 10,000 a second
	}
	require.Len(t, s.starts, 6, "two modules, three seconds")
	s.Recompute(time.Unix(0, t0+3*int64(time.Second)), Env{})
	require.Equal(t, 10000, s.shareCounts["explorer"])
	require.Equal(t, 20000, s.shareCounts["pipeline"])
	require.Equal(t, 30000, s.shareTotal)
	r, err := Restore(Config{}, s.Snapshot())
	require.NoError(t, err)
	require.Equal(t, s.starts, r.starts, "a snapshot keeps the counts")
}

// A pass is due once a minute for the retention, and for the bound only
// past a quarter over it, down to the bound.
func TestPlanForget(t *testing.T) {
	s := New(Config{})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	_, ok := s.PlanForget(t0, t0.Add(-30*time.Second), time.Hour, 0)
	require.False(t, ok, "the retention's pass is a minute after the last")
	p, ok := s.PlanForget(t0, t0.Add(-time.Minute), time.Hour, 0)
	require.True(t, ok)
	require.Equal(t, ForgetPass{Retention: time.Hour, Max: 5000}, p)

	s.finished = 125
	_, ok = s.PlanForget(t0, t0, 0, 100)
	require.False(t, ok, "a quarter over the bound is not yet past it")
	s.finished = 126
	p, ok = s.PlanForget(t0, t0, time.Hour, 100)
	require.True(t, ok)
	require.Equal(t, ForgetPass{Keep: 100, Max: 26}, p, "the bound only: the retention's pass waits for its minute")
}

// A TaskForgotten for a task that has not finished changes nothing.
func TestForgettingAnUnfinishedTaskIsRefused(t *testing.T) {
	s := New(Config{})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tk := task("explorer", "exploration", "a")
	submit(t, s, tk, t0)
	apply(t, s, evStarted(tk.Id, "chatgpt", t0))
	err := s.Apply(&pb.Event{At: t0.UnixNano(), Body: &pb.Event_TaskForgotten{TaskForgotten: &pb.TaskForgotten{TaskId: tk.Id}}})
	require.ErrorContains(t, err, "not finished")
	_, ok := s.Task(tk.Id)
	require.True(t, ok)
	require.Zero(t, s.Forgotten())
	checkInvariants(t, s)
}
