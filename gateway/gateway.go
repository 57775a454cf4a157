// Package gateway defines how fano talks to an LLM backend: one Send per
// request, typed errors that say what the caller should do next, and the
// backends themselves in sub-packages (sim, browser, api).
//
// A gateway never schedules: the allocator decides who may send what and
// when; a Backend only carries one request and reports how it went.
package gateway

import (
	"context"
	"errors"
	"fmt"
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
	// IntentSeq is the WAL sequence of the request's intent
	// (llm_request_started), 0 when it has none. A gateway host on another
	// machine keys what it did by it, so a repeated delivery is answered
	// from what was done and the prompt is never sent twice.
	IntentSeq uint64
	// ConversationAddressed, when set, is told the address the site gave
	// a new conversation (ConversationURL "") once it has one of its own,
	// while the answer is still coming, at most once a request: the
	// caller makes it durable, so that the request, interrupted, is read
	// from that page and not sent again. Called from the backend's
	// goroutine; it must not block. Backends without web conversations
	// ignore it; the answer carries the address all the same.
	ConversationAddressed func(url string)
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
	// Ended is how the answer ended. Only EndComplete (the site's or the
	// provider's own completion signal was seen) may be recorded: Whole
	// checks it, once, where every backend's answer passes.
	Ended Ending
	// Incomplete says why Content may be cut short (the answer stalled and
	// was stopped); such an answer never ends EndComplete.
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

// Addresser is a backend whose new conversations get an address of their
// own (a chat site): it tells Request.ConversationAddressed. Callers ask
// for the address only of such backends.
type Addresser interface {
	AddressesConversations() bool
}

// Ending says how an answer ended.
type Ending string

const (
	// EndUnknown: the backend did not say; treated as cut.
	EndUnknown Ending = ""
	// EndComplete: the completion signal was seen (the site's action bar or
	// cleared streaming flag, a finish_reason, the stream's [DONE]).
	EndComplete Ending = "complete"
	// EndCut: the text stopped before the completion signal (a stream or a
	// page that went quiet, a browser torn down mid-answer).
	EndCut Ending = "cut"
	// EndErrorTurn: the site ended the turn with an error ("Something went
	// wrong", "could not be fully generated").
	EndErrorTurn Ending = "error_turn"
	// EndTokenLimit: the provider stopped the answer at its output token
	// limit (finish_reason "length"). Asking the same again is cut the
	// same way, so it is not retried: the request fails, naming why.
	EndTokenLimit Ending = "token_limit"
	// EndFiltered: the provider's content filter stopped the answer
	// (finish_reason "content_filter"): no answer, like a refusal.
	EndFiltered Ending = "filtered"
)

// ErrCut is the transient fault of an answer whose completion was not
// seen: it is never recorded, and the request is retried.
var ErrCut = errors.New("answer not complete")

// Whole returns nil when resp may be recorded as an answer, and otherwise
// an error (errors.Is ErrCut) naming how the answer ended: transient for
// an answer cut on its way, which is asked again; permanent for one the
// provider stopped at its token limit, which would be cut again; a bad
// answer (tried elsewhere) for one its content filter stopped. It is the
// one place that decides.
func Whole(backend string, resp Response) error {
	if resp.Ended == EndComplete && resp.Incomplete == "" {
		return nil
	}
	switch resp.Ended {
	case EndTokenLimit:
		return &Error{Backend: backend, Kind: ErrPermanent, Err: ErrCut,
			Msg: fmt.Sprintf("answer not recorded: the provider stopped it at its output token limit after %d chars (finish_reason length); asked again it would be cut the same way", len(resp.Content))}
	case EndFiltered:
		return &Error{Backend: backend, Kind: ErrBadAnswer, Err: ErrCut,
			Msg: fmt.Sprintf("answer not recorded: the provider's content filter stopped it after %d chars (finish_reason content_filter)", len(resp.Content))}
	}
	why := string(resp.Ended)
	if why == "" {
		why = "no completion signal"
	}
	if resp.Incomplete != "" {
		why += ": " + resp.Incomplete
	}
	return &Error{Backend: backend, Kind: ErrTransient, Msg: fmt.Sprintf("answer not recorded (%s, %d chars)", why, len(resp.Content)), Err: ErrCut}
}
