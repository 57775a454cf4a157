package actors

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"

	"fano/actors/allocator"
	"fano/actors/scheduler"

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

// faultKind names a failed call in the WAL (LLMRequestFailed.kind), the
// logs and /metrics.
type faultKind string

const (
	kindCancelled        faultKind = "cancelled"
	kindRateLimited      faultKind = "rate_limited" // a rate or quota window
	kindCredentials      faultKind = "credentials"
	kindUnavailable      faultKind = "unavailable" // the backend cannot serve (a person's condition, or down)
	kindHung             faultKind = "hung"
	kindBadAnswer        faultKind = "bad_answer"
	kindConversationGone faultKind = "conversation_gone"
	kindTransient        faultKind = "transient"
	kindPermanent        faultKind = "permanent"
	kindQuota            faultKind = "quota" // the allocator refused: the request never left
)

// fault is a failed call read once: its kind and, for a fault of the
// backend, the condition it puts the backend in (docs/architecture.md, Backend conditions).
type fault struct {
	kind faultKind
	// class is the condition table's row; ClassNone for the task's own
	// fault or a cancellation.
	class gateway.Class
	// cond is the backend's condition; State "" for a passing error that
	// names none (a 5xx): the task backs off, the backend is not parked.
	cond    gateway.Condition
	window  string
	notSent bool
}

// parkRule is what a fault does to its backend.
type parkRule uint8

const (
	parkNone parkRule = iota
	// parkUntilEnd: a rate or quota window; parked until the end the
	// recogniser named (the allocator's rate rules when it named none).
	parkUntilEnd
	// parkForPerson: parked until a person acts; one alert naming the
	// action; a slow re-check that writes nothing while it fails.
	parkForPerson
	// parkUntilRecheck: the backend's own passing condition (an open
	// circuit, a page gone): until its end, never less than a short
	// re-check.
	parkUntilRecheck
)

// faultRoute is what a fault does to the task, to the backend and to
// its quota.
type faultRoute struct {
	task taskOutcome
	park parkRule
	// charged: the request's quota stays spent (it reached the
	// provider). A person's condition is neither charged nor counted;
	// a request refused before it left never is (fault.notSent).
	charged bool
}

// classRoutes is the condition table: a backend's fault routes by its
// class alone, the same for every backend type.
var classRoutes = map[gateway.Class]faultRoute{
	gateway.ClassRate:      {task: outcomeFailover, park: parkUntilEnd, charged: true},
	gateway.ClassQuota:     {task: outcomeFailover, park: parkUntilEnd, charged: true},
	gateway.ClassPerson:    {task: outcomeFailover, park: parkForPerson},
	gateway.ClassTransient: {task: outcomeBackoff, charged: true},
}

// transientStates refine the transient row by the backend's own state:
// one that stalled is free again at once; one whose circuit opened or
// whose page or process is gone cannot take the task now.
var transientStates = map[gateway.State]faultRoute{
	gateway.StateStalled:     {task: outcomeFailover, charged: true},
	gateway.StateCircuitOpen: {task: outcomeFailover, park: parkUntilRecheck, charged: true},
	gateway.StatePageGone:    {task: outcomeFailover, park: parkUntilRecheck, charged: true},
	gateway.StateDown:        {task: outcomeFailover, park: parkUntilRecheck, charged: true},
}

// ownRoutes: failures that say nothing of the backend.
var ownRoutes = map[faultKind]faultRoute{
	kindCancelled:        {task: outcomeStop, charged: true},
	kindBadAnswer:        {task: outcomeElsewhere, charged: true},
	kindConversationGone: {task: outcomeAgain, charged: true},
	kindPermanent:        {task: outcomeFail, charged: true},
}

// routeOf is the one place a failed call is routed.
func routeOf(f fault) faultRoute {
	if f.class == gateway.ClassNone {
		if r, ok := ownRoutes[f.kind]; ok {
			return r
		}
		return ownRoutes[kindPermanent] // unclassified: never retried forever
	}
	if f.class == gateway.ClassTransient {
		if r, ok := transientStates[f.cond.State]; ok {
			return r
		}
	}
	return classRoutes[f.class]
}

