package scheduler

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"fano/pb"
)

func TestApplyLifecycle(t *testing.T) {
	s := New(Config{})
	tk := task("explorer", "synthesis", "s")
	submit(t, s, tk, t0)

	at := t0.Add(time.Minute)
	apply(t, s, evStarted(tk.Id, "gemini", at))
	got, _ := s.Task(tk.Id)
	assert.Equal(t, pb.TaskState_TASK_STATE_RUNNING, got.State)
	assert.Equal(t, "gemini", got.LlmAssigned)
	assert.Equal(t, at.UnixNano(), got.StartedAt)
	assert.Equal(t, at.UnixNano(), got.UpdatedAt)
	assert.Equal(t, "gemini", got.Conversation.GetLlm())
	require.Len(t, s.Running(), 1)

	apply(t, s, evPaused(tk.Id, "preempted", at.Add(time.Hour), at.Add(time.Second)))
	got, _ = s.Task(tk.Id)
	assert.Equal(t, pb.TaskState_TASK_STATE_PAUSED, got.State)
	assert.Equal(t, "preempted", got.PauseReason)
	assert.Equal(t, at.Add(time.Hour).UnixNano(), got.NotBefore)
	assert.Empty(t, s.Running())

	apply(t, s, &pb.Event{At: at.Add(time.Hour).UnixNano(), Body: &pb.Event_TaskResumed{TaskResumed: &pb.TaskResumed{TaskId: tk.Id}}})
	later := at.Add(2 * time.Hour)
	apply(t, s, evStarted(tk.Id, "claude", later))
	got, _ = s.Task(tk.Id)
	assert.Equal(t, at.UnixNano(), got.StartedAt, "started_at is the first start")
	assert.Equal(t, "claude", got.Conversation.GetLlm())

	apply(t, s, evRetry(tk.Id, "timeout", later.Add(5*time.Minute), later.Add(time.Minute)))
	got, _ = s.Task(tk.Id)
	assert.Equal(t, pb.TaskState_TASK_STATE_PENDING, got.State)
	assert.Equal(t, int32(1), got.Attempts)
	assert.Equal(t, "timeout", got.Error)
	assert.Equal(t, later.Add(5*time.Minute).UnixNano(), got.NotBefore)

	apply(t, s, evStarted(tk.Id, "claude", later.Add(6*time.Minute)))
	apply(t, s, evCompleted(tk.Id, later.Add(7*time.Minute)))
	got, _ = s.Task(tk.Id)
	assert.Equal(t, pb.TaskState_TASK_STATE_COMPLETED, got.State)
	assert.Equal(t, later.Add(7*time.Minute).UnixNano(), got.CompletedAt)
	assert.Equal(t, map[string]map[pb.TaskState]int{"explorer": {pb.TaskState_TASK_STATE_COMPLETED: 1}}, s.Counts())

	f := task("explorer", "synthesis", "f")
	submit(t, s, f, t0)
	apply(t, s, evStarted(f.Id, "a", t0))
	apply(t, s, evFailed(f.Id, "permanent: bad prompt", t0))
	got, _ = s.Task(f.Id)
	assert.Equal(t, pb.TaskState_TASK_STATE_FAILED, got.State)
	assert.Equal(t, "permanent: bad prompt", got.Error)
	checkInvariants(t, s)
}

func TestApplyConversation(t *testing.T) {
	s := New(Config{MessageLimit: 4})
	tk := task("explorer", "exploration", "c")
	submit(t, s, tk, t0)
	apply(t, s, evStarted(tk.Id, "chatgpt", t0))

	apply(t, s, evRequest(tk.Id, "chatgpt", "q1", t0))
	got, _ := s.Task(tk.Id)
	c := got.Conversation
	require.Len(t, c.Messages, 1)
	assert.Equal(t, "user", c.Messages[0].Role)
	assert.True(t, c.AwaitingResponse)
	assert.Equal(t, int32(0), c.TurnCount)
	assert.Equal(t, int32(1), got.RequestCount)

	// A resend of the unanswered request does not repeat the message.
	resend := evRequest(tk.Id, "chatgpt", "q1", t0)
	resend.GetLlmRequestStarted().Resend = true
	apply(t, s, resend)
	got, _ = s.Task(tk.Id)
	require.Len(t, got.Conversation.Messages, 1)
	assert.Equal(t, int32(2), got.RequestCount)

	apply(t, s, evResponse(tk.Id, "chatgpt", "a1", "https://chat/1", t0.Add(time.Second)))
	got, _ = s.Task(tk.Id)
	c = got.Conversation
	require.Len(t, c.Messages, 2)
	assert.Equal(t, "assistant", c.Messages[1].Role)
	assert.Equal(t, "a1", c.Messages[1].Content)
	assert.Equal(t, "chatgpt", c.Messages[1].Llm)
	assert.Equal(t, int32(1), c.TurnCount)
	assert.False(t, c.AwaitingResponse)
	assert.Equal(t, "https://chat/1", c.Url)

	// A failed request drops its unanswered message.
	apply(t, s, evRequest(tk.Id, "chatgpt", "q2", t0))
	apply(t, s, evRequestFailed(tk.Id, "chatgpt", t0))
	got, _ = s.Task(tk.Id)
	require.Len(t, got.Conversation.Messages, 2)
	assert.False(t, got.Conversation.AwaitingResponse)
	assert.Equal(t, int32(1), got.Conversation.TurnCount)

	// Truncation keeps the newest; turn_count counts them all.
	for i := 2; i <= 5; i++ {
		apply(t, s, evRequest(tk.Id, "chatgpt", fmt.Sprint("q", i), t0))
		apply(t, s, evResponse(tk.Id, "chatgpt", fmt.Sprint("a", i), "", t0))
	}
	got, _ = s.Task(tk.Id)
	c = got.Conversation
	require.Len(t, c.Messages, 4)
	assert.Equal(t, []string{"q4", "a4", "q5", "a5"}, []string{c.Messages[0].Content, c.Messages[1].Content, c.Messages[2].Content, c.Messages[3].Content})
	assert.Equal(t, int32(5), c.TurnCount)
	assert.Equal(t, "https://chat/1", c.Url, "an empty url keeps the known one")
}

