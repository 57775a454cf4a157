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

	// retryAfter is Until less the time the fault was read, for readers
	// of the older *RateLimitedError form.
	retryAfter time.Duration
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

// Kind is how the executor routes the fault (see gateway.Kind): a rate
// or quota window "rate_limited", a refused key "credentials", another
// person's condition "unavailable", a passing fault "transient".
func (f *Fault) Kind() string {
	switch f.Condition.Class() {
	case ClassRate, ClassQuota:
		return "rate_limited"
	case ClassPerson:
		if f.Condition.State == StateCredentials {
			return "credentials"
		}
		return "unavailable"
	case ClassTransient:
		return "transient"
	}
	return "transient" // a fault that names no condition passes like one
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

// As lets a reader that still asks for a *RateLimitedError (the wire
// format, the breaker) read a rate or quota fault as one: the same
// backend, end, reason and NotSent, Cap for a quota window.
func (f *Fault) As(target any) bool {
	p, ok := target.(**RateLimitedError)
	if !ok {
		return false
	}
	if f.Err != nil && errors.As(f.Err, p) {
		return true // the recogniser kept its own reading
	}
	c := f.Condition.Class()
	if c != ClassRate && c != ClassQuota {
		return false
	}
	rl := &RateLimitedError{Backend: f.Backend, Until: f.Condition.Until, Cap: c == ClassQuota,
		Reason: f.Condition.Reason, NotSent: f.NotSent, RetryAfter: f.retryAfter}
	*p = rl
	return true
}

// RateFault is a rate window (requests or tokens per minute) of backend
// that ends at until; now is when it was read.
func RateFault(backend, window, reason string, now, until time.Time) *Fault {
	return &Fault{Backend: backend, Window: window, retryAfter: until.Sub(now),
		Condition: Condition{State: StateRateLimited, Reason: reason, Until: until}}
}

// QuotaFault is a quota window (an hour, a day, a named time) of backend
// that ends at until; now is when it was read.
func QuotaFault(backend, window, reason string, now, until time.Time) *Fault {
	return &Fault{Backend: backend, Window: window, retryAfter: until.Sub(now),
		Condition: Condition{State: StateCapped, Reason: reason, Until: until}}
}

// TransientPause is how long a passing fault holds its backend when
// nothing named a time: long enough that a task with no other backend
// does not resend in a tight loop, short enough that the backend, not the
// task, is what waits.
const TransientPause = 5 * time.Second

// TransientFault is a passing fault of backend (a 5xx, an overload, a cut
// stream, a broken connection): it ends at until (now plus
// TransientPause, unless the server asked for longer). cause, if any,
// stays reachable for errors.Is.
func TransientFault(backend, reason string, until time.Time, cause error) *Fault {
	return &Fault{Backend: backend, Err: cause, Condition: Condition{State: StateDown, Reason: reason, Until: until}}
}

// PersonFault is a condition of backend only a person ends (st is one of
// the person states); recheck is when fano looks again on its own.
func PersonFault(backend string, st State, reason string, recheck time.Time) *Fault {
	return &Fault{Backend: backend, Condition: Condition{State: st, Reason: reason, Until: recheck}}
}
