package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"fano/gateway"
	"fano/gateway/ratelimit"
)

// How long a condition only a person ends lasts before fano looks again
// on its own (a request that finds it still there costs nothing: 402 and
// 401 are not charged).
const (
	CreditsRecheck     = 30 * time.Minute
	CredentialsRecheck = 30 * time.Minute
	NotServedRecheck   = 30 * time.Minute
	// longestRateWindow: a rate limit whose reset lies further away is a
	// quota window (an hour, a day), not a per-minute one.
	longestRateWindow = 10 * time.Minute
	// overloadPause holds a backend whose provider said it is overloaded
	// (when it named no time): the backend waits, not the task, which
	// another backend may serve meanwhile.
	overloadPause = 10 * time.Second
	// longestTransientPause bounds the pause an overloaded server may ask
	// for with Retry-After.
	longestTransientPause = 5 * time.Minute
	// defaultShortBackoff holds a model after a 429 that named no reset
	// when the backend has no limiter to derive one from.
	defaultShortBackoff = 15 * time.Second
)

// The headers read besides the OpenAI-style ones of package ratelimit:
// some gateways send a bare X-RateLimit-* triple whose reset is an epoch
// time (seconds or milliseconds).
const (
	headerBareLimit     = "X-Ratelimit-Limit"
	headerBareRemaining = "X-Ratelimit-Remaining"
	headerBareReset     = "X-Ratelimit-Reset"
)

// reply is an API's answer as the table reads it: status (for a 200
// carrying an error object, the status that error names), headers, the
// body's error code, type and message, and the raw body for patterns.
type reply struct {
	status  int
	header  http.Header
	body    string // the first 4 KiB, lower case
	code    string // the error object's code or type, lower case
	message string // the error's message, clipped and key-free
	now     time.Time
}

// rule is one row of the recogniser table: a status, a body pattern and a
// header test (each empty = any) and what such an answer means.
type rule struct {
	name     string
	statuses []int                  // nil: any status
	minMax   [2]int                 // or a range of statuses (both 0: unused)
	body     *regexp.Regexp         // nil: any body
	header   func(http.Header) bool // nil: any headers
	fault    func(b *Backend, r *reply) *gateway.Fault
}

func (ru rule) matches(r *reply) bool {
	if ru.statuses != nil || ru.minMax != [2]int{} {
		in := false
		for _, s := range ru.statuses {
			in = in || s == r.status
		}
		if ru.minMax != [2]int{} && r.status >= ru.minMax[0] && r.status <= ru.minMax[1] {
			in = true
		}
		if !in {
			return false
		}
	}
	if ru.body != nil && !ru.body.MatchString(r.body) {
		return false
	}
	return ru.header == nil || ru.header(r.header)
}

var (
	// creditsBody: what a 429 or 403 says when it is the account's money
	// (OpenAI's insufficient_quota), not a window.
	creditsBody = regexp.MustCompile(`insufficient_quota|insufficient[ _]credits|credit balance|out of credits|exceeded your current quota`)
	// dailyBody: a cap counted per day ("free-models-per-day", "requests
	// per day (RPD)", "daily limit").
	dailyBody = regexp.MustCompile(`per[-_ ]day|\bdaily\b|\brpd\b|per 24 ?h`)
	// tokensBody: the tokens-per-minute window ran out.
	tokensBody = regexp.MustCompile(`tokens per min|\btpm\b|tokens_per_min|token rate limit`)
	// modelBody: a 400 that says the model named is not served.
	modelBody = regexp.MustCompile(`model_not_found|no endpoints found|(?:invalid|unknown) model|model\b[^.]{0,100}?\b(?:not found|does not exist|is not available|is not supported|not a valid model|has been (?:deprecated|decommissioned|removed))`)
	// overloadBody: the provider is overloaded (Anthropic's
	// overloaded_error, passed through as 503 by some gateways).
	overloadBody = regexp.MustCompile(`overloaded`)
)

// recogniser is the table, first match wins. Every API answer that is a
// condition of the backend is one row here; an answer no row matches is
// the request's own fault (a 400 on its prompt).
var recogniser = []rule{
	{name: "credits spent", statuses: []int{402}, fault: creditsFault},
	{name: "credits spent, said in a 429 or 403", statuses: []int{403, 429}, body: creditsBody, fault: creditsFault},
	{name: "key refused", statuses: []int{401, 403}, fault: credentialsFault},
	{name: "model or address not served (or gone)", statuses: []int{404, 410}, fault: notServedFault},
	{name: "model not served, said in a 400", statuses: []int{400, 422}, body: modelBody, fault: notServedFault},
	{name: "daily cap", statuses: []int{429}, body: dailyBody, fault: dailyCapFault},
	{name: "tokens per minute, said in the body", statuses: []int{429}, body: tokensBody, fault: rateFault("tokens")},
	{name: "tokens per minute, said in the headers", statuses: []int{429}, header: spent("tokens"), fault: rateFault("tokens")},
	{name: "requests per minute", statuses: []int{429}, fault: rateFault("requests")},
	{name: "overloaded", statuses: []int{529}, fault: transientFault(overloadPause)},
	{name: "overloaded, passed through", minMax: [2]int{500, 599}, body: overloadBody, fault: transientFault(overloadPause)},
	{name: "server error", minMax: [2]int{500, 599}, fault: transientFault(gateway.TransientPause)},
	{name: "request timeout", statuses: []int{408}, fault: transientFault(gateway.TransientPause)},
	{name: "unexpected status (a proxy's empty or interim answer)", minMax: [2]int{100, 399}, fault: transientFault(gateway.TransientPause)},
}

