package sim

import (
	"time"

	"fano/gateway"
)

// window counts the uses of one quota window.
type window struct {
	start time.Time
	used  int
}

// roll moves w to the window starting at start, forgetting old uses.
func (w *window) roll(start time.Time) {
	if !w.start.Equal(start) {
		*w = window{start: start}
	}
}

// hourWindow returns the hour window holding now: it starts at minute
// resetMinute (UTC) of an hour and the next one starts an hour later.
func hourWindow(now time.Time, resetMinute int) (start, next time.Time) {
	now = now.UTC()
	m := time.Duration(((resetMinute%60)+60)%60) * time.Minute
	start = now.Truncate(time.Hour).Add(m)
	if start.After(now) {
		start = start.Add(-time.Hour)
	}
	return start, start.Add(time.Hour)
}

// dayWindow returns the day window holding now: it starts at resetHour:00
// UTC and the next one starts a day later.
func dayWindow(now time.Time, resetHour int) (start, next time.Time) {
	now = now.UTC()
	h := ((resetHour % 24) + 24) % 24
	start = time.Date(now.Year(), now.Month(), now.Day(), h, 0, 0, 0, time.UTC)
	if start.After(now) {
		start = start.AddDate(0, 0, -1)
	}
	return start, start.AddDate(0, 0, 1)
}

// admitLocked uses one request of quota at now, or says when to come back.
// A refused request uses nothing. When both the hourly and the deep limit
// refuse, the later reset is reported. b.mu must be held.
func (b *Backend) admitLocked(now time.Time, deep bool) *gateway.RateLimitedError {
	hs, hn := hourWindow(now, b.cfg.HourlyResetMinute)
	ds, dn := dayWindow(now, b.cfg.DailyResetHour)
	b.hour.roll(hs)
	b.day.roll(ds)
	v := voiceFor(b.cfg.Style)

	var refusal *gateway.RateLimitedError
	refuse := func(next time.Time, format string) {
		if refusal == nil || next.Sub(now) > refusal.RetryAfter {
			refusal = &gateway.RateLimitedError{Backend: b.cfg.Name, RetryAfter: next.Sub(now), Reason: banner(format, next)}
		}
	}
	if b.cfg.HourlyLimit > 0 && b.hour.used >= b.cfg.HourlyLimit {
		refuse(hn, v.hourBanner)
	}
	if deep {
		switch {
		case b.cfg.DeepDailyLimit <= 0:
			refuse(dn, v.noDeep)
		case b.day.used >= b.cfg.DeepDailyLimit:
			refuse(dn, v.deepBanner)
		}
	}
	if refusal != nil {
		return refusal
	}
	b.hour.used++
	if deep {
		b.day.used++
	}
	return nil
}