func TestApplyToTaskStandalone(t *testing.T) {
	// The executor's copy: the task's own message_limit wins.
	tk := &pb.Task{Id: "explorer/exploration/x", MessageLimit: 2}
	for i := range 3 {
		require.NoError(t, ApplyToTask(tk, evRequest(tk.Id, "a", fmt.Sprint("q", i), t0), 50))
		require.NoError(t, ApplyToTask(tk, evResponse(tk.Id, "a", fmt.Sprint("a", i), "", t0), 50))
	}
	require.Len(t, tk.Conversation.Messages, 2)
	assert.Equal(t, "q2", tk.Conversation.Messages[0].Content)

	before := proto.Clone(tk)
	err := ApplyToTask(tk, evCompleted("explorer/exploration/other", t0), 50)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "explorer/exploration/other")
	err = ApplyToTask(tk, &pb.Event{At: 1, Body: &pb.Event_QuotaUsed{QuotaUsed: &pb.QuotaUsed{Backend: "a"}}}, 50)
	require.ErrorIs(t, err, ErrNotTaskEvent)
	assert.True(t, proto.Equal(before, tk), "errors change nothing")
}

func TestApplyRejects(t *testing.T) {
	s := New(Config{})
	tk := task("explorer", "exploration", "x")
	submit(t, s, tk, t0)
	before := s.Snapshot()

	err := s.Apply(&pb.Event{At: 1, Body: &pb.Event_HourWindowReset{HourWindowReset: &pb.HourWindowReset{WindowStart: 1}}})
	require.ErrorIs(t, err, ErrNotTaskEvent)
	require.Error(t, s.Apply(&pb.Event{At: 1}))
	require.Error(t, s.Apply(nil))

	for _, e := range []*pb.Event{
		evStarted("explorer/exploration/ghost", "a", t0),
		evRequest("explorer/exploration/ghost", "a", "q", t0),
		evForgotten("explorer/exploration/ghost", t0),
	} {
		err := s.Apply(e)
		var ut *UnknownTaskError
		require.ErrorAs(t, err, &ut)
		assert.Equal(t, "explorer/exploration/ghost", ut.TaskID)
	}
	assert.True(t, proto.Equal(before, s.Snapshot()), "state unchanged")
	assert.Zero(t, s.Forgotten())
}

// Events applied to a copy that shares the task's per-backend records
// (pb.CloneTaskSharing: the scheduler's projections, the copies executors
// hold) leave the original as it was: an answer on the same conversation,
// an interrupted request, a conversation gone.
func TestApplyToASharingCopyLeavesTheOriginal(t *testing.T) {
	orig := &pb.Task{Id: "m/t/s", State: pb.TaskState_TASK_STATE_RUNNING, Conversation: &pb.ConversationState{
		Llm: "a", AwaitingResponse: true, Messages: []*pb.Message{{Role: "user", Content: "q"}},
		Backends: map[string]*pb.BackendConversation{
			"a": {Url: "https://a/c/1", Answers: 2},
			"b": {Url: "https://b/c/9", Answers: 1},
		},
	}}
	before := proto.Clone(orig)
	at := t0.UnixNano()
	for _, ev := range []*pb.Event{
		{At: at, Body: &pb.Event_LlmResponseReceived{LlmResponseReceived: &pb.LLMResponseReceived{
			TaskId: orig.Id, Llm: "a", Content: "answer", ConversationUrl: "https://a/c/1"}}},
		{At: at, Body: &pb.Event_LlmRequestFailed{LlmRequestFailed: &pb.LLMRequestFailed{TaskId: orig.Id, Llm: "a", Kind: "interrupted"}}},
		{At: at, Body: &pb.Event_LlmRequestFailed{LlmRequestFailed: &pb.LLMRequestFailed{TaskId: orig.Id, Llm: "b", Kind: "conversation_gone"}}},
	} {
		c := pb.CloneTaskSharing(orig)
		require.NoError(t, ApplyToTask(c, ev, 50))
		require.True(t, proto.Equal(before, orig), "applying %s to a copy changed the original:\n%v", eventName(ev), orig)
		require.False(t, proto.Equal(before, c), "%s changed nothing", eventName(ev))
	}
}
