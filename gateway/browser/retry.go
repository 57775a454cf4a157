package browser

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// BannerRetry reads a rate-limit banner's text with the profile's patterns.
// It returns how long to wait (0: no time given, wait for the next quota
// window) and a short reason for logs and status. now is the wall clock in
// the time zone the site shows its times in (the browser's, normally the
// machine's local zone).
func (p *Profile) BannerRetry(text string, now time.Time) (time.Duration, string) {
	text = strings.Join(strings.Fields(text), " ")
	reason := "rate-limit banner: " + truncate(text, 200)
	for _, pt := range p.RateLimit.Patterns {
		m := pt.re.FindStringSubmatch(text)
		if m == nil {
			continue
		}
		switch pt.Retry {
		case RetryAbsolute:
			if d, ok := untilClock(m[pt.re.SubexpIndex("time")], now); ok {
				return d, reason
			}
			return 0, reason + " (could not read its time; waiting for the next window)"
		case RetryRelative:
			if d, ok := parseRelative(m[pt.re.SubexpIndex("in")]); ok {
				return d, reason
			}
			return 0, reason + " (could not read its duration; waiting for the next window)"
		default:
			return 0, reason
		}
	}
	return 0, reason
}

var (
	reRelPart = regexp.MustCompile(`(?i)\b(\d+(?:\.\d+)?\s*|(?:an?|one)\s+)(days?|d|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)\b`)
	reClock   = regexp.MustCompile(`(?i)\b(\d{1,2})(?:[:.](\d{2}))?\s*(a\.?m\.?|p\.?m\.?)?(?:\W|$)`)
	weekdays  = map[string]time.Weekday{
		"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday,
		"thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday,
	}
	reWeekday = regexp.MustCompile(`(?i)\b(sun|mon|tue|wed|thu|fri|sat)[a-z]*\.?\b`)
)

// parseRelative reads a duration written for people: "27 minutes",
// "1 hour and 5 minutes", "an hour", "2h 30m", "45 sec".
func parseRelative(s string) (time.Duration, bool) {
	var total time.Duration
	found := false
	for _, m := range reRelPart.FindAllStringSubmatch(s, -1) {
		var n float64
		switch strings.ToLower(strings.TrimSpace(m[1])) {
		case "a", "an", "one":
			n = 1
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

// untilClock reads a clock time ("3:45 PM", "3pm", "15:45", "Thu 9:00 AM",
// "tomorrow at 8 AM") and returns the time from now until its next
// occurrence in now's location.
func untilClock(s string, now time.Time) (time.Duration, bool) {
	m := reClock.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	h, _ := strconv.Atoi(m[1])
	min := 0
	if m[2] != "" {
		min, _ = strconv.Atoi(m[2])
	}
	switch ampm := strings.ToLower(strings.ReplaceAll(m[3], ".", "")); ampm {
	case "am", "pm":
		if h < 1 || h > 12 {
			return 0, false
		}
		h %= 12
		if ampm == "pm" {
			h += 12
		}
	default:
		if m[2] == "" { // a bare number is not a clock time
			return 0, false
		}
	}
	if h > 23 || min > 59 {
		return 0, false
	}
	at := time.Date(now.Year(), now.Month(), now.Day(), h, min, 0, 0, now.Location())
	lower := strings.ToLower(s)
	switch wd := reWeekday.FindStringSubmatch(s); {
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
	return at.Sub(now), true
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