// readFault reads a failed call of llm into a fault, once. cause is why
// its context ended, if it did: a cancellation of ours routes as such; our
// own deadline is a passing fault. A backend's condition comes from the
// error where the backend recognised it (gateway.ConditionOf); errors of
// the older kinds are read into the same conditions here.
func (f *backendFaults) readFault(llm string, err, cause error) fault {
	out := fault{notSent: neverLeft(err)}
	switch {
	case cause != nil && !errors.Is(cause, errTimeout):
		out.kind = kindCancelled // shutdown, a person, or preemption
		return out
	case errors.Is(cause, errTimeout):
		out.kind, out.class = kindTransient, gateway.ClassTransient
		return out
	}
	if c, ok := gateway.ConditionOf(err); ok {
		out.cond, out.class = c, c.Class()
		var ff *gateway.Fault
		if errors.As(err, &ff) {
			out.window = ff.Window
		}
		var rl *gateway.RateLimitedError
		if c.Until.IsZero() && errors.As(err, &rl) && rl.RetryAfter > 0 {
			out.cond.Until = f.clock.Now().Add(rl.RetryAfter)
		}
		out.kind = kindOfClass(c)
		return out
	}
	switch k := faultKind(gateway.Kind(err)); k {
	case kindCredentials:
		out.cond = gateway.Condition{State: gateway.StateCredentials, Reason: err.Error()}
	case kindUnavailable:
		// The backend knows its own condition better than its error.
		out.cond = f.backendCondition(llm)
		if takesWork(out.cond.State) {
			out.cond = gateway.Condition{State: gateway.StateDown, Reason: err.Error()}
		}
	case kindHung:
		out.cond = gateway.Condition{State: gateway.StateStalled, Reason: err.Error()}
	case kindTransient:
		out.kind, out.class = k, gateway.ClassTransient
		return out
	default:
		out.kind = k
		return out
	}
	out.class = out.cond.Class()
	out.kind = kindOfClass(out.cond)
	return out
}

// kindOfClass is the WAL's name of a backend's condition.
func kindOfClass(c gateway.Condition) faultKind {
	switch {
	case c.State == gateway.StateCredentials:
		return kindCredentials
	case c.State == gateway.StateStalled:
		return kindHung
	case c.Class() == gateway.ClassRate || c.Class() == gateway.ClassQuota:
		return kindRateLimited
	case c.Class() == gateway.ClassTransient && c.State == "":
		return kindTransient
	default:
		return kindUnavailable
	}
}

// backendFaults routes a backend's faults to the allocator and keeps what
// fano learns of backends beyond the WAL (their conditions as they state
// them, their providers' rates, when a parked backend is re-checked). Its
// methods run in whichever goroutine calls them (an executor's loop, the
// allocator actor for the log lines, the tick for re-checks, the facade),
// and every recorded fact goes to the allocator's book as a message.
type backendFaults struct {
	backends           []gateway.Backend
	clock              clockwork.Clock
	credentialsRecheck time.Duration
	logger             zerolog.Logger
	publish            func(*pb.StateUpdate)
	// root and allocator are set at Start, before any actor runs.
	root      *actor.RootContext
	allocator *actor.PID

	mu sync.Mutex
	// rechecks: per backend parked for a person, when it is probed next
	// (never written: a failed re-check writes nothing).
	rechecks map[string]*recheck
	// alerted: the person's condition last alerted per backend; the same
	// condition met again (a re-check that looked fine, then the same
	// refusal) raises no second alert until an answer or a resume.
	alerted map[string]gateway.State
}

type recheck struct {
	next    time.Time
	probing bool
}

// Default re-check periods of parked backends: a person's condition is
// probed every few minutes (writing nothing while it holds); a passing
// one (down, page gone) is tried again after half a minute.
const (
	credentialsRecheck = 5 * time.Minute
	downRecheck        = 30 * time.Second
	probeTimeout       = time.Minute
)

