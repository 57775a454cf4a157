package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"fano/pb"
)

var t0 = time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)

func task(module, typ, subject string) *pb.Task {
	return &pb.Task{Id: TaskKey(module, typ, subject), Module: module, TaskType: typ, Subject: subject}
}

// submit decides and applies a submit, returning the event.
func submit(t testing.TB, s *State, tk *pb.Task, now time.Time) *pb.Event {
	t.Helper()
	e, err := s.DecideSubmit(tk, now)
	require.NoError(t, err)
	require.NoError(t, s.Apply(e))
	return e
}

func apply(t testing.TB, s *State, e *pb.Event) *pb.Event {
	t.Helper()
	require.NoError(t, s.Apply(e))
	return e
}

func evStarted(id, llm string, at time.Time) *pb.Event {
	return &pb.Event{At: at.UnixNano(), Body: &pb.Event_TaskStarted{TaskStarted: &pb.TaskStarted{TaskId: id, Llm: llm}}}
}

func evCompleted(id string, at time.Time) *pb.Event {
	return &pb.Event{At: at.UnixNano(), Body: &pb.Event_TaskCompleted{TaskCompleted: &pb.TaskCompleted{TaskId: id}}}
}

func evFailed(id, msg string, at time.Time) *pb.Event {
	return &pb.Event{At: at.UnixNano(), Body: &pb.Event_TaskFailed{TaskFailed: &pb.TaskFailed{TaskId: id, Error: msg}}}
}

func evPaused(id, reason string, notBefore time.Time, at time.Time) *pb.Event {
	var nb int64
	if !notBefore.IsZero() {
		nb = notBefore.UnixNano()
	}
	return &pb.Event{At: at.UnixNano(), Body: &pb.Event_TaskPaused{TaskPaused: &pb.TaskPaused{TaskId: id, Reason: reason, NotBefore: nb}}}
}

func evRetry(id, msg string, notBefore time.Time, at time.Time) *pb.Event {
	return &pb.Event{At: at.UnixNano(), Body: &pb.Event_TaskRetryScheduled{TaskRetryScheduled: &pb.TaskRetryScheduled{TaskId: id, Error: msg, NotBefore: notBefore.UnixNano()}}}
}

func evRequeued(id string, at time.Time) *pb.Event {
	return &pb.Event{At: at.UnixNano(), Body: &pb.Event_TaskRequeued{TaskRequeued: &pb.TaskRequeued{TaskId: id, Reason: "no llm"}}}
}

func evForgotten(id string, at time.Time) *pb.Event {
	return &pb.Event{At: at.UnixNano(), Body: &pb.Event_TaskForgotten{TaskForgotten: &pb.TaskForgotten{TaskId: id}}}
}

func evRequest(id, llm, prompt string, at time.Time) *pb.Event {
	return &pb.Event{At: at.UnixNano(), Body: &pb.Event_LlmRequestStarted{LlmRequestStarted: &pb.LLMRequestStarted{TaskId: id, Llm: llm, Prompt: prompt}}}
}

func evResponse(id, llm, content, url string, at time.Time) *pb.Event {
	return &pb.Event{At: at.UnixNano(), Body: &pb.Event_LlmResponseReceived{LlmResponseReceived: &pb.LLMResponseReceived{TaskId: id, Llm: llm, Content: content, ConversationUrl: url}}}
}

func evRequestFailed(id, llm string, at time.Time) *pb.Event {
	return &pb.Event{At: at.UnixNano(), Body: &pb.Event_LlmRequestFailed{LlmRequestFailed: &pb.LLMRequestFailed{TaskId: id, Llm: llm, Kind: "transient", Error: "boom"}}}
}

func prio(t testing.TB, s *State, id string) int32 {
	t.Helper()
	tk, ok := s.Task(id)
	require.True(t, ok, id)
	return tk.Priority
}

