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

// refusal says why q may not be used now, or nil if it may.
func (b *Book) refusal(q *quota, deep bool, now time.Time) *NoQuotaError {
	nq := &NoQuotaError{Backend: q.cfg.Name, Deep: deep}
	if q.paused {
		nq.Reason = "paused"
		if q.pauseReason != "" {
			nq.Reason += ": " + q.pauseReason
		}
		return nq
	}
	var reasons []string
	var until time.Time
	later := func(t time.Time) {
		if t.After(until) {
			until = t
		}
	}
	if q.rateLimitedUntil != 0 && now.UnixNano() < q.rateLimitedUntil {
		t := time.Unix(0, q.rateLimitedUntil)
		reasons = append(reasons, "rate limited")
		later(t)
	}
	if usable := q.usable(b.cfg.BufferPercent); q.hourlyUsed+q.inflight >= usable {
		reasons = append(reasons, fmt.Sprintf("hourly budget used (%d+%d of %d)", q.hourlyUsed, q.inflight, usable))
		later(b.NextHourWindow(now))
	}
	if deep && q.deepUsed+q.inflightDeep >= q.cfg.DeepDailyLimit {
		if q.cfg.DeepDailyLimit == 0 {
			reasons = append(reasons, "no deep mode")
			// Until stays as it is: never, unless another reason set it.
		} else {
			reasons = append(reasons, fmt.Sprintf("deep-mode budget used (%d+%d of %d)",
				q.deepUsed, q.inflightDeep, q.cfg.DeepDailyLimit))
			later(b.NextDayWindow(now))
		}
	}
	if len(reasons) == 0 {
		return nil
	}
	if deep && q.cfg.DeepDailyLimit == 0 {
		until = time.Time{} // deep mode never comes
	}
	nq.Reason = strings.Join(reasons, "; ")
	nq.Until = until
	return nq
}

// DecideRateLimit returns the RateLimitRecorded event for a "too many"
// answer of backend: usable again at now+retryAfter, or at the next hour
// window when retryAfter is zero (or negative). An unknown backend still
// gets its event; Apply ignores it.
func (b *Book) DecideRateLimit(backend string, retryAfter time.Duration, taskID string, now time.Time) *pb.Event {
	until := now.Add(retryAfter)
	if retryAfter <= 0 {
		until = b.NextHourWindow(now)
	}
	return &pb.Event{At: now.UnixNano(), Body: &pb.Event_RateLimitRecorded{RateLimitRecorded: &pb.RateLimitRecorded{
		Backend: backend, Until: until.UnixNano(), TaskId: taskID,
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
