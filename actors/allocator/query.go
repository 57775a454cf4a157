package allocator

import (
	"fmt"
	"slices"
	"time"

	"fano/gateway"
	"fano/pb"
)

// CanUse says whether one more request may go to backend now: it is not
// paused, not rate limited, its hourly count (uses in flight included) is
// below the usable budget (the effective limit less the buffer), and, for
// deep mode, its deep count is below the daily deep-mode limit.
func (b *Book) CanUse(backend string, deep bool, now time.Time) bool {
	q, ok := b.backends[backend]
	return ok && b.usable(q, deep, now)
}

// Choose picks the backend for t among free, in the spec's order: its
// llm_preference (that one or none), then its conversation's backend, then
// the one with the most remaining hourly budget (ties by name). Only
// backends not in t.llm_exclude that CanUse (deep = t.requires_deep_mode)
// and have a free slot are chosen.
func (b *Book) Choose(t *pb.Task, free []string, now time.Time) (string, bool) {
	deep := t.GetRequiresDeepMode()
	ok := func(name string) bool {
		q, known := b.backends[name]
		return known &&
			slices.Contains(free, name) &&
			!slices.Contains(t.GetLlmExclude(), name) &&
			q.inUse < q.cfg.MaxConcurrency &&
			b.usable(q, deep, now)
	}
	if pref := t.GetLlmPreference(); pref != "" {
		if ok(pref) {
			return pref, true
		}
		return "", false // the task waits for its preferred backend
	}
	// Continuity is a preference, not a pin: a backend that is down,
	// parked or failed this task last is passed over for a free one.
	avoid := t.GetAvoidLlm()
	if conv := t.GetConversation().GetLlm(); conv != "" && conv != avoid && ok(conv) {
		return conv, true
	}
	best, bestLeft := "", 0
	for _, name := range free {
		if !ok(name) || name == avoid {
			continue
		}
		q := b.backends[name]
		granted, _ := q.reserved(now)
		left := q.usable(b.cfg.BufferPercent) - q.hourlyUsed - q.inflight - granted
		if best == "" || left > bestLeft || (left == bestLeft && name < best) {
			best, bestLeft = name, left
		}
	}
	if best == "" && avoid != "" && ok(avoid) {
		return avoid, true // the only one free: better than waiting
	}
	return best, best != ""
}

// Hold says whether backend can serve a new task soon (false) or would
// only queue it behind its own pace (true): a held backend is offered
// no new task (Free, Choose, FreeViews), though its quota is untouched
// and the requests of tasks already given to it still go. Transient,
// never logged. It reports whether the hold changed.
func (b *Book) Hold(backend string, held bool) bool {
	q, ok := b.backends[backend]
	if !ok || q.held == held {
		return false
	}
	q.held = held
	return true
}

// Acquire takes a concurrency slot of backend (a browser has one); false
// if none is free or the backend is unknown. Slots are transient: they are
// not logged, the executors take them again after a restart.
func (b *Book) Acquire(backend string) bool {
	q, ok := b.backends[backend]
	if !ok || q.inUse >= q.cfg.MaxConcurrency {
		return false
	}
	q.inUse++
	return true
}

// Release gives a slot of backend back; extra releases are ignored.
func (b *Book) Release(backend string) {
	if q, ok := b.backends[backend]; ok && q.inUse > 0 {
		q.inUse--
	}
}

// Free lists, sorted, the backends that have a free slot and CanUse
// (non-deep) now.
func (b *Book) Free(now time.Time) []string {
	var out []string
	for _, name := range b.names {
		q := b.backends[name]
		if q.inUse < q.cfg.MaxConcurrency && b.usable(q, false, now) {
			out = append(out, name)
		}
	}
	return out
}

