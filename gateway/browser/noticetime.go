// Reading the times and durations that sites write in their limit
// notices ("try again in 27 minutes", "resets at 5:00 PM MDT on Sep 9").

package browser

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

var (
	reRelPart = regexp.MustCompile(`(?i)\b(\d+(?:\.\d+)?\s*|(?:a few|few|several|an?|one)\s+)(days?|d|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)\b`)
	reClock   = regexp.MustCompile(`(?i)\b(\d{1,2})(?:[:.](\d{2}))?\s*(a\.?m\.?|p\.?m\.?)?(?:\W|$)`)
	weekdays  = map[string]time.Weekday{
		"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday,
		"thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday,
	}
	reWeekday = regexp.MustCompile(`(?i)\b(sun|mon|tue|wed|thu|fri|sat)[a-z]*\.?(?:\W|$)`)
	months    = map[string]time.Month{
		"jan": time.January, "feb": time.February, "mar": time.March, "apr": time.April,
		"may": time.May, "jun": time.June, "jul": time.July, "aug": time.August,
		"sep": time.September, "oct": time.October, "nov": time.November, "dec": time.December,
	}
	monthRE = `(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?`
	// "Jul 19", "September 9th, 2026"
	reMonthDay = regexp.MustCompile(`(?i)\b` + monthRE + `\s+(\d{1,2})(?:st|nd|rd|th)?\b(?:,?\s+(\d{4})\b)?`)
	// "19 Jul", "9th of September 2026"
	reDayMonth = regexp.MustCompile(`(?i)\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?` + monthRE + `(?:,?\s+(\d{4})\b)?`)
	// "2026-09-09"
	reISODate = regexp.MustCompile(`\b(\d{4})-(\d{2})-(\d{2})\b`)
	// A zone right after the clock: "MDT", "(UTC)", "GMT+2", "UTC-07:00".
	reZone = regexp.MustCompile(`^\s*\(?(?:(UTC|GMT)\s*([+-])(\d{1,2})(?::?(\d{2}))?|([A-Z]{2,5}))\b`)
)

// zoneOffsets are the zone abbreviations sites print after a time, in
// hours east of UTC. Ambiguous ones take their most common meaning for
// English-language sites (IST: India).
var zoneOffsets = map[string]float64{
	"UTC": 0, "GMT": 0, "Z": 0, "WET": 0, "WEST": 1, "BST": 1, "CET": 1, "CEST": 2,
	"EET": 2, "EEST": 3, "MSK": 3, "IST": 5.5, "SGT": 8, "HKT": 8, "JST": 9, "KST": 9,
	"AEST": 10, "AEDT": 11, "NZST": 12, "NZDT": 13,
	"EST": -5, "EDT": -4, "CST": -6, "CDT": -5, "MST": -7, "MDT": -6,
	"PST": -8, "PDT": -7, "AKST": -9, "AKDT": -8, "HST": -10,
	"ET": -5, "CT": -6, "MT": -7, "PT": -8, // generic US zones, standard time
}

// parseRelative reads a duration written for people: "27 minutes",
// "1 hour and 5 minutes", "an hour", "2h 30m", "45 sec", "a few minutes"
// (three).
func parseRelative(s string) (time.Duration, bool) {
	var total time.Duration
	found := false
	for _, m := range reRelPart.FindAllStringSubmatch(s, -1) {
		var n float64
		switch strings.ToLower(strings.TrimSpace(m[1])) {
		case "a", "an", "one":
			n = 1
		case "a few", "few":
			n = 3 // "wait a few minutes": soon, not at once
		case "several":
			n = 5
		default:
			v, err := strconv.ParseFloat(strings.TrimSpace(m[1]), 64)
			if err != nil {
				continue
			}
			n = v
		}
		var unit time.Duration
		switch u := strings.ToLower(m[2]); {
		case strings.HasPrefix(u, "d"):
			unit = 24 * time.Hour
		case strings.HasPrefix(u, "h"):
			unit = time.Hour
		case strings.HasPrefix(u, "m"):
			unit = time.Minute
		default:
			unit = time.Second
		}
		total += time.Duration(n * float64(unit))
		found = true
	}
	return total, found && total > 0
}

// untilClock is parseReset as a duration from now.
func untilClock(s string, now time.Time) (time.Duration, bool) {
	at, ok := parseReset(s, now)
	if !ok {
		return 0, false
	}
	return at.Sub(now), true
}

