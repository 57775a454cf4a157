package allocator

import (
	"fmt"
	"strings"
	"time"

	"fano/pb"
)

// DecideUse returns the QuotaUsed event for one request on backend, to be
// persisted before the request is sent, or a *NoQuotaError if the backend
// may not be used now. A decided use counts as in flight until its
// QuotaUsed is applied (or Abandon is called), so two quick decisions
// cannot overspend.
func (b *Book) DecideUse(backend string, deep bool, taskID string, now time.Time) (*pb.Event, error) {
	q, err := b.get(backend)
	if err != nil {
		return nil, err
	}
	q.charge(taskID) // its own reservation is what it spends now
	if nq := b.refusal(q, deep, now); nq != nil {
		return nil, nq
	}
	q.inflight++
	if deep {
		q.inflightDeep++
	}
	return &pb.Event{At: now.UnixNano(), Body: &pb.Event_QuotaUsed{QuotaUsed: &pb.QuotaUsed{
		Backend: backend, DeepMode: deep, TaskId: taskID,
	}}}, nil
}

// Abandon releases the in-flight reservation of a QuotaUsed that DecideUse
// returned but that will never be applied (its persist failed). Other
// events are ignored.
func (b *Book) Abandon(e *pb.Event) {
	u := e.GetQuotaUsed()
	if u == nil {
		return
	}
	if q, ok := b.backends[u.GetBackend()]; ok {
		q.settle(u.GetDeepMode())
	}
}

// settle takes one decided use out of flight, never below zero.
func (q *quota) settle(deep bool) {
	q.inflight = max(0, q.inflight-1)
	if deep {
		q.inflightDeep = max(0, q.inflightDeep-1)
	}
}

// refusalWhy is a set of reasons a backend may not be used now.
type refusalWhy uint8

const (
	whyPaused refusalWhy = 1 << iota
	whyCondition
	whyRateLimited
	whyHourly
	whyPaced
	whyNoDeep
	whyDeepBudget
)

// refused says why q may not be used now (0: it may) and until when,
// without words: the free-slot view asks it for every backend at each
// Allocate and ReleaseSlot (refusal words it).
func (b *Book) refused(q *quota, deep bool, now time.Time) (why refusalWhy, until time.Time) {
	if q.paused {
		return whyPaused, time.Time{}
	}
	later := func(t time.Time) {
		if t.After(until) {
			until = t
		}
	}
	if st, _, t := q.condition(now); st != "" {
		why |= whyCondition
		later(t)
	}
	if q.rateLimitedUntil != 0 && now.UnixNano() < q.rateLimitedUntil {
		why |= whyRateLimited
		later(time.Unix(0, q.rateLimitedUntil))
	}
	granted, grantedDeep := q.reserved(now)
	if usable := q.configuredUsable(b.cfg.BufferPercent); q.hourlyUsed+q.inflight+granted >= usable {
		why |= whyHourly
		later(b.NextHourWindow(now))
	} else if t, paced := q.pacedUntil(b.cfg.BufferPercent, now); paced {
		why |= whyPaced
		later(t)
	}
	if deep && q.deepUsed+q.inflightDeep+grantedDeep >= q.cfg.DeepDailyLimit {
		if q.cfg.DeepDailyLimit == 0 {
			why |= whyNoDeep
			// Until stays as it is: never, unless another reason set it.
		} else {
			why |= whyDeepBudget
			later(b.NextDayWindow(now))
		}
	}
	if why != 0 && deep && q.cfg.DeepDailyLimit == 0 {
		until = time.Time{} // deep mode never comes
	}
	return why, until
}

// usable reports whether q may be used now (refused, with no words).
func (b *Book) usable(q *quota, deep bool, now time.Time) bool {
	if q.held {
		return false // takes no new task now; a request already given it still goes
	}
	why, _ := b.refused(q, deep, now)
	return why == 0
}

// refusal says why q may not be used now, or nil if it may.
func (b *Book) refusal(q *quota, deep bool, now time.Time) *NoQuotaError {
	why, until := b.refused(q, deep, now)
	if why == 0 {
		return nil
	}
	nq := &NoQuotaError{Backend: q.cfg.Name, Deep: deep}
	if why&whyPaused != 0 {
		nq.Reason = "paused"
		if q.pauseReason != "" {
			nq.Reason += ": " + q.pauseReason
		}
		return nq
	}
	var reasons []string
	if why&whyCondition != 0 {
		st, reason, _ := q.condition(now)
		reasons = append(reasons, st+": "+reason)
	}
	if why&whyRateLimited != 0 {
		if q.capped {
			reasons = append(reasons, "usage cap")
		} else {
			reasons = append(reasons, "rate limited")
		}
	}
	granted, grantedDeep := q.reserved(now)
	if why&whyHourly != 0 {
		reasons = append(reasons, fmt.Sprintf("hourly budget used (%d+%d of %d)", q.hourlyUsed, q.inflight+granted, q.configuredUsable(b.cfg.BufferPercent)))
	}
	if why&whyPaced != 0 {
		reasons = append(reasons, fmt.Sprintf("paced to %d an hour after a usage cap", q.usable(b.cfg.BufferPercent)))
	}
	if why&whyNoDeep != 0 {
		reasons = append(reasons, "no deep mode")
	}
	if why&whyDeepBudget != 0 {
		reasons = append(reasons, fmt.Sprintf("deep-mode budget used (%d+%d of %d)",
			q.deepUsed, q.inflightDeep+grantedDeep, q.cfg.DeepDailyLimit))
	}
	nq.Reason = strings.Join(reasons, "; ")
	nq.Until = until
	return nq
}