// park records in the allocator what fault f does to backend llm and
// waits (through ask) until it is recorded, so the task's next allocation
// already avoids the backend. A person's condition met by a request sent
// before the backend's last re-check says nothing about it now.
func (f *backendFaults) park(ask askDone, llm, taskID string, sent time.Time, ft fault) {
	c := ft.cond
	switch routeOf(ft).park {
	case parkUntilEnd:
		_ = ask(f.allocator, &pb.RateLimited{Backend: llm, TaskId: taskID, Until: nanos(c.Until),
			Cap: ft.class == gateway.ClassQuota, Reason: c.Reason})
	case parkForPerson:
		f.parkForPerson(ask, llm, c, sent)
	case parkUntilRecheck:
		f.recordCondition(ask, llm, string(c.State), c.Reason, f.recheckAt(c))
	}
}

// parkForPerson records a person's condition until cleared and arms its
// slow re-check.
func (f *backendFaults) parkForPerson(ask askDone, llm string, c gateway.Condition, sent time.Time) {
	f.armRecheck(llm)
	_ = ask(f.allocator, &pb.BackendCondition{Backend: llm, State: string(c.State), Reason: c.Reason, Sent: nanos(sent)})
}

func (f *backendFaults) armRecheck(llm string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rechecks == nil {
		f.rechecks = map[string]*recheck{}
	}
	if r := f.rechecks[llm]; r != nil {
		if !r.probing {
			r.next = f.clock.Now().Add(f.credentialsRecheck)
		}
		return
	}
	f.rechecks[llm] = &recheck{next: f.clock.Now().Add(f.credentialsRecheck)}
}

// nextRecheck is when backend llm, parked for a person, is probed next.
func (f *backendFaults) nextRecheck(llm string) (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r := f.rechecks[llm]; r != nil {
		return r.next, true
	}
	return time.Time{}, false
}

// recheckAt is when a backend in the passing condition c is tried
// again: the end it names, never sooner than a short re-check from now
// (an end already past would make every tick try it again).
func (f *backendFaults) recheckAt(c gateway.Condition) time.Time {
	soonest := f.clock.Now().Add(downRecheck)
	if c.Until.After(soonest) {
		return c.Until
	}
	return soonest
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
	st := gateway.State(c.GetState())
	switch {
	case st == "" && was == "":
		// A re-check of a backend that was fine: nothing to say.
	case st == "":
		f.logger.Info().Str("event", "actors.allocator.backend_ready").Str("backend", backend).Str("was", was).Msg(backend + " takes work again")
	case string(st) != was && !f.alertedAlready(backend, st):
		// The one alert per fault: it names the backend, the reason and,
		// for a person's condition, what they must do.
		action := gateway.Action(st, backend)
		msg := backend + ": " + string(st) + "; its tasks go to other backends"
		if action != "" {
			msg += "; " + action
		}
		f.logger.Error().Str("event", "actors.allocator.backend_"+string(st)).Str("backend", backend).
			Str("class", string(gateway.ClassOf(st))).Str("reason", c.GetReason()).Str("action", action).
			Time("recheck", timeOf(c.GetUntil())).Msg(msg)
		f.publish(&pb.StateUpdate{Component: "backend", UpdateType: "alert", Data: map[string]string{
			"backend": backend, "state": string(st), "class": string(gateway.ClassOf(st)), "reason": c.GetReason(), "action": action}})
	}
}

// alertedAlready: st is a person's condition already alerted for
// backend since its last answer or resume (and notes it when not).
func (f *backendFaults) alertedAlready(backend string, st gateway.State) bool {
	if !gateway.NeedsPerson(st) {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.alerted[backend] == st {
		return true
	}
	if f.alerted == nil {
		f.alerted = map[string]gateway.State{}
	}
	f.alerted[backend] = st
	return false
}

// answered: backend llm answered; a person's condition met again is news.
func (f *backendFaults) answered(llm string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.alerted[llm] != "" {
		delete(f.alerted, llm)
	}
}

// BackendCheck is the outcome of re-checking one backend.
type BackendCheck struct {
	Backend, State, Reason string
}

// RecheckBackends re-checks the named backends (all when none is named):
// each reloads its key from the environment if it has one, and a recorded
// fault (credentials, credits, login, circuit) is cleared so the next
// request tries it; one that still says it cannot serve is parked again.
// It is what SIGHUP and `fano backend resume` do: a person acted.
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
		s.faults.resumed(name)
		c := s.faults.backendCondition(name)
		if takesWork(c.State) {
			s.faults.recordCondition(s.asks.requestDone, name, allocator.StateReady, "", time.Time{})
			out = append(out, BackendCheck{Backend: name, State: string(gateway.StateReady)})
			continue
		}
		s.faults.recordOwn(s.asks.requestDone, name, c)
		out = append(out, BackendCheck{Backend: name, State: string(c.State), Reason: c.Reason})
	}
	s.tick()
	return out
}