// parseReset reads the reset time of a limit notice: a clock time ("3:45
// PM", "3pm", "15:45"), optionally with a zone ("5:00 PM MDT"), a date
// ("Jul 19, 3:12 PM", "5:00 PM MDT on Sep 9", "on 2026-09-09"), a weekday
// ("Thu 9:00 AM") or "tomorrow"; a text with no clock or date but a
// duration ("in 3 hours") is read as now plus that. A clock time without a
// day is its next occurrence; a date without a year is this year's, or
// next year's when this year's passed more than a day ago; a date without
// a clock is the start of that day.
func parseReset(s string, now time.Time) (time.Time, bool) {
	loc := now.Location()
	rest := s
	// The date first, so that its day number is not read as a clock time.
	var (
		year        int
		month       time.Month
		day         int
		haveDate    bool
		yearGiven   bool
		blankedDate = func(loc []int) {
			rest = rest[:loc[0]] + strings.Repeat(" ", loc[1]-loc[0]) + rest[loc[1]:]
		}
	)
	if m := reISODate.FindStringSubmatchIndex(rest); m != nil {
		year, _ = strconv.Atoi(rest[m[2]:m[3]])
		mo, _ := strconv.Atoi(rest[m[4]:m[5]])
		day, _ = strconv.Atoi(rest[m[6]:m[7]])
		month, haveDate, yearGiven = time.Month(mo), true, true
		blankedDate(m[:2])
	} else if m := reMonthDay.FindStringSubmatchIndex(rest); m != nil {
		month = months[strings.ToLower(rest[m[2]:m[3]])[:3]]
		day, _ = strconv.Atoi(rest[m[4]:m[5]])
		if m[6] >= 0 {
			year, _ = strconv.Atoi(rest[m[6]:m[7]])
			yearGiven = true
		}
		haveDate = true
		blankedDate(m[:2])
	} else if m := reDayMonth.FindStringSubmatchIndex(rest); m != nil {
		day, _ = strconv.Atoi(rest[m[2]:m[3]])
		month = months[strings.ToLower(rest[m[4]:m[5]])[:3]]
		if m[6] >= 0 {
			year, _ = strconv.Atoi(rest[m[6]:m[7]])
			yearGiven = true
		}
		haveDate = true
		blankedDate(m[:2])
	}
	if haveDate && (month < time.January || month > time.December || day < 1 || day > 31) {
		return time.Time{}, false
	}

	h, mi, clockEnd, haveClock := findClock(rest)
	if haveClock {
		if z, ok := zoneAt(rest[clockEnd:]); ok {
			loc = z
		}
	}
	lower := strings.ToLower(rest)
	switch {
	case haveDate:
		if !yearGiven {
			year = now.Year()
		}
		at := time.Date(year, month, day, h, mi, 0, 0, loc)
		if at.Day() != day { // Feb 30 and the like
			return time.Time{}, false
		}
		if !yearGiven && at.Before(now.Add(-24*time.Hour)) {
			at = time.Date(year+1, month, day, h, mi, 0, 0, loc)
		}
		return at, true
	case !haveClock:
		if strings.Contains(lower, "tomorrow") {
			t := now.In(loc)
			return time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, loc), true
		}
		if d, ok := parseRelative(rest); ok {
			return now.Add(d), true
		}
		return time.Time{}, false
	}
	t := now.In(loc)
	at := time.Date(t.Year(), t.Month(), t.Day(), h, mi, 0, 0, loc)
	switch wd := reWeekday.FindStringSubmatch(rest); {
	case wd != nil:
		want := weekdays[strings.ToLower(wd[1])[:3]]
		for at.Weekday() != want || !at.After(now) {
			at = at.AddDate(0, 0, 1)
		}
	case strings.Contains(lower, "tomorrow"):
		at = at.AddDate(0, 0, 1)
	default:
		for !at.After(now) {
			at = at.AddDate(0, 0, 1)
		}
	}
	return at, true
}

// findClock returns the first clock time in s: hours and minutes with a
// colon or am/pm ("3:12 PM", "15:45", "3pm"); a bare number is not one.
// end is where the match ends in s.
func findClock(s string) (h, m, end int, ok bool) {
	for _, g := range reClock.FindAllStringSubmatchIndex(s, -1) {
		h, _ = strconv.Atoi(s[g[2]:g[3]])
		m = 0
		hasMin := g[4] >= 0
		if hasMin {
			m, _ = strconv.Atoi(s[g[4]:g[5]])
		}
		ampm := ""
		if g[6] >= 0 {
			ampm = strings.ToLower(strings.ReplaceAll(s[g[6]:g[7]], ".", ""))
		}
		switch ampm {
		case "am", "pm":
			if h < 1 || h > 12 {
				return 0, 0, 0, false
			}
			h %= 12
			if ampm == "pm" {
				h += 12
			}
		default:
			if !hasMin {
				continue // a bare number: a day, a count
			}
		}
		if h > 23 || m > 59 {
			return 0, 0, 0, false
		}
		end = g[1]
		if g[6] < 0 && g[5] >= 0 {
			end = g[5]
		} else if g[6] >= 0 {
			end = g[7]
		}
		return h, m, end, true
	}
	return 0, 0, 0, false
}

// zoneAt reads a zone at the start of s ("MDT", "(UTC)", "GMT+2").
func zoneAt(s string) (*time.Location, bool) {
	m := reZone.FindStringSubmatch(s)
	if m == nil {
		return nil, false
	}
	if m[5] != "" {
		off, ok := zoneOffsets[m[5]]
		if !ok {
			return nil, false
		}
		return time.FixedZone(m[5], int(off*3600)), true
	}
	h, _ := strconv.Atoi(m[3])
	mins, _ := strconv.Atoi(m[4])
	if h > 14 || mins > 59 {
		return nil, false
	}
	secs := h*3600 + mins*60
	if m[2] == "-" {
		secs = -secs
	}
	return time.FixedZone(m[1]+m[2]+m[3], secs), true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