// checkInvariants verifies the queue against the task map.
func checkInvariants(t testing.TB, s *State) {
	t.Helper()
	heaps := []*taskHeap{s.q.delayed}
	for k, h := range s.q.pref {
		require.Equal(t, kindPref, h.kind)
		require.Equal(t, k, h.key)
		require.NotEmpty(t, h.items, "empty pref heap %q kept", k)
		heaps = append(heaps, h)
	}
	for k, h := range s.q.excl {
		require.Equal(t, kindExcl, h.kind)
		require.Equal(t, k, h.key)
		require.NotEmpty(t, h.items, "empty excl heap %q kept", k)
		heaps = append(heaps, h)
	}
	inHeap := map[string]bool{}
	for _, h := range heaps {
		for i, en := range h.items {
			require.Same(t, h, en.h)
			require.Equal(t, i, en.idx)
			require.False(t, inHeap[en.t.Id], "task %s in two heaps", en.t.Id)
			inHeap[en.t.Id] = true
			if i > 0 {
				require.False(t, h.less(i, (i-1)/2), "heap order broken at %d in %q", i, h.key)
			}
			if h.kind != kindDelayed {
				require.Equal(t, h.deep, en.t.RequiresDeepMode, "task %s in the wrong deep/normal heap", en.t.Id)
				require.Equal(t, h.module, en.t.Module, "task %s in another module's heap", en.t.Id)
				// The incremental key is the spec's formula at the clock.
				require.Equal(t, s.priorityAt(en.t, s.at), en.priority(), "task %s: key %d + bonus %d at clock %d", en.t.Id, en.key, h.bonus, s.at)
				step := s.nextBoostStep(en.t.CreatedAt, s.at)
				require.Equal(t, step, en.step, "task %s: next boost step", en.t.Id)
				require.Greater(t, step, s.at, "task %s: a due step was not taken", en.t.Id)
				if step == noStep {
					require.Equal(t, -1, en.sidx, "task %s: in the step heap without a step", en.t.Id)
				} else {
					require.Same(t, en, s.q.steps[en.sidx], "task %s: missing from the step heap", en.t.Id)
				}
			} else {
				require.Equal(t, -1, en.sidx, "delayed task %s in the step heap", en.t.Id)
			}
			if h.kind == kindPref {
				require.Equal(t, h.key, heapKey(en.t.RequiresDeepMode, en.t.Module, en.t.LlmPreference))
			}
			if h.kind == kindExcl {
				k, _ := exclKey(en.t.LlmExclude)
				require.Equal(t, h.key, heapKey(en.t.RequiresDeepMode, en.t.Module, k))
				require.Empty(t, en.t.LlmPreference)
			}
		}
	}
	for i, en := range s.q.steps {
		require.Equal(t, i, en.sidx)
		require.True(t, inHeap[en.t.Id], "task %s in the step heap, not in a ready heap", en.t.Id)
		if i > 0 {
			require.False(t, s.q.steps.less(i, (i-1)/2), "step heap order broken at %d", i)
		}
	}
	prefOpen := map[quotaKey]int{}
	pending, running, paused := 0, 0, 0
	for id, en := range s.tasks {
		if en.t == nil {
			require.NotEmpty(t, en.packed, "task %s neither decoded nor encoded", id)
			require.Nil(t, en.h, "encoded task %s in a heap", id)
			require.False(t, inHeap[id], "encoded task %s in a heap", id)
		}
		tk := en.view()
		require.Equal(t, id, tk.Id)
		if !IsFinished(tk.State) && tk.LlmPreference != "" {
			prefOpen[quotaKey{tk.LlmPreference, tk.RequiresDeepMode}]++
		}
		waiting := tk.State == pb.TaskState_TASK_STATE_PENDING && !en.picked
		require.Equal(t, waiting, inHeap[id], "task %s state %s picked %v", id, tk.State, en.picked)
		if isPendingState(tk.State) {
			pending++
		}
		switch tk.State {
		case pb.TaskState_TASK_STATE_RUNNING:
			running++
			require.Contains(t, s.running, id)
		case pb.TaskState_TASK_STATE_PAUSED:
			paused++
			require.Contains(t, s.paused, id)
		}
		if en.picked {
			require.Equal(t, pb.TaskState_TASK_STATE_PENDING, tk.State)
		}
	}
	require.Equal(t, prefOpen, s.prefOpen)
	require.Equal(t, pending, s.Pending())
	require.Len(t, s.running, running)
	require.Len(t, s.paused, paused)
	n, gone, finished := 0, 0, 0
	for _, c := range s.Counts() {
		for _, k := range c {
			n += k
		}
	}
	for _, c := range s.forgottenCounts {
		for _, k := range c {
			gone += k
		}
	}
	for _, en := range s.tasks {
		if IsFinished(en.state()) {
			finished++
		}
	}
	require.Equal(t, len(s.tasks)+gone, n, "counts: the tasks in memory and the forgotten")
	require.Equal(t, finished, s.FinishedInMemory())
}
