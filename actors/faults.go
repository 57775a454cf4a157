package actors

import (
	"errors"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"

	"fano/actors/allocator"

	"fano/gateway"
	"fano/gateway/ratelimit"
	"fano/pb"
)

// taskOutcome is what a failed call does to its task.
type taskOutcome string

const (
	// outcomeStop: shutdown, a person or preemption cancelled the call.
	outcomeStop taskOutcome = "stop"
	// outcomeBackoff: retry after the backoff for the run of consecutive
	// failures (60/300/900 s, then the last one again); an answer resets
	// the run. Never FAILED: a flaky backend is not the task's fault.
	outcomeBackoff taskOutcome = "backoff"
	// outcomeFailover: the backend cannot serve now; the task waits for
	// any other eligible backend at once, uncounted.
	outcomeFailover taskOutcome = "failover"
	// outcomeElsewhere: the answer was no answer (a refusal, nothing);
	// retried at once on another backend, on the validation budget.
	outcomeElsewhere taskOutcome = "elsewhere"
	// outcomeAgain: ask again at once, on the same backend, uncounted (a
	// conversation that vanished: the next request starts a fresh one).
	outcomeAgain taskOutcome = "again"
	// outcomeFail: the request itself is wrong (HTTP 400 and the like).
	outcomeFail taskOutcome = "fail"
)

// faultRoute is the error table (DESIGN.md §4): per error kind, what
// happens to the task, to the backend and to the quota.
type faultRoute struct {
	task taskOutcome
	// backend is the condition the backend is put in ("" none;
	// "rate_limited" goes through the allocator's rate-limit rules).
	// Quota: a request that reached the provider stays charged whatever
	// its kind; one refused before it left (gateway.ErrNotSent) is given
	// back and not counted.
	backend string
}

// routeFault routes a failed call by its kind, the same for every backend
// type: a backend type differs only in which kinds it returns.
func routeFault(kind string) faultRoute {
	switch kind {
	case "cancelled":
		return faultRoute{task: outcomeStop}
	case "rate_limited":
		return faultRoute{task: outcomeFailover, backend: string(gateway.StateRateLimited)}
	case "credentials":
		return faultRoute{task: outcomeFailover, backend: string(gateway.StateCredentials)}
	case "unavailable":
		return faultRoute{task: outcomeFailover, backend: string(gateway.StateDown)}
	case "hung":
		return faultRoute{task: outcomeFailover}
	case "bad_answer":
		return faultRoute{task: outcomeElsewhere}
	case "conversation_gone":
		return faultRoute{task: outcomeAgain}
	case "transient":
		return faultRoute{task: outcomeBackoff}
	default: // permanent and anything unclassified
		return faultRoute{task: outcomeFail}
	}
}

// backendFaults routes a backend's faults to the allocator and keeps what
// fano learns of backends beyond the WAL (their conditions as they state
// them, their providers' rates). It holds no state of its own: its
// methods run in whichever goroutine calls them (an executor's loop, the
// allocator actor for the log lines, the facade for a re-check), and
// every recorded fact goes to the allocator's book as a message.
type backendFaults struct {
	backends           []gateway.Backend
	clock              clockwork.Clock
	credentialsRecheck time.Duration
	logger             zerolog.Logger
	publish            func(*pb.StateUpdate)
	// root and allocator are set at Start, before any actor runs.
	root      *actor.RootContext
	allocator *actor.PID
}

// Default re-check periods of parked backends.
const (
	credentialsRecheck = 5 * time.Minute
	downRecheck        = 30 * time.Second
)

