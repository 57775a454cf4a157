package scheduler

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"fano/pb"
)

func evArchived(id string, at time.Time) *pb.Event {
	return &pb.Event{At: at.UnixNano(), Body: &pb.Event_TaskCompleted{TaskCompleted: &pb.TaskCompleted{TaskId: id, Archived: true}}}
}

// runArchived submits a task, answers it once and completes it archived;
// it returns the task as ApplyToTask alone leaves it (what every read of
// the scheduler must give back).
func runArchived(t *testing.T, s *State, subject string, at time.Time) *pb.Task {
	t.Helper()
	tk := task("explorer", "exploration", subject)
	tk.Context = map[string]string{"question": "q " + subject}
	tk.LlmPreference = "chatgpt"
	evs := []*pb.Event{submit(t, s, tk, at)}
	for _, e := range []*pb.Event{
		evStarted(tk.Id, "chatgpt", at),
		evRequest(tk.Id, "chatgpt", "q", at.Add(time.Second)),
		evResponse(tk.Id, "chatgpt", "an answer", "https://chatgpt/c/1", at.Add(2*time.Second)),
		evArchived(tk.Id, at.Add(3*time.Second)),
	} {
		evs = append(evs, apply(t, s, e))
	}
	want := &pb.Task{}
	for _, e := range evs {
		require.NoError(t, ApplyToTask(want, e, s.cfg.MessageLimit))
	}
	return want
}

// A completed, archived task is kept encoded, and every read gives back
// exactly the task the events made.
func TestArchivedTaskKeptEncoded(t *testing.T) {
	s := New(Config{})
	want := runArchived(t, s, "a", t0)
	id := want.Id
	live := task("explorer", "exploration", "b")
	submit(t, s, live, t0)

	en := s.tasks[id]
	require.Nil(t, en.t, "a completed, archived task is kept encoded")
	require.NotEmpty(t, en.packed)
	require.NotNil(t, s.tasks[live.Id].t, "a waiting task is not")

	same := func(got *pb.Task, what string) {
		t.Helper()
		want := proto.Clone(want).(*pb.Task)
		want.Priority = got.Priority // the priority it had when it finished
		require.True(t, proto.Equal(want, got), "%s:\nwant %v\ngot  %v", what, want, got)
	}
	got, ok := s.Task(id)
	require.True(t, ok)
	same(got, "Task")
	require.True(t, got.Archived)
	require.Nil(t, got.Context, "the archive holds the context")
	got.Subject = "changed" // a copy: the scheduler's stays
	got, _ = s.Task(id)
	same(got, "Task after the caller changed its copy")

	all := s.Tasks(func(t *pb.Task) bool { return t.State == pb.TaskState_TASK_STATE_COMPLETED }, 0)
	require.Len(t, all, 1)
	same(all[0], "Tasks")
	seen := 0
	s.ForEach(func(t *pb.Task) {
		if t.Id == id {
			seen++
			same(t, "ForEach")
		}
	})
	require.Equal(t, 1, seen)
	require.Equal(t, 1, s.Counts()["explorer"][pb.TaskState_TASK_STATE_COMPLETED])

	_, err := s.DecideSubmit(task("explorer", "exploration", "a"), t0.Add(time.Hour))
	var se *SubmitError
	require.ErrorAs(t, err, &se)
	require.Equal(t, "duplicate", se.Code)
	require.Contains(t, se.Reason, "COMPLETED")
	_, err = s.DecideCancel(id, "no", t0.Add(time.Hour))
	require.True(t, errors.Is(err, ErrFinished), "%v", err)

	// A checkpoint and its restore give the same task, encoded again.
	snap := s.Snapshot()
	r, err := Restore(Config{}, snap)
	require.NoError(t, err)
	require.Nil(t, r.tasks[id].t)
	require.True(t, proto.Equal(snap, r.Snapshot()), "restore of a snapshot changed it")
	checkInvariants(t, s)
	checkInvariants(t, r)

	// Retention: it is chosen by when it finished, and its forgetting
	// event removes it.
	old, evs := s.DecideForget(t0.Add(2*time.Hour), time.Hour, 0, 10)
	require.Len(t, old, 1)
	require.True(t, proto.Equal(&pb.Task{Id: id, Module: "explorer", State: pb.TaskState_TASK_STATE_COMPLETED, Archived: true, CompletedAt: want.CompletedAt}, old[0]),
		"DecideForget: what the archive reference needs, read from the encoding: %v", old[0])
	require.NotNil(t, s.tasks[id].packed, "deciding leaves it encoded")
	apply(t, s, evs[0])
	_, ok = s.Task(id)
	require.False(t, ok)
	require.Equal(t, 1, s.Counts()["explorer"][pb.TaskState_TASK_STATE_COMPLETED], "still counted, as forgotten")
	require.Zero(t, s.FinishedInMemory())
	checkInvariants(t, s)
}

// An event for an encoded task (a completion replayed twice) is applied to
// it as to any task.
func TestEventOnEncodedTask(t *testing.T) {
	s := New(Config{})
	want := runArchived(t, s, "a", t0)
	again := evArchived(want.Id, t0.Add(time.Minute))
	apply(t, s, again)
	require.NoError(t, ApplyToTask(want, again, s.cfg.MessageLimit))
	got, _ := s.Task(want.Id)
	want.Priority = got.Priority
	require.True(t, proto.Equal(want, got), "want %v\ngot  %v", want, got)
	require.Nil(t, s.tasks[want.Id].t, "still encoded")
}