// Status returns every backend's figures, sorted by name.
func (b *Book) Status(now time.Time) []BackendStatus {
	out := make([]BackendStatus, 0, len(b.names))
	for _, name := range b.names {
		q := b.backends[name]
		s := BackendStatus{
			Name:           name,
			Kind:           q.cfg.Kind,
			HourlyUsed:     q.hourlyUsed,
			HourlyLimit:    q.cfg.HourlyLimit,
			LimitEstimate:  q.effectiveLimit(),
			Usable:         q.usable(b.cfg.BufferPercent),
			DeepUsed:       q.deepUsed,
			DeepLimit:      q.cfg.DeepDailyLimit,
			Paused:         q.paused,
			PauseReason:    q.pauseReason,
			InUse:          q.inUse,
			MaxConcurrency: q.cfg.MaxConcurrency,
			Available:      q.inUse < q.cfg.MaxConcurrency && b.usable(q, false, now),
		}
		if q.rateLimitedUntil != 0 && now.UnixNano() < q.rateLimitedUntil {
			s.RateLimitedUntil = time.Unix(0, q.rateLimitedUntil)
			s.Capped = q.capped
		}
		s.LearnedLimit, s.LearnedWindow = q.learnedLimit, time.Duration(q.learnedWindow)
		s.State, s.Reason, s.Until = b.state(q, now)
		s.Class, s.Action = Describe(name, s.State)
		out = append(out, s)
	}
	return out
}

// state names why q takes no work now, most lasting reason first, or
// "ready".
func (b *Book) state(q *quota, now time.Time) (string, string, time.Time) {
	if q.paused {
		return "paused", q.pauseReason, time.Time{}
	}
	if st, reason, until := q.condition(now); st != "" {
		return st, reason, until
	}
	if q.rateLimitedUntil != 0 && now.UnixNano() < q.rateLimitedUntil {
		if q.capped {
			return string(gateway.StateCapped), "usage cap", time.Unix(0, q.rateLimitedUntil)
		}
		return string(gateway.StateRateLimited), "rate limit", time.Unix(0, q.rateLimitedUntil)
	}
	if q.hourlyUsed+q.inflight >= q.configuredUsable(b.cfg.BufferPercent) {
		return "exhausted", "hourly budget used", b.NextHourWindow(now)
	}
	if t, paced := q.pacedUntil(b.cfg.BufferPercent, now); paced {
		return "paced", fmt.Sprintf("estimate %d an hour", q.effectiveLimit()), t
	}
	return StateReady, "", time.Time{}
}

// FreeView is what one backend can take now: its free slots, and whether
// a normal and a deep-mode request may go.
type FreeView struct {
	Name         string
	Slots        int
	Normal, Deep bool
}

// FreeViews is every backend's FreeView, in name order, found without
// wording any refusal: the allocator tells the scheduler at each Allocate
// and ReleaseSlot.
func (b *Book) FreeViews(now time.Time) []FreeView {
	return b.AppendFreeViews(make([]FreeView, 0, len(b.names)), now)
}

// AppendFreeViews is FreeViews appended to out (a buffer reused).
func (b *Book) AppendFreeViews(out []FreeView, now time.Time) []FreeView {
	for _, name := range b.names {
		q := b.backends[name]
		out = append(out, FreeView{Name: name, Slots: max(0, q.cfg.MaxConcurrency-q.inUse),
			Normal: b.usable(q, false, now), Deep: b.usable(q, true, now)})
	}
	return out
}

// Describe is the class and the person's action of a backend's state
// (BackendStatus.State): the gateway's condition table, plus the book's
// own states (an operator's pause is a person's to end; a spent or paced
// hourly budget is a quota window).
func Describe(backend, state string) (class, action string) {
	switch state {
	case "", StateReady:
		return "", ""
	case "paused":
		return string(gateway.ClassPerson), "resume it: fano backend resume " + backend
	case "exhausted", "paced":
		return string(gateway.ClassQuota), ""
	}
	st := gateway.State(state)
	return string(gateway.ClassOf(st)), gateway.Action(st, backend)
}
