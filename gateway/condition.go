package gateway

import "time"

// State names what a backend can do right now, for routing, status, the
// panel and /metrics. Only StateReady (and StateStalled, free again at
// once) takes work.
type State string

const (
	StateReady       State = "ready"
	StateRateLimited State = "rate_limited" // per-minute window (requests or tokens); Until is the reset
	StateCapped      State = "capped"       // quota window (hour, day, a named time); Until is its end
	StateCredentials State = "credentials"  // 401/403 or key unset; a person fixes the key
	StateCredits     State = "credits"      // 402: the account's credits are spent; a person adds some
	StateNotServed   State = "not_served"   // 404, "model not found": the provider does not serve the model or address the config names; a person fixes it
	StateLogin       State = "login"        // a browser met a login wall; a person logs in
	StateChallenge   State = "challenge"    // a bot-check page ("Just a moment…"); a person clears it
	StateCircuitOpen State = "circuit_open" // breaker open; Until is the half-open time
	StateStalled     State = "stalled"      // last answer hung; free again at once
	StatePageGone    State = "page_gone"    // browser page or process gone; restarting
	StateDown        State = "down"         // any other reason it cannot work
	StateHostLost    State = "host_lost"    // the gateway host on another machine that holds it is not reachable
)

// Class is the row of the condition table (docs/architecture.md, Backend conditions) a state belongs to:
// it decides who acts and how the end is known. A new shape of fault is a
// new way to recognise a state, never a new class.
type Class string

const (
	ClassNone      Class = ""          // ready: takes work
	ClassRate      Class = "rate"      // a rate window: ends at its reset, fano waits
	ClassQuota     Class = "quota"     // a quota window: ends at the named time, fano waits
	ClassTransient Class = "transient" // a passing fault: ends at once or after a short re-check
	ClassPerson    Class = "person"    // needs a person: ends when they act (or a slow re-check passes)
)

// ClassOf is the class of state st.
func ClassOf(st State) Class {
	switch st {
	case "", StateReady:
		return ClassNone
	case StateRateLimited:
		return ClassRate
	case StateCapped:
		return ClassQuota
	case StateCredentials, StateCredits, StateNotServed, StateLogin, StateChallenge:
		return ClassPerson
	default:
		return ClassTransient
	}
}

// NeedsPerson: nothing fano does ends state st; a person must act.
func NeedsPerson(st State) bool { return ClassOf(st) == ClassPerson }

// Action is what a person must do to end state st of backend, as one
// line for status, alerts and the panel; "" when fano ends it alone.
func Action(st State, backend string) string {
	switch st {
	case StateLogin:
		return "log in again: fano login " + backend
	case StateChallenge:
		return "clear the site's bot check in a browser on its profile: fano login " + backend
	case StateCredentials:
		return "fix the API key of " + backend + ", then: fano backend resume " + backend
	case StateCredits:
		return "add credits to the account of " + backend + ", then: fano backend resume " + backend
	case StateNotServed:
		return "check the model and base URL of " + backend + " in the config (the provider does not serve them), then restart fano"
	}
	return ""
}

// Condition is a backend's state with the reason and, when known, the time
// it is expected to end (for a person's condition: the next re-check).
type Condition struct {
	State  State
	Reason string
	Until  time.Time
}

// Class is the row of the condition table c belongs to.
func (c Condition) Class() Class { return ClassOf(c.State) }

// Conditioner is implemented by backends that know their own condition
// (a browser behind a login wall, a key that was refused). Safe for
// concurrent use.
type Conditioner interface {
	Condition() Condition
}