// condition is the backend's own fault still in force at now: its state,
// reason and end ("" when none).
func (q *quota) condition(now time.Time) (string, string, time.Time) {
	if q.condState == "" || (q.condUntil != 0 && now.UnixNano() >= q.condUntil) {
		return "", "", time.Time{}
	}
	var until time.Time
	if q.condUntil != 0 {
		until = time.Unix(0, q.condUntil)
	}
	return q.condState, q.condReason, until
}

// configuredUsable is the configured hourly limit less the buffer: the
// hard budget. A learned (lowered) estimate paces instead of parking.
func (q *quota) configuredUsable(bufferPercent int) int {
	if q.cfg.HourlyLimit <= 0 {
		return 0
	}
	return max(1, q.cfg.HourlyLimit*(100-bufferPercent)/100)
}

// pacedUntil spreads a learned estimate over the hour: after a usage cap
// lowered the estimate, requests go one per hour/usable, so the next cap
// is not met and the backend is never parked past the time the provider
// named. False when no estimate was learned or the pace allows one now.
func (q *quota) pacedUntil(bufferPercent int, now time.Time) (time.Time, bool) {
	if q.limitEstimate <= 0 || q.limitEstimate >= q.cfg.HourlyLimit {
		return time.Time{}, false
	}
	if q.inflight > 0 {
		return now.Add(time.Hour / time.Duration(q.usable(bufferPercent))), true
	}
	if q.lastRequestAt == 0 {
		return time.Time{}, false
	}
	next := time.Unix(0, q.lastRequestAt).Add(time.Hour / time.Duration(q.usable(bufferPercent)))
	return next, now.Before(next)
}

// RateLimit is what a "too many" answer said.
type RateLimit struct {
	RetryAfter time.Duration // relative reset, if given
	Until      time.Time     // absolute reset, if given (wins)
	Cap        bool          // the provider says it is a usage cap
	Reason     string
}

// Fallback backoffs for a rate limit that named no time: a few paced
// intervals of the learned rate, within these bounds.
const (
	minRateBackoff     = 2 * time.Second
	maxRateBackoff     = time.Minute
	unknownRateBackoff = 15 * time.Second
)

// ShortBackoff is how long a rate limit without a reset time pauses
// backend: three intervals of its learned rate (15 s if none was
// learned), between 2 s and a minute. Never the next hour window.
func (b *Book) ShortBackoff(backend string) time.Duration {
	q, ok := b.backends[backend]
	if !ok || q.learnedLimit <= 0 || q.learnedWindow <= 0 {
		return unknownRateBackoff
	}
	d := 3 * time.Duration(q.learnedWindow) / time.Duration(q.learnedLimit)
	return min(maxRateBackoff, max(minRateBackoff, d))
}

// DecideRateLimit returns the RateLimitRecorded event for a rate or quota
// window of backend, as the fault's recogniser read it: whether it is a
// quota window (rl.Cap) and when it ends are its to say, never guessed
// here. A rate window parks the backend until its reset (a short backoff
// when none was named) and changes no estimate; a quota window parks it
// until the named time (the next hour window when none was named) and
// lowers the estimate it paces to. An unknown backend still gets its
// event; Apply ignores it.
func (b *Book) DecideRateLimit(backend string, rl RateLimit, taskID string, now time.Time) *pb.Event {
	until := rl.Until
	if until.IsZero() && rl.RetryAfter > 0 {
		until = now.Add(rl.RetryAfter)
	}
	if !until.After(now) {
		if rl.Cap {
			until = b.NextHourWindow(now)
		} else {
			until = now.Add(b.ShortBackoff(backend))
		}
	}
	return &pb.Event{At: now.UnixNano(), Body: &pb.Event_RateLimitRecorded{RateLimitRecorded: &pb.RateLimitRecorded{
		Backend: backend, Until: until.UnixNano(), TaskId: taskID, Cap: rl.Cap, Reason: rl.Reason,
	}}}
}

