// Package gateway defines how fano talks to an LLM backend: one Send per
// request, typed errors that say what the caller should do next, and the
// backends themselves in sub-packages (sim, browser, api).
//
// A gateway never schedules: the allocator decides who may send what and
// when; a Backend only carries one request and reports how it went.
package gateway

import (
	"context"
	"time"
)

// Request is one prompt to one backend.
type Request struct {
	TaskID   string
	Module   string
	TaskType string
	Prompt   string
	// History holds earlier turns of the conversation, oldest first. API
	// backends send it; browser backends continue ConversationURL instead,
	// or, starting a new conversation, prime it with the last turns.
	History  []Message
	Images   []string // file paths to attach
	DeepMode bool
	// ConversationURL continues this backend's own web conversation of the
	// task ("" = a new one). Never another backend's: a conversation
	// belongs to its site and account.
	ConversationURL string
	// KnownAnswers is how many answers fano recorded in ConversationURL.
	KnownAnswers int
	// Interrupted: this prompt was in flight in ConversationURL when fano
	// stopped; the backend first reads whether the page holds its answer
	// (more than KnownAnswers answers) and asks again only if not.
	Interrupted bool
}

// Message is one earlier turn.
type Message struct {
	Role    string // "user" | "assistant"
	Content string
}

// Response is a backend's answer.
type Response struct {
	Content         string
	ConversationURL string // where the conversation lives now (browser)
	// PrimedTurns > 0: a new conversation whose prompt carried a
	// transcript of that many earlier turns.
	PrimedTurns int
	// FromPage: the answer to an interrupted prompt, read from the page
	// instead of asking again.
	FromPage bool
	// Incomplete says why Content may be cut short (the answer stalled and
	// was stopped); the caller validates it like any answer.
	Incomplete string
	// Model is set when the site said it answered with another model than
	// usual (a browser site's degraded notice); "" = the usual model.
	Model            string
	Duration         time.Duration
	PromptTokens     int64
	CompletionTokens int64
}

// Backend is one LLM. Send must return when ctx is done, with an error
// that wraps ctx.Err(); implementations are safe for concurrent use, but
// callers (the gateway host) bound concurrency per backend.
type Backend interface {
	Name() string
	Send(ctx context.Context, req Request) (Response, error)
	// Health reports whether the backend can take requests now; a non-nil
	// error says why not (login expired, browser gone).
	Health(ctx context.Context) error
	Close() error
}
