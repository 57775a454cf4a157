package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/gateway"
	"fano/gateway/ratelimit"
)

// recogniserCase is one answer shape and the condition it must be read
// into. kind "permanent" with no state: no row matches (the request's own
// fault).
type recogniserCase struct {
	name    string
	status  int
	headers map[string]string
	body    string
	state   gateway.State
	window  string
	until   time.Duration // from now; -1: the next UTC midnight
	kind    string
}

// now is noon, so the next UTC midnight is 12 h away.
var recogniseNow = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

func recogniserCases() []recogniserCase {
	epochMs := strconv.FormatInt(recogniseNow.Add(7*time.Hour).UnixMilli(), 10)
	epochS := strconv.FormatInt(recogniseNow.Add(5*time.Hour).Unix(), 10)
	soonMs := strconv.FormatInt(recogniseNow.Add(30*time.Second).UnixMilli(), 10)
	errBody := func(msg string) string { return fmt.Sprintf(`{"error":{"message":%q,"code":429}}`, msg) }
	return []recogniserCase{
		{name: "402 credits", status: 402, body: `{"error":{"message":"Insufficient credits"}}`,
			state: gateway.StateCredits, until: CreditsRecheck, kind: "unavailable"},
		{name: "429 insufficient_quota is credits", status: 429, body: `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota"}}`,
			state: gateway.StateCredits, until: CreditsRecheck, kind: "unavailable"},
		{name: "401 key refused", status: 401, body: `{"error":{"message":"No auth credentials found"}}`,
			state: gateway.StateCredentials, until: CredentialsRecheck, kind: "credentials"},
		{name: "403 key refused", status: 403, body: `{"error":{"message":"forbidden"}}`,
			state: gateway.StateCredentials, until: CredentialsRecheck, kind: "credentials"},
		{name: "daily cap, reset in epoch ms", status: 429, body: errBody("Rate limit exceeded: free-models-per-day"),
			headers: map[string]string{"X-RateLimit-Limit": "50", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": epochMs},
			state:   gateway.StateCapped, window: "day", until: 7 * time.Hour, kind: "rate_limited"},
		{name: "daily cap, reset in epoch seconds", status: 429, body: errBody("daily limit reached"),
			headers: map[string]string{"X-RateLimit-Reset": epochS},
			state:   gateway.StateCapped, window: "day", until: 5 * time.Hour, kind: "rate_limited"},
		{name: "daily cap, no reset: next UTC midnight", status: 429, body: errBody("1000 requests per day (RPD) reached"),
			state: gateway.StateCapped, window: "day", until: -1, kind: "rate_limited"},
		{name: "daily cap, a short Retry-After is no end", status: 429, body: errBody("free-models-per-day"),
			headers: map[string]string{"Retry-After": "2"},
			state:   gateway.StateCapped, window: "day", until: -1, kind: "rate_limited"},
		{name: "tokens per minute, said in the body", status: 429,
			body:    errBody("Rate limit reached for m on tokens per min (TPM): Limit 150000, Used 149435, Requested 4739"),
			headers: map[string]string{"X-Ratelimit-Reset-Tokens": "12ms", "X-Ratelimit-Reset-Requests": "1s", "Retry-After": "1"},
			state:   gateway.StateRateLimited, window: "tokens", until: time.Second, kind: "rate_limited"},
		{name: "tokens per minute, said in the headers", status: 429, body: errBody("Rate limit exceeded"),
			headers: map[string]string{"X-Ratelimit-Remaining-Tokens": "0", "X-Ratelimit-Reset-Tokens": "1.5s", "Retry-After": "2"},
			state:   gateway.StateRateLimited, window: "tokens", until: 1500 * time.Millisecond, kind: "rate_limited"},
		{name: "requests per minute, reset 6m0s", status: 429, body: errBody("Rate limit reached on requests per min (RPM)"),
			headers: map[string]string{"X-Ratelimit-Remaining-Requests": "0", "X-Ratelimit-Reset-Requests": "6m0s", "Retry-After": "360"},
			state:   gateway.StateRateLimited, window: "requests", until: 6 * time.Minute, kind: "rate_limited"},
		{name: "Retry-After seconds", status: 429, body: errBody("slow down"), headers: map[string]string{"Retry-After": "17"},
			state: gateway.StateRateLimited, window: "requests", until: 17 * time.Second, kind: "rate_limited"},
		{name: "Retry-After HTTP date", status: 429, body: errBody("slow down"),
			headers: map[string]string{"Retry-After": recogniseNow.Add(42 * time.Second).Format(http.TimeFormat)},
			state:   gateway.StateRateLimited, window: "requests", until: 42 * time.Second, kind: "rate_limited"},
		{name: "X-RateLimit-Reset in epoch ms, a per-minute limit", status: 429, body: errBody("Rate limit exceeded: 20 per minute"),
			headers: map[string]string{"X-RateLimit-Reset": soonMs},
			state:   gateway.StateRateLimited, window: "requests", until: 30 * time.Second, kind: "rate_limited"},
		{name: "-1 and garbage are no time: short backoff", status: 429, body: errBody("slow down"),
			headers: map[string]string{"X-RateLimit-Reset": "-1", "Retry-After": "soon", "X-Ratelimit-Reset-Requests": "-1", "X-Ratelimit-Remaining-Tokens": "-1"},
			state:   gateway.StateRateLimited, window: "requests", until: 9 * time.Second, kind: "rate_limited"},
		{name: "a reset beyond minutes is an hour's quota", status: 429, body: errBody("slow down"), headers: map[string]string{"Retry-After": "3600"},
			state: gateway.StateCapped, window: "hour", until: time.Hour, kind: "rate_limited"},
		{name: "529 overloaded", status: 529, body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			state: gateway.StateDown, until: overloadPause, kind: "transient"},
		{name: "529 with no body", status: 529, state: gateway.StateDown, until: overloadPause, kind: "transient"},
		{name: "503 overloaded, passed through", status: 503, body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			state: gateway.StateDown, until: overloadPause, kind: "transient"},
		{name: "503 overloaded, passed through, with Retry-After", status: 503, body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			headers: map[string]string{"Retry-After": "5"}, state: gateway.StateDown, until: 5 * time.Second, kind: "transient"},
		{name: "500", status: 500, body: `{"error":{"message":"internal"}}`, state: gateway.StateDown, until: gateway.TransientPause, kind: "transient"},
		{name: "502 with Retry-After", status: 502, headers: map[string]string{"Retry-After": "3"}, state: gateway.StateDown, until: 3 * time.Second, kind: "transient"},
		{name: "408", status: 408, body: `timeout`, state: gateway.StateDown, until: gateway.TransientPause, kind: "transient"},
		{name: "204 from a proxy", status: 204, state: gateway.StateDown, until: gateway.TransientPause, kind: "transient"},
		{name: "200 with a rate-limit error", status: 200, body: `{"error":{"message":"Rate limit exceeded","code":429}}`,
			headers: map[string]string{"Retry-After": "20"},
			state:   gateway.StateRateLimited, window: "requests", until: 20 * time.Second, kind: "rate_limited"},
		{name: "200 with an overload error", status: 200, body: `{"error":{"message":"Overloaded","type":"overloaded_error"}}`,
			state: gateway.StateDown, until: overloadPause, kind: "transient"},
		{name: "200 with a credits error", status: 200, body: `{"error":{"message":"Insufficient credits","code":402}}`,
			state: gateway.StateCredits, until: CreditsRecheck, kind: "unavailable"},
		{name: "200 with an unknown error", status: 200, body: `{"error":{"message":"upstream died"}}`,
			state: gateway.StateDown, until: gateway.TransientPause, kind: "transient"},
		{name: "400: the request's own", status: 400, body: `{"error":{"message":"context too long"}}`, kind: "permanent"},
		{name: "400: a context too long for the model is the request's own", status: 400,
			body: `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.","code":"context_length_exceeded"}}`, kind: "permanent"},
		{name: "404 no endpoints for the model", status: 404, body: `{"error":{"message":"No endpoints found for vendor/model-x.","code":404}}`,
			state: gateway.StateNotServed, until: NotServedRecheck, kind: "unavailable"},
		{name: "410 a model retired", status: 410, body: `{"error":{"message":"This model has been retired."}}`,
			state: gateway.StateNotServed, until: NotServedRecheck, kind: "unavailable"},
		{name: "404 from a wrong base URL", status: 404, body: `404 page not found`,
			state: gateway.StateNotServed, until: NotServedRecheck, kind: "unavailable"},
		{name: "400 the model does not exist", status: 400,
			body:  `{"error":{"message":"The model 'gpt-9' does not exist or you do not have access to it.","type":"invalid_request_error","code":"model_not_found"}}`,
			state: gateway.StateNotServed, until: NotServedRecheck, kind: "unavailable"},
		{name: "400 a model retired", status: 400, body: `{"error":{"message":"The model vendor/model-x has been deprecated. Learn more: https://example.com"}}`,
			state: gateway.StateNotServed, until: NotServedRecheck, kind: "unavailable"},
		{name: "200 with a not-found error", status: 200, body: `{"error":{"message":"No endpoints found for vendor/model-x.","code":404}}`,
			state: gateway.StateNotServed, until: NotServedRecheck, kind: "unavailable"},
	}
}

// checkRecognised asserts err is the case's condition, decided from the
// answer and the clock.
func checkRecognised(t assert.TestingT, c recogniserCase, err error, lim *ratelimit.Limiter) bool {
	ok := assert.Equal(t, c.kind, gateway.Kind(err), "%v", err)
	if c.state == "" {
		_, has := gateway.ConditionOf(err)
		return assert.False(t, has, "no condition: %v", err) && ok
	}
	var f *gateway.Fault
	if !assert.True(t, errors.As(err, &f), "a *gateway.Fault: %v", err) {
		return false
	}
	want := recogniseNow.Add(c.until)
	if c.until < 0 {
		want = time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)
	}
	ok = assert.Equal(t, "router", f.Backend) && ok
	ok = assert.Equal(t, c.state, f.Condition.State) && ok
	ok = assert.Equal(t, c.window, f.Window) && ok
	ok = assert.Equal(t, want, f.Condition.Until, "until") && ok
	ok = assert.False(t, f.NotSent) && ok
	ok = assert.Contains(t, f.Error(), "explorer/exploration/7", "the task id") && ok
	if cl := f.Condition.Class(); cl == gateway.ClassRate || cl == gateway.ClassQuota {
		ok = assert.Equal(t, want, lim.Stats().PausedUntil, "the model's limiter paused until the end") && ok
	} else {
		ok = assert.True(t, lim.Stats().PausedUntil.IsZero(), "no pause for %s", c.state) && ok
	}
	return ok
}

