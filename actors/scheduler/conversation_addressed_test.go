package scheduler

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/pb"
)

func evAddressed(id, llm, url string) *pb.Event {
	return &pb.Event{At: t0.UnixNano(), Body: &pb.Event_LlmConversationAddressed{LlmConversationAddressed: &pb.LLMConversationAddressed{
		TaskId: id, Llm: llm, Url: url, RequestSeq: 7}}}
}

// The address a site gave a new conversation while its first answer was
// coming is the task's conversation on that backend at once, with no
// answer in it: a prompt interrupted then is remembered against it (so
// that it is read from that page), and the answer that comes with the same
// address is its first.
func TestConversationAddressedBeforeItsFirstAnswer(t *testing.T) {
	s := New(Config{})
	tk := task("explorer", "exploration", "addressed")
	submit(t, s, tk, t0)
	apply(t, s, evStarted(tk.Id, "chatgpt", t0))
	apply(t, s, evRequest(tk.Id, "chatgpt", "q1", t0))
	apply(t, s, evAddressed(tk.Id, "chatgpt", "https://chatgpt/c/1"))
	got, _ := s.Task(tk.Id)
	bc := got.Conversation.Backends["chatgpt"]
	require.NotNil(t, bc, "the address is the task's conversation before any answer")
	assert.Equal(t, "https://chatgpt/c/1", bc.Url)
	assert.Zero(t, bc.Answers)
	assert.True(t, got.Conversation.AwaitingResponse, "the request is still in flight")

	apply(t, s, evFailedKind(tk.Id, "chatgpt", "interrupted", t0))
	got, _ = s.Task(tk.Id)
	assert.Equal(t, "q1", got.Conversation.Backends["chatgpt"].InterruptedPrompt, "the prompt in flight is read from that page next")

	apply(t, s, evRequest(tk.Id, "chatgpt", "q1", t0))
	apply(t, s, evAddressed(tk.Id, "chatgpt", "https://chatgpt/c/1")) // said again: changes nothing
	got, _ = s.Task(tk.Id)
	assert.Equal(t, "q1", got.Conversation.Backends["chatgpt"].InterruptedPrompt)
	apply(t, s, evResponse(tk.Id, "chatgpt", "a1", "https://chatgpt/c/1", t0))
	got, _ = s.Task(tk.Id)
	bc = got.Conversation.Backends["chatgpt"]
	assert.Equal(t, int32(1), bc.Answers, "the answer is the conversation's first")
	assert.Empty(t, bc.InterruptedPrompt)

	// Replay of the same events rebuilds the same conversation.
	r := New(Config{})
	submit(t, r, tk, t0)
	for _, e := range []*pb.Event{evStarted(tk.Id, "chatgpt", t0), evRequest(tk.Id, "chatgpt", "q1", t0),
		evAddressed(tk.Id, "chatgpt", "https://chatgpt/c/1"), evFailedKind(tk.Id, "chatgpt", "interrupted", t0)} {
		apply(t, r, e)
	}
	again, _ := r.Task(tk.Id)
	assert.Equal(t, "https://chatgpt/c/1", again.Conversation.Backends["chatgpt"].Url)
	assert.Equal(t, "q1", again.Conversation.Backends["chatgpt"].InterruptedPrompt)
}
