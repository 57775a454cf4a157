package actors

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"fano/pb"
)

// A request continues only the backend's own conversation; another
// backend's URL is never handed over.
func TestConversationOnBackend(t *testing.T) {
	c := &pb.ConversationState{
		Url: "https://claude/chat/9",
		Messages: []*pb.Message{
			{Role: "user", Content: "q1"}, {Role: "assistant", Content: "a1", Llm: "chatgpt"},
			{Role: "user", Content: "q2"}, {Role: "assistant", Content: "a2", Llm: "claude"},
		},
		Backends: map[string]*pb.BackendConversation{
			"chatgpt": {Url: "https://chatgpt/c/1", Answers: 1, InterruptedPrompt: "q3"},
			"claude":  {Url: "https://claude/chat/9", Answers: 1},
		},
	}
	assert.Equal(t, webConversation{url: "https://chatgpt/c/1", answers: 1, interrupted: true}, conversationOn(c, "chatgpt", "q3"))
	assert.Equal(t, webConversation{url: "https://chatgpt/c/1", answers: 1}, conversationOn(c, "chatgpt", "another prompt"))
	assert.Equal(t, webConversation{url: "https://claude/chat/9", answers: 1}, conversationOn(c, "claude", "q3"))
	assert.Equal(t, webConversation{}, conversationOn(c, "gemini", "q3"))

	// State from before per-backend conversations: the URL is the last
	// answering backend's only.
	c.Backends = nil
	assert.Equal(t, webConversation{url: "https://claude/chat/9"}, conversationOn(c, "claude", "q3"))
	assert.Equal(t, webConversation{}, conversationOn(c, "chatgpt", "q3"))
}