// A scan decodes encoded tasks into one scratch task: what it returns are
// still separate copies, each the right task.
func TestTasksScanOfEncodedTasks(t *testing.T) {
	s := New(Config{})
	want := map[string]*pb.Task{}
	for _, subj := range []string{"a", "b", "c", "d"} {
		tk := runArchived(t, s, subj, t0)
		want[tk.Id] = tk
	}
	seen := 0
	got := s.Tasks(func(tk *pb.Task) bool {
		seen++
		return tk.Subject != "b"
	}, 0)
	require.Equal(t, 4, seen)
	require.Len(t, got, 3)
	for i, tk := range got {
		w := proto.Clone(want[tk.Id]).(*pb.Task)
		w.Priority = tk.Priority
		require.True(t, proto.Equal(w, tk), "want %v\ngot  %v", w, tk)
		for _, other := range got[:i] {
			require.NotSame(t, other, tk)
		}
	}
	require.Equal(t, []string{"a", "c", "d"}, []string{got[0].Subject, got[1].Subject, got[2].Subject})
}

// SnapshotBytes is Snapshot encoded: live, packed and forgotten tasks and
// the recent starts, read back equal.
func TestSnapshotBytesIsSnapshotEncoded(t *testing.T) {
	s := New(Config{})
	for _, subj := range []string{"a", "b", "c"} {
		runArchived(t, s, subj, t0)
	}
	live := task("explorer", "exploration", "d")
	live.Context = map[string]string{"question": "q d"}
	submit(t, s, live, t0)
	apply(t, s, evStarted(live.Id, "chatgpt", t0))
	waiting := task("explorer", "exploration", "e")
	submit(t, s, waiting, t0)
	_, evs := s.DecideForget(t0.Add(time.Hour), time.Minute, 0, 1)
	require.Len(t, evs, 1)
	apply(t, s, evs[0])
	require.NotEmpty(t, s.forgotten, "a forgotten id's hash")
	require.NotEmpty(t, s.starts, "a recent start")

	want := s.Snapshot()
	data, err := s.SnapshotBytes()
	require.NoError(t, err)
	got := &pb.SchedulerSnapshot{}
	require.NoError(t, proto.Unmarshal(data, got))
	require.True(t, proto.Equal(want, got), "want %v\ngot  %v", want, got)
	require.Len(t, got.Tasks, 4, "the tasks in memory")
	require.Len(t, got.ForgottenHashes, 8, "one forgotten id's hash")
	checkInvariants(t, s)
}

// BenchmarkSnapshotBytes: a checkpoint of 20k finished (packed) tasks,
// beside the same snapshot built whole and then encoded (the baseline).
func BenchmarkSnapshotBytes(b *testing.B) {
	s := New(Config{})
	tt := &testing.T{}
	for i := range 20000 {
		runArchived(tt, s, fmt.Sprintf("s%05d", i), t0)
	}
	b.Run("whole-then-encoded", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := proto.Marshal(s.Snapshot()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("streamed", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := s.SnapshotBytes(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// packedHead reads the module and completed_at proto.Unmarshal would
// decode, whatever else the encoding holds, a field given twice included.
func TestPackedHeadReadsWhatDecodingReads(t *testing.T) {
	full := &pb.Task{Id: "pipeline/pipeline_llm/x", Module: "pipeline", TaskType: "pipeline_llm", Subject: "x", State: pb.TaskState_TASK_STATE_COMPLETED,
		Context: map[string]string{"k": "v"}, Conversation: &pb.ConversationState{Llm: "api", TurnCount: 3}, CreatedAt: 1, UpdatedAt: 2, StartedAt: 3,
		CompletedAt: 1767614403000000000, LlmExclude: []string{"a", "b"}, ValidationAttempts: 2, AvoidLlm: "b", RequestTimeoutMs: 9, Archived: true}
	for _, tk := range []*pb.Task{full, {Id: "m/t/s"}, {Module: "only"}, {CompletedAt: -5}} {
		data, err := proto.Marshal(tk)
		require.NoError(t, err)
		module, at, err := packedHead(data)
		require.NoError(t, err)
		require.Equal(t, tk.Module, string(module), "%v", tk)
		require.Equal(t, tk.CompletedAt, at, "%v", tk)
	}
	// A second module and completed_at after the rest: the last wins.
	data, err := proto.Marshal(full)
	require.NoError(t, err)
	data, err = proto.MarshalOptions{}.MarshalAppend(data, &pb.Task{Module: "later", CompletedAt: 7})
	require.NoError(t, err)
	var decoded pb.Task
	require.NoError(t, proto.Unmarshal(data, &decoded))
	module, at, err := packedHead(data)
	require.NoError(t, err)
	require.Equal(t, decoded.Module, string(module))
	require.Equal(t, decoded.CompletedAt, at)

	_, _, err = packedHead(data[:len(data)-1])
	require.Error(t, err, "a cut encoding")
}
