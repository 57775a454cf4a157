package gateway

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The error kinds a Backend returns. The executor routes on them once
// (DESIGN.md §4): a rate limit pauses the task and tells the allocator; a
// transient error is retried after 60/300/900 s; a permanent one fails the
// task; an unavailable backend pauses the task and is reported to health.
var (
	ErrTransient   = errors.New("transient")
	ErrPermanent   = errors.New("permanent")
	ErrUnavailable = errors.New("unavailable")
)

// RateLimitedError says the backend refused for now. RetryAfter zero means
// the backend gave no time: park it until its next quota window.
type RateLimitedError struct {
	Backend    string
	RetryAfter time.Duration
	Reason     string
}

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

// Kind names how err should be routed: "rate_limited", "cancelled",
// "transient", "unavailable" or "permanent". Unknown errors are permanent:
// a failure nobody classified should not be retried forever.
func Kind(err error) string {
	var rl *RateLimitedError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &rl):
		return "rate_limited"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, ErrTransient):
		return "transient"
	case errors.Is(err, ErrUnavailable):
		return "unavailable"
	default:
		return "permanent"
	}
}