// Every row of the recogniser table, each against a real server on
// 127.0.0.1 answering its shape.
func TestRecogniserRows(t *testing.T) {
	for _, c := range recogniserCases() {
		t.Run(c.name, func(t *testing.T) {
			err, lim := recogniseOnce(t, c)
			checkRecognised(t, c, err, lim)
		})
	}
}

func recogniseOnce(t *testing.T, c recogniserCase) (error, *ratelimit.Limiter) {
	t.Helper()
	clock := clockwork.NewFakeClockAt(recogniseNow)
	lim := ratelimit.New(ratelimit.Config{Name: "m"}, clock)
	e := setup(t, func(w http.ResponseWriter, r *http.Request) {
		for k, v := range c.headers {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(c.status)
		_, _ = io.WriteString(w, c.body)
	}, func(cfg *Config) { cfg.Limiter = lim; cfg.Clock = clock })
	_, err := e.send(t)
	require.Error(t, err)
	return err, lim
}

// Every row is needed: the table without any one of its rows reads at
// least one of the cases wrong. (Each row broken on purpose, in code.)
func TestEveryRecogniserRowIsNeeded(t *testing.T) {
	full := recogniser
	t.Cleanup(func() { recogniser = full })
	cases := recogniserCases()
	for i, row := range full {
		t.Run(row.name, func(t *testing.T) {
			recogniser = append(append([]rule{}, full[:i]...), full[i+1:]...)
			defer func() { recogniser = full }()
			wrong := 0
			for _, c := range cases {
				err, lim := recogniseOnce(t, c)
				if !checkRecognised(&quiet{}, c, err, lim) {
					wrong++
				}
			}
			assert.Positive(t, wrong, "no case needs row %q", row.name)
		})
	}
}

// quiet is a TestingT that only remembers a failure.
type quiet struct{ failed bool }

func (q *quiet) Errorf(string, ...any) { q.failed = true }
