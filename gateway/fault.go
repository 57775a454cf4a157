package gateway

import (
	"errors"
	"fmt"
	"time"
)

// Fault is a backend fault read into a condition where it was recognised
// (an API's status, body and headers; a browser's page): the condition's
// state and its end are decided there, once, and every later reader (the
// executor, the allocator, status, health, the panel) takes them as they
// are. Until zero means the recogniser knew no end: the allocator applies
// the class's re-check.
type Fault struct {
	Backend   string
	Condition Condition
	// Window names what ran out for a rate or quota condition: "requests",
	// "tokens", "hour", "day" or a provider's own word; "" when unknown.
	Window string
	// NotSent: refused before the request left (our own limiter, an open
	// circuit): no quota was used and nothing is counted.
	NotSent bool
	Err     error // the underlying cause, if any
}

func (f *Fault) Error() string {
	s := fmt.Sprintf("%s: %s", f.Backend, f.Condition.State)
	if f.Window != "" {
		s += " (" + f.Window + ")"
	}
	if f.Condition.Reason != "" {
		s += ": " + f.Condition.Reason
	}
	if !f.Condition.Until.IsZero() {
		s += " until " + f.Condition.Until.UTC().Format(time.RFC3339)
	}
	return s
}

func (f *Fault) Unwrap() error { return f.Err }

// Is maps the fault's class onto the error kinds callers route on.
func (f *Fault) Is(target error) bool {
	switch target {
	case ErrNotSent:
		return f.NotSent
	case ErrCredentials:
		return f.Condition.State == StateCredentials
	case ErrUnavailable:
		c := f.Condition.Class()
		return c == ClassPerson && f.Condition.State != StateCredentials
	case ErrTransient:
		return f.Condition.Class() == ClassTransient
	}
	return false
}

// ConditionOf is the condition a backend's error puts it in, and false for
// an error that says nothing of the backend (the task's own fault, a bad
// answer, a cancellation).
func ConditionOf(err error) (Condition, bool) {
	var f *Fault
	if errors.As(err, &f) {
		return f.Condition, true
	}
	var rl *RateLimitedError
	if errors.As(err, &rl) {
		st := StateRateLimited
		if rl.Cap {
			st = StateCapped
		}
		return Condition{State: st, Reason: rl.Reason, Until: rl.Until}, true
	}
	return Condition{}, false
}