// resumed: a person acted on backend llm; its re-check and alert start
// afresh.
func (f *backendFaults) resumed(llm string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.rechecks, llm)
	delete(f.alerted, llm)
}

// recordOwn parks llm in the condition c it states of itself.
func (f *backendFaults) recordOwn(ask askDone, llm string, c gateway.Condition) {
	if c.Class() == gateway.ClassPerson {
		f.parkForPerson(ask, llm, c, time.Time{})
		return
	}
	f.recordCondition(ask, llm, string(c.State), c.Reason, f.recheckAt(c))
}

// sweep runs at each tick, before the tick's dispatch: a backend that
// states a condition of its own the book does not hold yet is parked
// (so no task is started only to find it), and a backend parked for a
// person whose re-check is due is probed in the background. A probe
// that finds the condition still there writes nothing; one that finds
// the backend well clears it. A backend whose gateway host was lost is
// cleared as soon as the host holds it again. book is each backend's
// recorded state.
func (f *backendFaults) sweep(ask askDone, book []allocator.BackendStatus, baseCtx context.Context) {
	now := f.clock.Now()
	byName := make(map[string]gateway.Backend, len(f.backends))
	for _, b := range f.backends {
		byName[b.Name()] = b
	}
	for _, st := range book {
		b, ok := byName[st.Name]
		if !ok || st.Paused {
			continue
		}
		recorded := gateway.State(st.State)
		if gateway.NeedsPerson(recorded) {
			if f.dueRecheck(st.Name, now) {
				go f.probe(ask, b, baseCtx)
			}
			continue
		}
		if recorded == gateway.StateHostLost && takesWork(f.backendCondition(st.Name).State) {
			// Its gateway host registered again: the backend takes work
			// now, not at the re-check half a minute on.
			f.recordCondition(ask, st.Name, allocator.StateReady, "", time.Time{})
			continue
		}
		if recorded != gateway.StateReady && recorded != "" {
			continue // a window or passing condition the book ends by itself
		}
		if c := f.backendCondition(st.Name); !takesWork(c.State) {
			f.recordOwn(ask, st.Name, c)
		}
	}
}

// dueRecheck: llm's re-check is due at now (and marks it under way);
// a backend parked before this start is re-checked at once.
func (f *backendFaults) dueRecheck(llm string, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rechecks == nil {
		f.rechecks = map[string]*recheck{}
	}
	r := f.rechecks[llm]
	if r == nil {
		r = &recheck{next: now}
		f.rechecks[llm] = r
	}
	if r.probing || now.Before(r.next) {
		return false
	}
	r.probing = true
	return true
}

