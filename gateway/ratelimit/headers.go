package ratelimit

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The OpenAI-style rate-limit headers a Limiter learns from.
const (
	HeaderLimit      = "X-Ratelimit-Limit-Requests"
	HeaderRemaining  = "X-Ratelimit-Remaining-Requests"
	HeaderReset      = "X-Ratelimit-Reset-Requests"
	HeaderRetryAfter = "Retry-After"

	HeaderLimitTokens     = "X-Ratelimit-Limit-Tokens"
	HeaderRemainingTokens = "X-Ratelimit-Remaining-Tokens"
	HeaderResetTokens     = "X-Ratelimit-Reset-Tokens"
)

// ParseDuration reads a reset time as providers send it: a Go duration
// ("1m0s", "6s", "120ms", "1h2m3.5s") or a plain number of seconds ("20",
// "0.5"). Negative or unreadable values report false.
func ParseDuration(s string) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	if d, err := time.ParseDuration(s); err == nil {
		return d, d >= 0
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f > 1e9 {
		return 0, false
	}
	return time.Duration(f * float64(time.Second)), true
}

// RetryAfter reads a Retry-After header: delay seconds or an HTTP date
// (then relative to now; a date in the past is zero).
func RetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get(HeaderRetryAfter))
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseFloat(v, 64); err == nil {
		if n < 0 || n > 1e9 {
			return 0, false
		}
		return time.Duration(n * float64(time.Second)), true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	if d := t.Sub(now); d > 0 {
		return d, true
	}
	return 0, true
}

// ResetAfter says how long a 429 asks us to wait. When the request budget
// is what ran out (x-ratelimit-remaining-requests: 0), the finer
// x-ratelimit-reset-requests is used (Retry-After is rounded up to whole
// seconds); otherwise Retry-After, which also covers limits other than
// the request count (tokens); failing both, x-ratelimit-reset-requests.
// False means the server gave no time.
func ResetAfter(h http.Header, now time.Time) (time.Duration, bool) {
	reset, okReset := ParseDuration(h.Get(HeaderReset))
	if rem, ok := headerInt(h, HeaderRemaining); ok && rem == 0 && okReset {
		return reset, true
	}
	if d, ok := RetryAfter(h, now); ok {
		return d, true
	}
	return reset, okReset
}

func headerInt(h http.Header, name string) (int, bool) {
	v := strings.TrimSpace(h.Get(name))
	if v == "" {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}