// parkBackend tells the allocator about a backend-level fault and waits
// (through ask: an executor's, or requestDone) until it is recorded, so
// the task's next allocation already avoids the backend.
//
// A credentials failure of a request sent before the backend's last
// re-check says nothing about the key it uses now: it parks nothing.
func (f *backendFaults) parkBackend(ask askDone, llm, taskID string, sent time.Time, route faultRoute, err error) {
	switch route.backend {
	case string(gateway.StateRateLimited):
		var rl *gateway.RateLimitedError
		if !errors.As(err, &rl) {
			return
		}
		_ = ask(f.allocator, &pb.RateLimited{Backend: llm, TaskId: taskID, RetryAfterNs: int64(rl.RetryAfter),
			Until: nanos(rl.Until), Cap: rl.Cap, Reason: rl.Reason})
	case string(gateway.StateCredentials):
		_ = ask(f.allocator, &pb.BackendCondition{Backend: llm, State: string(gateway.StateCredentials), Reason: err.Error(),
			Until: nanos(f.clock.Now().Add(f.credentialsRecheck)), Sent: nanos(sent)})
	case string(gateway.StateDown):
		c := f.backendCondition(llm)
		if takesWork(c.State) {
			c = gateway.Condition{State: gateway.StateDown, Reason: err.Error()}
		}
		f.recordCondition(ask, llm, string(c.State), c.Reason, f.recheckAt(c))
	}
}

// recheckAt is when a backend in condition c is tried again: the end it
// names, or a few minutes for credentials and login walls, 30 s else.
func (f *backendFaults) recheckAt(c gateway.Condition) time.Time {
	if !c.Until.IsZero() {
		return c.Until
	}
	if c.State == gateway.StateCredentials || c.State == gateway.StateLogin {
		return f.clock.Now().Add(f.credentialsRecheck)
	}
	return f.clock.Now().Add(downRecheck)
}

// takesWork: a backend in this state of its own can be sent a request
// (a stalled one is free again at once).
func takesWork(st gateway.State) bool {
	return st == "" || st == gateway.StateReady || st == gateway.StateStalled
}

// askDone sends a request answered by pb.Done and waits for it.
type askDone func(pid *actor.PID, msg proto.Message) error

func (f *backendFaults) recordCondition(ask askDone, llm, state, reason string, until time.Time) {
	_ = ask(f.allocator, &pb.BackendCondition{Backend: llm, State: state, Reason: reason, Until: nanos(until)})
}

// backendCondition is what the backend says of itself (a breaker's open
// circuit, a browser's login wall); ready when it cannot say.
func (f *backendFaults) backendCondition(llm string) gateway.Condition {
	for _, b := range f.backends {
		if b.Name() == llm {
			if c, ok := gateway.As[gateway.Conditioner](b); ok {
				return c.Condition()
			}
		}
	}
	return gateway.Condition{State: gateway.StateReady}
}

// rateLearner is a backend whose provider tells its request rate (an API
// behind a rate limiter); the rate is kept in the WAL so a restart paces
// at it from the first request.
type rateLearner interface {
	LearnedRate() (limit int, window time.Duration)
	SetLearnedRate(limit int, window time.Duration)
}

func learnerOf(b gateway.Backend) (rateLearner, bool) { return gateway.As[rateLearner](b) }

// noteLearnedRate records the rate llm's provider told, if it changed.
func (f *backendFaults) noteLearnedRate(llm string) {
	for _, b := range f.backends {
		if b.Name() != llm {
			continue
		}
		if l, ok := learnerOf(b); ok {
			if limit, window := l.LearnedRate(); limit > 0 {
				f.root.Send(f.allocator, &pb.LearnRate{Backend: llm, Limit: int32(limit), WindowNs: int64(window)})
			}
		}
	}
}

// seedLearnedRates gives every backend the rate its provider told before
// the restart.
func (f *backendFaults) seedLearnedRates(rates map[string][2]int64) {
	for _, b := range f.backends {
		r, ok := rates[b.Name()]
		if !ok || r[0] <= 0 {
			continue
		}
		if l, ok := learnerOf(b); ok {
			l.SetLearnedRate(int(r[0]), time.Duration(r[1]))
		}
	}
}

func (f *backendFaults) logRateLimit(backend string, r *pb.RateLimitRecorded) {
	ev := f.logger.Info()
	kind := "rate limit"
	if r.GetCap() {
		ev, kind = f.logger.Warn(), "usage cap"
	}
	ev.Str("event", "actors.allocator.rate_limited").Str("backend", backend).Bool("cap", r.GetCap()).
		Time("until", timeOf(r.GetUntil())).Str("reason", r.GetReason()).Msg(backend + ": " + kind + "; paused until the reset")
}

