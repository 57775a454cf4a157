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
	// backends send it; browser backends continue ConversationURL instead.
	History         []Message
	Images          []string // file paths to attach
	DeepMode        bool
	ConversationURL string // continue this web conversation ("" = new one)
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