// recognise reads an answer into the backend's condition: nil when no
// row matches (the request's own fault). now is when it was read.
func (b *Backend) recognise(req gateway.Request, status int, h http.Header, raw []byte, now time.Time) *gateway.Fault {
	r := b.readReply(status, h, raw, now)
	for _, ru := range b.table {
		if ru.matches(r) {
			f := ru.fault(b, r)
			f.Backend = b.cfg.Name
			f.Condition.Reason = fmt.Sprintf("task %s: HTTP %d%s", req.TaskID, status, f.Condition.Reason)
			if r.status != status {
				f.Condition.Reason += fmt.Sprintf(" (error %d in the body)", r.status)
			}
			return f
		}
	}
	return nil
}

// readReply parses what the table reads. A 200 with an error object is
// read as the status its code names (a number, or a known type); an
// unknown one as a 502.
func (b *Backend) readReply(status int, h http.Header, raw []byte, now time.Time) *reply {
	r := &reply{status: status, header: h, now: now, body: strings.ToLower(string(raw))}
	var e struct {
		Type  string          `json:"type"`
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(raw, &e) == nil && len(e.Error) > 0 && string(e.Error) != "null" {
		var obj struct {
			Message string          `json:"message"`
			Code    json.RawMessage `json:"code"`
			Type    string          `json:"type"`
		}
		var s string
		switch {
		case json.Unmarshal(e.Error, &obj) == nil:
			r.message = obj.Message
			code := strings.Trim(string(obj.Code), `"`)
			r.code = strings.ToLower(code)
			if n, err := strconv.Atoi(code); err == nil && n >= 400 && n <= 599 && status == http.StatusOK {
				r.status = n
			} else if status == http.StatusOK {
				r.status = statusOfType(strings.ToLower(obj.Type + " " + code))
			}
		case json.Unmarshal(e.Error, &s) == nil:
			r.message = s
			if status == http.StatusOK {
				r.status = statusOfType(strings.ToLower(s))
			}
		}
	}
	if r.message == "" && status != http.StatusOK {
		r.message = strings.TrimSpace(string(raw))
	}
	return r
}

// statusOfType is the status an error type or code of a 200's error
// object stands for.
func statusOfType(t string) int {
	switch {
	case strings.Contains(t, "insufficient_quota"), strings.Contains(t, "credit"), strings.Contains(t, "payment"):
		return http.StatusPaymentRequired
	case strings.Contains(t, "rate_limit"), strings.Contains(t, "rate limit"), strings.Contains(t, "too_many"):
		return http.StatusTooManyRequests
	case strings.Contains(t, "overloaded"):
		return 529
	case strings.Contains(t, "authentication"), strings.Contains(t, "invalid_api_key"), strings.Contains(t, "unauthorized"):
		return http.StatusUnauthorized
	case strings.Contains(t, "permission"):
		return http.StatusForbidden
	}
	return http.StatusBadGateway
}

func (b *Backend) detail(r *reply) string {
	if r.message == "" {
		return ""
	}
	return ": " + b.clip(r.message)
}

func creditsFault(b *Backend, r *reply) *gateway.Fault {
	return gateway.PersonFault("", gateway.StateCredits, ": credits spent"+b.detail(r), r.now.Add(CreditsRecheck))
}

func credentialsFault(b *Backend, r *reply) *gateway.Fault {
	return gateway.PersonFault("", gateway.StateCredentials,
		fmt.Sprintf(": the key in %s was refused%s", b.keyEnvName(), b.detail(r)), r.now.Add(CredentialsRecheck))
}

// notServedFault: the provider does not serve the model (or the address)
// the config names. Every request would fail the same way, whatever its
// task: the backend waits for a person, and its tasks go elsewhere.
func notServedFault(b *Backend, r *reply) *gateway.Fault {
	return gateway.PersonFault("", gateway.StateNotServed,
		fmt.Sprintf(": model %s at %s is not served%s", b.cfg.Model, b.endpoint, b.detail(r)), r.now.Add(NotServedRecheck))
}

// transientFault is a passing fault that holds the backend for pause, or
// for the server's Retry-After (at most a few minutes) when it gave one.
func transientFault(pause time.Duration) func(b *Backend, r *reply) *gateway.Fault {
	return func(b *Backend, r *reply) *gateway.Fault {
		until := r.now.Add(pause)
		if d, ok := ratelimit.RetryAfter(r.header, r.now); ok && d > 0 {
			until = r.now.Add(min(d, longestTransientPause))
		}
		return gateway.TransientFault("", b.detail(r), until, nil)
	}
}

// dailyCapFault parks the model until the cap's reset: the bare
// X-RateLimit-Reset (epoch), else a reset header at least an hour away
// (a shorter Retry-After on a daily cap is a generic hint, and waiting it
// out is a 429 every few seconds all day), else the next UTC midnight.
func dailyCapFault(b *Backend, r *reply) *gateway.Fault {
	until, ok := epochReset(r.header, r.now)
	if !ok {
		if t, tok := headerReset(r.header, "requests", r.now); tok && t.Sub(r.now) >= time.Hour {
			until, ok = t, true
		}
	}
	if !ok {
		until = nextUTCMidnight(r.now)
	}
	return gateway.QuotaFault("", "day", b.detail(r), r.now, until)
}

// rateFault reads a 429 of the window that ran out ("requests" or
// "tokens"): it ends at that window's reset; with no reset given, after
// a short backoff from the paced rate. A reset beyond a few minutes is a
// quota window, named by its length.
func rateFault(window string) func(b *Backend, r *reply) *gateway.Fault {
	return func(b *Backend, r *reply) *gateway.Fault {
		until, ok := headerReset(r.header, window, r.now)
		if !ok {
			until, ok = epochReset(r.header, r.now)
		}
		if !ok {
			until = r.now.Add(b.shortBackoff())
		}
		if d := until.Sub(r.now); d > longestRateWindow {
			w := "hour"
			if d > 2*time.Hour {
				w = "day"
			}
			return gateway.QuotaFault("", w, b.detail(r), r.now, until)
		}
		return gateway.RateFault("", window, b.detail(r), r.now, until)
	}
}

func (b *Backend) shortBackoff() time.Duration {
	if b.cfg.Limiter != nil {
		return b.cfg.Limiter.ShortBackoff()
	}
	return defaultShortBackoff
}

// spent: the headers say window ("requests" or "tokens") has nothing
// left.
func spent(window string) func(http.Header) bool {
	return func(h http.Header) bool {
		n, ok := headerCount(h, "X-Ratelimit-Remaining-"+window)
		return ok && n == 0
	}
}

// headerReset is the end of window named by the OpenAI-style headers:
// its own reset when its remaining count is 0 (finer than Retry-After's
// whole seconds), else Retry-After, else its own reset. Zero durations
// and unreadable values are no time.
func headerReset(h http.Header, window string, now time.Time) (time.Time, bool) {
	reset, okReset := ratelimit.ParseDuration(h.Get("X-Ratelimit-Reset-" + window))
	okReset = okReset && reset > 0
	if spent(window)(h) && okReset {
		return now.Add(reset), true
	}
	if d, ok := ratelimit.RetryAfter(h, now); ok && d > 0 {
		return now.Add(d), true
	}
	if okReset {
		return now.Add(reset), true
	}
	return time.Time{}, false
}

// epochReset reads the bare X-RateLimit-Reset: an epoch time in
// milliseconds or seconds, or (a small number, a duration) a delay. A
// time not after now, -1 and garbage are no time.
func epochReset(h http.Header, now time.Time) (time.Time, bool) {
	v := strings.TrimSpace(h.Get(headerBareReset))
	if v == "" {
		return time.Time{}, false
	}
	var t time.Time
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		switch {
		case f >= 1e12:
			t = time.UnixMilli(int64(f)).UTC()
		case f >= 1e9:
			t = time.Unix(int64(f), 0).UTC()
		case f > 0:
			t = now.Add(time.Duration(f * float64(time.Second)))
		default:
			return time.Time{}, false
		}
	} else if d, err := time.ParseDuration(v); err == nil && d > 0 {
		t = now.Add(d)
	} else {
		return time.Time{}, false
	}
	if !t.After(now) {
		return time.Time{}, false
	}
	return t, true
}

func nextUTCMidnight(now time.Time) time.Time {
	u := now.UTC()
	return time.Date(u.Year(), u.Month(), u.Day(), 0, 0, 0, 0, time.UTC).AddDate(0, 0, 1)
}

func headerCount(h http.Header, name string) (int, bool) {
	n, err := strconv.Atoi(strings.TrimSpace(h.Get(name)))
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}