// DecideCondition returns the BackendConditionRecorded event for a fault
// of the backend itself (state "credentials", "login", "circuit_open"),
// in force until until (zero: until cleared), or nil when the book already
// holds that state until that time. State "ready" clears it (always an
// event).
func (b *Book) DecideCondition(backend, state, reason string, until, now time.Time) (*pb.Event, error) {
	q, err := b.get(backend)
	if err != nil {
		return nil, err
	}
	if state == StateReady {
		// Always an event: a fault decided just before may not be
		// applied yet, and the clear must come after it.
		q.condDecided = &condition{}
		return &pb.Event{At: now.UnixNano(), Body: &pb.Event_BackendConditionRecorded{BackendConditionRecorded: &pb.BackendConditionRecorded{
			Backend: backend}}}, nil
	}
	next := condition{state, reason, nanosOrZero(until)}
	last := condition{q.condState, q.condReason, q.condUntil}
	if q.condDecided != nil {
		last = *q.condDecided
	}
	if next == last {
		return nil, nil
	}
	q.condDecided = &next
	return &pb.Event{At: now.UnixNano(), Body: &pb.Event_BackendConditionRecorded{BackendConditionRecorded: &pb.BackendConditionRecorded{
		Backend: backend, State: state, Reason: reason, Until: nanosOrZero(until),
	}}}, nil
}

// StateReady is the state of a backend that can take work.
const StateReady = "ready"

func nanosOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// DecideRateLearned returns the RateLearned event when backend's provider
// told a rate other than the one the book holds, else nil.
func (b *Book) DecideRateLearned(backend string, limit int, window time.Duration, now time.Time) *pb.Event {
	q, ok := b.backends[backend]
	if !ok || limit <= 0 || window <= 0 || (q.learnedLimit == limit && q.learnedWindow == int64(window)) {
		return nil
	}
	return &pb.Event{At: now.UnixNano(), Body: &pb.Event_RateLearned{RateLearned: &pb.RateLearned{
		Backend: backend, LimitPerWindow: int32(limit), WindowNs: int64(window),
	}}}
}

// DecideTick returns the window resets now implies: an HourWindowReset
// and/or a DayWindowReset when now lies past the current window (after a
// long sleep, one each, starting the window that holds now). A fresh
// book's first tick starts both windows.
func (b *Book) DecideTick(now time.Time) []*pb.Event {
	var out []*pb.Event
	if hs := b.hourWindowStartAt(now).UnixNano(); hs > b.hourWindowStart {
		out = append(out, &pb.Event{At: now.UnixNano(), Body: &pb.Event_HourWindowReset{
			HourWindowReset: &pb.HourWindowReset{WindowStart: hs}}})
	}
	if ds := b.dayWindowStartAt(now).UnixNano(); ds > b.dayWindowStart {
		out = append(out, &pb.Event{At: now.UnixNano(), Body: &pb.Event_DayWindowReset{
			DayWindowReset: &pb.DayWindowReset{WindowStart: ds}}})
	}
	return out
}

// DecidePause returns the BackendPaused event for an operator's pause.
func (b *Book) DecidePause(backend, reason string, now time.Time) (*pb.Event, error) {
	if _, err := b.get(backend); err != nil {
		return nil, err
	}
	return &pb.Event{At: now.UnixNano(), Body: &pb.Event_BackendPaused{BackendPaused: &pb.BackendPaused{
		Backend: backend, Reason: reason,
	}}}, nil
}

// DecideResume returns the BackendResumed event.
func (b *Book) DecideResume(backend string, now time.Time) (*pb.Event, error) {
	if _, err := b.get(backend); err != nil {
		return nil, err
	}
	return &pb.Event{At: now.UnixNano(), Body: &pb.Event_BackendResumed{BackendResumed: &pb.BackendResumed{
		Backend: backend,
	}}}, nil
}

// LearnedRates maps each backend with a learned rate to {limit, window ns}.
func (b *Book) LearnedRates() map[string][2]int64 {
	out := map[string][2]int64{}
	for name, q := range b.backends {
		if q.learnedLimit > 0 {
			out[name] = [2]int64{int64(q.learnedLimit), q.learnedWindow}
		}
	}
	return out
}

// DecideRelease returns the QuotaReleased event giving back one use of
// backend whose request never left (an open circuit or a paused rate
// limiter refused it).
func (b *Book) DecideRelease(backend string, deep bool, taskID string, now time.Time) (*pb.Event, error) {
	if _, err := b.get(backend); err != nil {
		return nil, err
	}
	return &pb.Event{At: now.UnixNano(), Body: &pb.Event_QuotaReleased{QuotaReleased: &pb.QuotaReleased{
		Backend: backend, DeepMode: deep, TaskId: taskID,
	}}}, nil
}
