package gateway

import "time"

// State names what a backend can do right now, for routing, status, the
// panel and /metrics. Only StateReady takes work.
type State string

const (
	StateReady       State = "ready"
	StateRateLimited State = "rate_limited" // per-minute window; Until is the reset
	StateCapped      State = "capped"       // subscription usage cap; Until is the time the site named
	StateCredentials State = "credentials"  // 401/403 or key unset; re-checked
	StateLogin       State = "login"        // a browser met a login wall; re-checked
	StateCircuitOpen State = "circuit_open" // breaker open; Until is the half-open time
	StateStalled     State = "stalled"      // last answer hung; free again at once
	StatePageGone    State = "page_gone"    // browser page or process gone; restarting
	StateDown        State = "down"         // any other reason it cannot work
)

// Condition is a backend's state with the reason and, when known, the time
// it is expected to end.
type Condition struct {
	State  State
	Reason string
	Until  time.Time
}

// Conditioner is implemented by backends that know their own condition
// (a browser behind a login wall, a key that was refused). Safe for
// concurrent use.
type Conditioner interface {
	Condition() Condition
}