// probe re-checks backend b, parked for a person: its health probe (a
// browser looks at its page again) and then its own condition. Still
// blocked: the next re-check is armed, nothing is written. Well: the
// condition is cleared and its tasks may go to it.
func (f *backendFaults) probe(ask askDone, b gateway.Backend, baseCtx context.Context) {
	ctx, cancel := context.WithTimeout(baseCtx, probeTimeout)
	err := b.Health(ctx)
	cancel()
	name := b.Name()
	c := f.backendCondition(name)
	if takesWork(c.State) && err != nil {
		c = gateway.Condition{State: gateway.StateDown, Reason: err.Error()}
		if cc, ok := gateway.ConditionOf(err); ok {
			c = cc
		}
	}
	f.mu.Lock()
	r := f.rechecks[name]
	if r != nil {
		r.probing = false
		r.next = f.clock.Now().Add(f.credentialsRecheck)
	}
	f.mu.Unlock()
	if !takesWork(c.State) || baseCtx.Err() != nil {
		return
	}
	// Recorded (and applied) before the re-check is forgotten: until
	// then the book still says the person's condition, and a sweep in
	// between must not start another probe.
	f.recordCondition(ask, name, allocator.StateReady, "", time.Time{})
	f.mu.Lock()
	if f.rechecks[name] == r {
		delete(f.rechecks, name)
	}
	f.mu.Unlock()
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
		st[i].Class, st[i].Action = allocator.Describe(st[i].Name, st[i].State)
		if gateway.NeedsPerson(gateway.State(st[i].State)) {
			// Until a person acts: shown with the next re-check.
			st[i].Until, _ = f.nextRecheck(st[i].Name)
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

// holdPaced holds, in book, every backend whose rate limiter already
// queues a request: its pace is booked, and a new task given to it would
// wait there while another backend might serve it now. Keeping a task
// on its backend is a preference only while that backend can serve soon.
func (f *backendFaults) holdPaced(book *allocator.Book) {
	for _, b := range f.backends {
		if lim, ok := limiterOf(b); ok {
			book.Hold(b.Name(), lim.Stats().Waiting > 0)
		}
	}
}

// pacedOnly: llm's rate limiter queues a request (the allocator holds it
// for its pace, not for a fault or its quota).
func (f *backendFaults) pacedOnly(llm string) bool {
	for _, b := range f.backends {
		if b.Name() == llm {
			lim, ok := limiterOf(b)
			return ok && lim.Stats().Waiting > 0
		}
	}
	return false
}

func limiterOf(b gateway.Backend) (*ratelimit.Limiter, bool) {
	l, ok := gateway.As[interface{ Limiter() *ratelimit.Limiter }](b)
	if !ok {
		return nil, false
	}
	lim := l.Limiter()
	return lim, lim != nil
}

// BlockedBackend is a backend that waits on a person: its state, why,
// and what the person must do.
type BlockedBackend struct {
	Backend, State, Reason, Action string
}

// waitingOnPerson is the backends unfinished work waits on when every
// unfinished task may use only backends that wait on a person (a login,
// credits, a key, a bot check, or an operator's pause); nil when some
// task may still go on by itself, or none is left. allowed lists, per
// unfinished task, the backends it may use (nil: any).
func waitingOnPerson(allowed [][]string, backends []allocator.BackendStatus) []BlockedBackend {
	if len(allowed) == 0 {
		return nil
	}
	blocked := map[string]BlockedBackend{}
	for _, st := range backends {
		switch {
		case st.Paused:
			blocked[st.Name] = BlockedBackend{Backend: st.Name, State: "paused", Reason: st.PauseReason,
				Action: "resume it: fano backend resume " + st.Name}
		case gateway.NeedsPerson(gateway.State(st.State)):
			blocked[st.Name] = BlockedBackend{Backend: st.Name, State: st.State, Reason: st.Reason,
				Action: gateway.Action(gateway.State(st.State), st.Name)}
		}
	}
	waitedOn := map[string]bool{}
	for _, names := range allowed {
		if names == nil {
			for _, st := range backends {
				names = append(names, st.Name)
			}
		}
		some := false
		for _, n := range names {
			if _, ok := blocked[n]; !ok {
				return nil // this task can go on without a person
			}
			waitedOn[n], some = true, true
		}
		if !some {
			return nil // a task no backend may ever take is not a person's to fix
		}
	}
	var out []BlockedBackend
	for _, st := range backends {
		if waitedOn[st.Name] {
			out = append(out, blocked[st.Name])
		}
	}
	return out
}

// WaitingOnPerson is what `fano run --until-idle` ends on besides no
// work: no task runs, and every unfinished task may use only backends
// that wait on a person. It returns those backends with the action each
// needs, or nil while work can go on by itself.
func (s *System) WaitingOnPerson() []BlockedBackend {
	if s.executors.Load() > 0 {
		return nil
	}
	var names []string
	for _, b := range s.opts.Backends {
		names = append(names, b.Name())
	}
	var allowed [][]string
	s.state.withScheduler(func(st *scheduler.State) {
		st.ForEach(func(t *pb.Task) {
			if scheduler.IsFinished(t.State) {
				return
			}
			if p := t.GetLlmPreference(); p != "" {
				allowed = append(allowed, []string{p})
				return
			}
			may := []string{}
			for _, n := range names {
				if !slices.Contains(t.GetLlmExclude(), n) {
					may = append(may, n)
				}
			}
			allowed = append(allowed, may)
		})
	})
	return waitingOnPerson(allowed, s.Quotas())
}
