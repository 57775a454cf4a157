package allocator

import (
	"fmt"
	"time"

	"fano/pb"
)

// Apply changes the book by one allocator event. It runs live and on
// replay and reads no clock: everything it derives comes from the event
// and the config. An event for a backend the config no longer has is
// ignored (its name is reported by DroppedBackends); any event that is not
// an allocator event is an error.
func (b *Book) Apply(e *pb.Event) error {
	switch body := e.GetBody().(type) {
	case *pb.Event_QuotaUsed:
		u := body.QuotaUsed
		q := b.lookup(u.GetBackend())
		if q == nil {
			return nil
		}
		q.settle(u.GetDeepMode())
		q.hourlyUsed++
		if u.GetDeepMode() {
			q.deepUsed++
		}
		q.lastRequestAt = e.GetAt()

	case *pb.Event_RateLimitRecorded:
		r := body.RateLimitRecorded
		q := b.lookup(r.GetBackend())
		if q == nil {
			return nil
		}
		until := r.GetUntil()
		if until == 0 { // parked until the next hour window
			until = b.NextHourWindow(time.Unix(0, e.GetAt())).UnixNano()
		}
		if until > q.rateLimitedUntil {
			q.rateLimitedUntil = until
			q.capped = r.GetCap()
		}
		if !r.GetCap() {
			return nil // a per-minute limit says nothing about the hour
		}
		// A usage cap: the spec's drop to 80 % of what went through this
		// hour, at least 10 (or the configured limit if smaller); never a
		// rise. The estimate paces (pacedUntil); it does not park.
		floor := min(10, q.cfg.HourlyLimit)
		est := min(q.effectiveLimit(), max(floor, q.hourlyUsed*8/10))
		if est >= q.cfg.HourlyLimit {
			est = 0
		}
		q.limitEstimate = est
		q.limitedThisHour = true
		q.cleanHours = 0

	case *pb.Event_QuotaReleased:
		r := body.QuotaReleased
		if q := b.lookup(r.GetBackend()); q != nil {
			q.hourlyUsed = max(0, q.hourlyUsed-1)
			if r.GetDeepMode() {
				q.deepUsed = max(0, q.deepUsed-1)
			}
		}

	case *pb.Event_BackendConditionRecorded:
		c := body.BackendConditionRecorded
		if q := b.lookup(c.GetBackend()); q != nil {
			q.condState, q.condReason, q.condUntil = c.GetState(), c.GetReason(), c.GetUntil()
			if d := q.condDecided; d != nil && *d == (condition{c.GetState(), c.GetReason(), c.GetUntil()}) {
				q.condDecided = nil
			}
		}

	case *pb.Event_RateLearned:
		r := body.RateLearned
		if q := b.lookup(r.GetBackend()); q != nil {
			q.learnedLimit, q.learnedWindow = int(r.GetLimitPerWindow()), r.GetWindowNs()
		}

	case *pb.Event_HourWindowReset:
		ws := body.HourWindowReset.GetWindowStart()
		if ws <= b.hourWindowStart {
			return nil // stale or repeated
		}
		first := b.hourWindowStart == 0
		b.hourWindowStart = ws
		if first {
			return nil // uses before the first tick belong to this window
		}
		for _, name := range b.names {
			b.backends[name].endHour(ws, b.cfg)
		}

	case *pb.Event_DayWindowReset:
		ws := body.DayWindowReset.GetWindowStart()
		if ws <= b.dayWindowStart {
			return nil
		}
		first := b.dayWindowStart == 0
		b.dayWindowStart = ws
		if first {
			return nil
		}
		for _, q := range b.backends {
			q.deepUsed = 0
		}

	case *pb.Event_BackendPaused:
		p := body.BackendPaused
		if q := b.lookup(p.GetBackend()); q != nil {
			q.paused = true
			q.pauseReason = p.GetReason()
		}

	case *pb.Event_BackendResumed:
		if q := b.lookup(body.BackendResumed.GetBackend()); q != nil {
			q.paused = false
			q.pauseReason = ""
		}

	default:
		return fmt.Errorf("allocator: apply: not an allocator event: %T", e.GetBody())
	}
	return nil
}

// lookup returns the backend's quota, or nil after noting an unknown name.
func (b *Book) lookup(name string) *quota {
	q, ok := b.backends[name]
	if !ok {
		b.drop(name)
		return nil
	}
	return q
}

// endHour closes an hour window: the count restarts, rate limits that
// ended are cleared, and a backend that was not rate limited in the ended
// hour earns a clean hour; every RecoveryCleanHours clean hours raise a
// lowered estimate by RecoveryStepPercent of the configured limit (at
// least 1), up to the configured limit.
func (q *quota) endHour(windowStart int64, cfg Config) {
	q.hourlyUsed = 0
	if q.rateLimitedUntil != 0 && q.rateLimitedUntil <= windowStart {
		q.rateLimitedUntil = 0
		q.capped = false
	}
	if q.limitedThisHour {
		q.limitedThisHour = false
		q.cleanHours = 0
		return
	}
	q.cleanHours++
	if q.limitEstimate == 0 || q.cleanHours%cfg.RecoveryCleanHours != 0 {
		return
	}
	step := max(1, q.cfg.HourlyLimit*cfg.RecoveryStepPercent/100)
	q.limitEstimate += step
	if q.limitEstimate >= q.cfg.HourlyLimit {
		q.limitEstimate = 0
	}
}
