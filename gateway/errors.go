package gateway

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The error kinds a Backend returns. The executor routes on them once
// (actors/faults.go; docs/architecture.md, Backend conditions): a rate limit, bad credentials or an
// unavailable backend park the backend and send the task to another one,
// uncounted; a transient error is retried after 60/300/900 s of
// consecutive failures (an answer resets the count; never FAILED); a bad
// answer is retried at once elsewhere on the task's validation budget; only
// a permanent one (the request itself is wrong) fails the task.
var (
	ErrTransient   = errors.New("transient")
	ErrPermanent   = errors.New("permanent")
	ErrUnavailable = errors.New("unavailable")
	// ErrCredentials: the backend refused who we are (HTTP 401/403, a key
	// variable unset or revoked). A fault of the backend, never of a task:
	// the backend is parked until its credentials work again.
	ErrCredentials = errors.New("credentials")
	// ErrBadAnswer: the backend answered, but with a refusal or nothing.
	// Never saved as content; the request goes to another backend.
	ErrBadAnswer = errors.New("bad answer")
	// ErrHung: the answer stalled or never started. The backend is free
	// again at once; it does not count against the task.
	ErrHung = errors.New("hung")
	// ErrConversationGone: the conversation the task continued is gone or
	// belongs to someone else. The task starts a fresh one on that backend,
	// primed with its history.
	ErrConversationGone = errors.New("conversation gone")
	// ErrNotSent marks a failure before the request left (an open
	// circuit, a rate limiter paused for long): it costs no quota and is
	// not counted as a request.
	ErrNotSent = errors.New("request not sent")
	// ErrShutdown is the cause of a request's context when fano stops: a
	// browser backend leaves the answer running on the site (and reads it
	// from the page when the task resumes) instead of stopping it.
	ErrShutdown = errors.New("shutdown")
)

// RateLimitedError says the backend refused for now. Two kinds are kept
// apart: a rate limit (Cap false: a per-minute window, seconds to minutes)
// and a usage cap (Cap true: a subscription cap, "continue after 7:29 PM").
// Until is the absolute time the provider named, if any; RetryAfter the
// relative one. Both zero: no time was given.
type RateLimitedError struct {
	Backend    string
	RetryAfter time.Duration
	Until      time.Time
	Cap        bool
	Reason     string
	// NotSent: our own limiter refused it; the provider never saw it.
	NotSent bool
}

// Is makes errors.Is(err, ErrNotSent) true for a refusal that never left.
func (e *RateLimitedError) Is(target error) bool { return target == ErrNotSent && e.NotSent }

func (e *RateLimitedError) Error() string {
	if e.RetryAfter > 0 {
		return fmt.Sprintf("%s: rate limited, retry after %s", e.Backend, e.RetryAfter)
	}
	return fmt.Sprintf("%s: rate limited until the next window", e.Backend)
}

// Error is a classified backend failure: Kind is one of ErrTransient,
// ErrPermanent or ErrUnavailable, and errors.Is matches it.
type Error struct {
	Backend string
	Kind    error
	Msg     string
	Err     error // underlying cause, if any
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%s: %s: %s", e.Backend, e.Kind, e.Msg)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is makes errors.Is(err, ErrTransient) and friends work.
func (e *Error) Is(target error) bool { return target == e.Kind }

func (e *Error) Unwrap() error { return e.Err }

// Transient builds a retryable failure of backend.
func Transient(backend, format string, args ...any) error {
	return &Error{Backend: backend, Kind: ErrTransient, Msg: fmt.Sprintf(format, args...)}
}

// Permanent builds a failure that retrying will not fix.
func Permanent(backend, format string, args ...any) error {
	return &Error{Backend: backend, Kind: ErrPermanent, Msg: fmt.Sprintf(format, args...)}
}

// Unavailable builds a failure of the backend itself (login wall, no credit,
// circuit open).
func Unavailable(backend, format string, args ...any) error {
	return &Error{Backend: backend, Kind: ErrUnavailable, Msg: fmt.Sprintf(format, args...)}
}

// Classified builds a failure of backend of the given kind.
func Classified(backend string, kind error, format string, args ...any) error {
	return &Error{Backend: backend, Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// Kind names how err should be routed: "rate_limited", "cancelled",
// "credentials", "bad_answer", "hung", "conversation_gone", "transient",
// "unavailable" or "permanent". Unknown errors are permanent: a failure
// nobody classified should not be retried forever.
func Kind(err error) string {
	var rl *RateLimitedError
	var f *Fault
	switch {
	case err == nil:
		return ""
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.As(err, &f):
		return f.Kind()
	case errors.As(err, &rl):
		return "rate_limited"
	case errors.Is(err, ErrCredentials):
		return "credentials"
	case errors.Is(err, ErrBadAnswer):
		return "bad_answer"
	case errors.Is(err, ErrHung):
		return "hung"
	case errors.Is(err, ErrConversationGone):
		return "conversation_gone"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, ErrTransient):
		return "transient"
	case errors.Is(err, ErrUnavailable):
		return "unavailable"
	default:
		return "permanent"
	}
}
