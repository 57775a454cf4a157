package allocator

import "time"

// hourWindowStart is the start of the hour window holding t: the latest
// HH:MM (MM = HourlyResetMinute, local to Location) not after t. It is
// computed on the instant, so a DST change never makes an hour window
// shorter or longer than 60 minutes.
func (b *Book) hourWindowStartAt(t time.Time) time.Time {
	local := t.In(b.loc)
	minutes := (local.Minute() - b.cfg.HourlyResetMinute + 60) % 60
	back := time.Duration(minutes)*time.Minute +
		time.Duration(local.Second())*time.Second +
		time.Duration(local.Nanosecond())
	return t.Add(-back)
}

// dayWindowStartAt is the start of the day window holding t: the latest
// DailyResetHour:00 in Location not after t.
func (b *Book) dayWindowStartAt(t time.Time) time.Time {
	local := t.In(b.loc)
	y, m, d := local.Date()
	start := time.Date(y, m, d, b.cfg.DailyResetHour, 0, 0, 0, b.loc)
	if start.After(t) {
		start = time.Date(y, m, d-1, b.cfg.DailyResetHour, 0, 0, 0, b.loc)
	}
	return start
}

// NextHourWindow is when the hour window after the one holding now starts.
func (b *Book) NextHourWindow(now time.Time) time.Time {
	return b.hourWindowStartAt(now).Add(time.Hour)
}

// NextDayWindow is when the day window after the one holding now starts.
func (b *Book) NextDayWindow(now time.Time) time.Time {
	start := b.dayWindowStartAt(now).In(b.loc)
	y, m, d := start.Date()
	next := time.Date(y, m, d+1, b.cfg.DailyResetHour, 0, 0, 0, b.loc)
	if !next.After(now) { // a DST gap moved the reset hour; never stall
		next = now.Add(24 * time.Hour)
	}
	return next
}
