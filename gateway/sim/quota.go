package sim

import (
	"time"

	"fano/gateway"
)

// window counts the uses of one quota window [start, next).
type window struct {
	start, next time.Time
	used        int
}

// holds reports whether now is in w: then the window's bounds need not
// be worked out again (time.Date on every request was a share of the
// end-to-end benchmark's CPU).
func (w *window) holds(now time.Time) bool { return !now.Before(w.start) && now.Before(w.next) }

// roll moves w to the window [start, next), forgetting old uses.
func (w *window) roll(start, next time.Time) {
	if !w.start.Equal(start) {
		*w = window{start: start, next: next}
	}
	w.next = next
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

// admitLocked uses one request of quota at now, or refuses with the quota
// window that ran out (a *gateway.Fault of StateCapped, "hour" or "day",
// until its reset), as an API's recogniser or a browser's notice reads a
// real one. A refused request uses nothing. When both the hourly and the
// deep limit refuse, the later reset is reported. b.mu must be held.
func (b *Backend) admitLocked(now time.Time, deep bool) *gateway.Fault {
	if !b.hour.holds(now) {
		b.hour.roll(hourWindow(now, b.cfg.HourlyResetMinute))
	}
	if !b.day.holds(now) {
		b.day.roll(dayWindow(now, b.cfg.DailyResetHour))
	}
	hn, dn := b.hour.next, b.day.next
	v := voiceFor(b.cfg.Style)

	var refusal *gateway.Fault
	refuse := func(next time.Time, window, format string) {
		if refusal == nil || next.After(refusal.Condition.Until) {
			refusal = gateway.QuotaFault(b.cfg.Name, window, banner(format, next), now, next)
		}
	}
	if b.cfg.HourlyLimit > 0 && b.hour.used >= b.cfg.HourlyLimit {
		refuse(hn, "hour", v.hourBanner)
	}
	if deep {
		switch {
		case b.cfg.DeepDailyLimit <= 0:
			refuse(dn, "day", v.noDeep)
		case b.day.used >= b.cfg.DeepDailyLimit:
			refuse(dn, "day", v.deepBanner)
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