func (f *backendFaults) logCondition(backend string, c *pb.BackendConditionRecorded, was string) {
	switch {
	case c.GetState() == "" && was == "":
		// A re-check of a backend that was fine: nothing to say.
	case c.GetState() == "":
		f.logger.Info().Str("event", "actors.allocator.backend_ready").Str("backend", backend).Str("was", was).Msg(backend + " takes work again")
	case c.GetState() != was:
		// The one alert per fault: it names the backend and, for a key,
		// the variable (the gateway's error does).
		f.logger.Error().Str("event", "actors.allocator.backend_"+c.GetState()).Str("backend", backend).
			Str("reason", c.GetReason()).Time("recheck", timeOf(c.GetUntil())).
			Msg(backend + ": " + c.GetState() + "; its tasks go to other backends")
		f.publish(&pb.StateUpdate{Component: "backend", UpdateType: "alert", Data: map[string]string{
			"backend": backend, "state": c.GetState(), "reason": c.GetReason()}})
	}
}

// BackendCheck is the outcome of re-checking one backend.
type BackendCheck struct {
	Backend, State, Reason string
}

// RecheckBackends re-checks the named backends (all when none is named):
// each reloads its key from the environment if it has one, and a recorded
// fault (credentials, login, circuit) is cleared so the next request tries
// it; one that still says it cannot serve is parked again. It is what
// SIGHUP and `fano backend resume` do.
func (s *System) RecheckBackends(names ...string) []BackendCheck {
	var out []BackendCheck
	for _, b := range s.opts.Backends {
		name := b.Name()
		if len(names) > 0 && !slices.Contains(names, name) {
			continue
		}
		if r, ok := keyReloaderOf(b); ok {
			_ = r.ReloadKey() // an unset key shows in the condition below
		}
		c := s.faults.backendCondition(name)
		if takesWork(c.State) {
			s.faults.recordCondition(s.asks.requestDone, name, allocator.StateReady, "", time.Time{})
			out = append(out, BackendCheck{Backend: name, State: string(gateway.StateReady)})
			continue
		}
		s.faults.recordCondition(s.asks.requestDone, name, string(c.State), c.Reason, s.faults.recheckAt(c))
		out = append(out, BackendCheck{Backend: name, State: string(c.State), Reason: c.Reason})
	}
	s.tick()
	return out
}

type keyReloader interface{ ReloadKey() error }

func keyReloaderOf(b gateway.Backend) (keyReloader, bool) { return gateway.As[keyReloader](b) }

// overlayBackendFacts adds what only the backends know to the book's
// figures: their own condition and their rate limiter's pace and queue.
func (f *backendFaults) overlayBackendFacts(st []allocator.BackendStatus) {
	byName := make(map[string]gateway.Backend, len(f.backends))
	for _, b := range f.backends {
		byName[b.Name()] = b
	}
	for i := range st {
		b, ok := byName[st[i].Name]
		if !ok {
			continue
		}
		if c := f.backendCondition(st[i].Name); !takesWork(c.State) && st[i].State == allocator.StateReady {
			st[i].State, st[i].Reason, st[i].Until, st[i].Available = string(c.State), c.Reason, c.Until, false
		}
		if lim, ok := limiterOf(b); ok {
			ls := lim.Stats()
			st[i].PacedPerWindow, st[i].LimiterWaiting = ls.RPM, ls.Waiting
			if st[i].LearnedLimit == 0 && ls.LimitRPM > 0 {
				st[i].LearnedLimit, st[i].LearnedWindow = ls.LimitRPM, lim.Window()
			}
		}
	}
}

func limiterOf(b gateway.Backend) (*ratelimit.Limiter, bool) {
	l, ok := gateway.As[interface{ Limiter() *ratelimit.Limiter }](b)
	if !ok {
		return nil, false
	}
	lim := l.Limiter()
	return lim, lim != nil
}
