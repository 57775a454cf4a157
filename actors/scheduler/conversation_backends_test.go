package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/pb"
)

func evFailedKind(id, llm, kind string, at time.Time) *pb.Event {
	return &pb.Event{At: at.UnixNano(), Body: &pb.Event_LlmRequestFailed{LlmRequestFailed: &pb.LLMRequestFailed{TaskId: id, Llm: llm, Kind: kind, Error: kind}}}
}

// A web conversation belongs to the backend that answered in it: a task
// that moves keeps each backend's URL apart, a vanished one is forgotten,
// and a prompt a stop interrupted is remembered until it is answered.
func TestConversationPerBackend(t *testing.T) {
	s := New(Config{})
	tk := task("explorer", "exploration", "per-backend")
	submit(t, s, tk, t0)
	apply(t, s, evStarted(tk.Id, "chatgpt", t0))
	apply(t, s, evRequest(tk.Id, "chatgpt", "q1", t0))
	apply(t, s, evResponse(tk.Id, "chatgpt", "a1", "https://chatgpt/c/1", t0))
	apply(t, s, evRequest(tk.Id, "claude", "q2", t0))
	apply(t, s, evResponse(tk.Id, "claude", "a2", "https://claude/chat/9", t0))
	apply(t, s, evRequest(tk.Id, "chatgpt", "q3", t0))
	apply(t, s, evResponse(tk.Id, "chatgpt", "a3", "https://chatgpt/c/1", t0))
	got, _ := s.Task(tk.Id)
	b := got.Conversation.Backends
	require.Len(t, b, 2)
	assert.Equal(t, "https://chatgpt/c/1", b["chatgpt"].Url)
	assert.Equal(t, int32(2), b["chatgpt"].Answers)
	assert.Equal(t, "https://claude/chat/9", b["claude"].Url)
	assert.Equal(t, int32(1), b["claude"].Answers)

	// Interrupted in chatgpt's conversation: remembered, then answered.
	apply(t, s, evRequest(tk.Id, "chatgpt", "q4", t0))
	apply(t, s, evFailedKind(tk.Id, "chatgpt", "interrupted", t0))
	got, _ = s.Task(tk.Id)
	assert.Equal(t, "q4", got.Conversation.Backends["chatgpt"].InterruptedPrompt)
	apply(t, s, evRequest(tk.Id, "chatgpt", "q4", t0))
	apply(t, s, evResponse(tk.Id, "chatgpt", "a4", "https://chatgpt/c/1", t0))
	got, _ = s.Task(tk.Id)
	assert.Empty(t, got.Conversation.Backends["chatgpt"].InterruptedPrompt)
	assert.Equal(t, int32(3), got.Conversation.Backends["chatgpt"].Answers)

	// Gone: forgotten; the next answer there starts a new conversation.
	apply(t, s, evRequest(tk.Id, "chatgpt", "q5", t0))
	apply(t, s, evFailedKind(tk.Id, "chatgpt", "conversation_gone", t0))
	got, _ = s.Task(tk.Id)
	assert.NotContains(t, got.Conversation.Backends, "chatgpt")
	assert.Contains(t, got.Conversation.Backends, "claude")
	apply(t, s, evRequest(tk.Id, "chatgpt", "q5", t0))
	apply(t, s, evResponse(tk.Id, "chatgpt", "a5", "https://chatgpt/c/2", t0))
	got, _ = s.Task(tk.Id)
	assert.Equal(t, "https://chatgpt/c/2", got.Conversation.Backends["chatgpt"].Url)
	assert.Equal(t, int32(1), got.Conversation.Backends["chatgpt"].Answers)
	checkInvariants(t, s)
}

// A task recorded before conversations were kept per backend has only its
// one URL: when that conversation is gone, the URL is forgotten too, so the
// next request does not meet the same vanished conversation again.
func TestLegacyConversationGoneForgetsURL(t *testing.T) {
	s := New(Config{})
	tk := task("explorer", "exploration", "legacy-url")
	submit(t, s, tk, t0)
	apply(t, s, evStarted(tk.Id, "chatgpt", t0))
	apply(t, s, evRequest(tk.Id, "chatgpt", "q1", t0))
	apply(t, s, evResponse(tk.Id, "chatgpt", "a1", "https://chatgpt/c/old", t0))
	c := s.tasks[tk.Id].t.Conversation
	c.Backends = nil // as a WAL of the last round left it: one URL only
	require.Equal(t, "https://chatgpt/c/old", c.Url)
	apply(t, s, evRequest(tk.Id, "chatgpt", "q2", t0))
	apply(t, s, evFailedKind(tk.Id, "chatgpt", "conversation_gone", t0))
	got, _ := s.Task(tk.Id)
	assert.Empty(t, got.Conversation.Url)
}
