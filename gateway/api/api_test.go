package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/gateway"
	"fano/gateway/ratelimit"
)

const (
	testKey  = "sk-test-5EcReT-0123456789"
	deadline = 5 * time.Second // bounds a broken test; never how a test waits
)

// fakeAPI is an OpenAI-compatible server on 127.0.0.1 whose answer each
// test scripts.
type fakeAPI struct {
	*httptest.Server
	mu       sync.Mutex
	handler  http.HandlerFunc
	requests []recorded
}

type recorded struct {
	Auth string
	Body chatRequest
}

func newFakeAPI(t *testing.T, h http.HandlerFunc) *fakeAPI {
	f := &fakeAPI{handler: h}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		var body chatRequest
		raw, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(raw, &body)
		f.mu.Lock()
		f.requests = append(f.requests, recorded{Auth: r.Header.Get("Authorization"), Body: body})
		h := f.handler
		f.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAPI) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

type testEnv struct {
	b     *Backend
	f     *fakeAPI
	clock *clockwork.FakeClock
	logs  *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// setup builds a backend named "router" against a fake API; mod adjusts
// the config (a limiter, streaming, a timeout).
func setup(t *testing.T, h http.HandlerFunc, mod func(*Config)) *testEnv {
	t.Helper()
	e := &testEnv{f: newFakeAPI(t, h), clock: clockwork.NewFakeClock(), logs: &syncBuffer{}}
	cfg := Config{
		Name: "router", BaseURL: e.f.URL + "/v1/", Model: "vendor/model-x", APIKey: testKey,
		Clock: e.clock, Logger: zerolog.New(e.logs).Level(zerolog.DebugLevel),
	}
	if mod != nil {
		mod(&cfg)
	}
	b, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	e.b = b
	return e
}

func (e *testEnv) send(t *testing.T) (gateway.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	return e.b.Send(ctx, gateway.Request{TaskID: "explorer/exploration/7", Prompt: "What is a projective plane?",
		History: []gateway.Message{{Role: "user", Content: "hello"}, {Role: "assistant", Content: "hi"}}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func answer(text string, prompt, completion int) map[string]any {
	return map[string]any{
		"id": "gen-1", "object": "chat.completion",
		"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": text}, "finish_reason": "stop"}},
		"usage":   map[string]any{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
	}
}

func TestSendSuccessRecordsUsageAndLearnsRate(t *testing.T) {
	lim := ratelimit.New(ratelimit.Config{Name: "vendor/model-x", InitialRPM: 20}, nil)
	e := setup(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(ratelimit.HeaderLimit, "200")
		w.Header().Set(ratelimit.HeaderRemaining, "199")
		w.Header().Set(ratelimit.HeaderReset, "300ms")
		writeJSON(w, 200, answer("A projective plane is ...", 12, 30))
	}, func(c *Config) { c.Limiter = lim; c.Clock = nil })

	resp, err := e.send(t)
	require.NoError(t, err)
	assert.Equal(t, "A projective plane is ...", resp.Content)
	assert.EqualValues(t, 12, resp.PromptTokens)
	assert.EqualValues(t, 30, resp.CompletionTokens)

	_, err = e.send(t)
	require.NoError(t, err)
	s := e.b.Stats()
	assert.EqualValues(t, 2, s.Requests)
	assert.EqualValues(t, 2, s.Succeeded)
	assert.EqualValues(t, 24, s.PromptTokens)
	assert.EqualValues(t, 60, s.CompletionTokens)
	require.NotNil(t, s.Limiter)
	assert.Equal(t, 200, s.Limiter.LimitRPM, "rate learnt from the headers")
	assert.EqualValues(t, 2, s.Limiter.Granted)

	require.Equal(t, 2, e.f.count())
	got := e.f.requests[0]
	assert.Equal(t, "Bearer "+testKey, got.Auth)
	assert.Equal(t, "vendor/model-x", got.Body.Model)
	assert.Equal(t, []chatMessage{{"user", "hello"}, {"assistant", "hi"}, {"user", "What is a projective plane?"}}, got.Body.Messages)
	assert.False(t, got.Body.Stream)
	require.NoError(t, e.b.Health(context.Background()))
}

// Each 429 form gives RetryAfter from its headers and pauses the model's
// limiter (every waiter) until then.
func TestRateLimitedForms(t *testing.T) {
	date := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name    string
		headers map[string]string
		want    time.Duration
	}{
		{"retry-after seconds", map[string]string{"Retry-After": "17"}, 17 * time.Second},
		{"retry-after date", map[string]string{"Retry-After": date.Add(42 * time.Second).Format(http.TimeFormat)}, 42 * time.Second},
		{"reset-requests only", map[string]string{ratelimit.HeaderReset: "1m0s"}, time.Minute},
		{"reset-requests seconds", map[string]string{ratelimit.HeaderReset: "6"}, 6 * time.Second},
		{"budget spent: finer reset wins", map[string]string{"Retry-After": "1", ratelimit.HeaderRemaining: "0", ratelimit.HeaderReset: "120ms"}, 120 * time.Millisecond},
		{"no time: three intervals at 20 RPM", nil, 9 * time.Second},
		{"0s is no time", map[string]string{ratelimit.HeaderReset: "0s"}, 9 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clock := clockwork.NewFakeClockAt(date)
			lim := ratelimit.New(ratelimit.Config{Name: "m"}, clock)
			e := setup(t, func(w http.ResponseWriter, r *http.Request) {
				for k, v := range c.headers {
					w.Header().Set(k, v)
				}
				writeJSON(w, 429, map[string]any{"error": map[string]any{"message": "Rate limit exceeded: free-models-per-min", "code": 429}})
			}, func(cfg *Config) { cfg.Limiter = lim; cfg.Clock = clock })
			_, err := e.send(t)
			var rl *gateway.RateLimitedError
			require.ErrorAs(t, err, &rl)
			assert.Equal(t, "router", rl.Backend)
			assert.Equal(t, c.want, rl.RetryAfter)
			assert.Contains(t, rl.Reason, "free-models-per-min")
			assert.Equal(t, "rate_limited", gateway.Kind(err))
			assert.Equal(t, date.Add(c.want), lim.Stats().PausedUntil, "the whole model is paused")
			assert.EqualValues(t, 1, e.b.Stats().RateLimited)
		})
	}
}

// After a 429 asking for an hour, the next Send does not wait an hour in
// the limiter (nor send): it is rate limited at once, so the task parks.
func TestLongPauseParksTheNextRequestWithoutSending(t *testing.T) {
	clock := clockwork.NewFakeClock()
	lim := ratelimit.New(ratelimit.Config{Name: "m", InitialRPM: 6000}, clock)
	e := setup(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3600")
		writeJSON(w, 429, nil)
	}, func(c *Config) { c.Limiter = lim; c.Clock = clock })
	_, err := e.send(t)
	var rl *gateway.RateLimitedError
	require.ErrorAs(t, err, &rl)
	assert.Equal(t, time.Hour, rl.RetryAfter)

	_, err = e.send(t)
	require.ErrorAs(t, err, &rl)
	assert.Equal(t, time.Hour, rl.RetryAfter)
	assert.Equal(t, "router", rl.Backend)
	assert.Equal(t, 1, e.f.count(), "nothing sent while paused")
}

func TestStatusClassification(t *testing.T) {
	cases := []struct {
		status int
		kind   string
	}{
		{500, "transient"}, {502, "transient"}, {503, "transient"}, {408, "transient"},
		{400, "permanent"}, {401, "credentials"}, {403, "credentials"}, {404, "unavailable"}, {422, "permanent"},
		{402, "unavailable"},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.status), func(t *testing.T) {
			e := setup(t, func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, c.status, map[string]any{"error": map[string]any{"message": "the reason"}})
			}, nil)
			_, err := e.send(t)
			require.Error(t, err)
			assert.Equal(t, c.kind, gateway.Kind(err), "%v", err)
			assert.Contains(t, err.Error(), "router")
			assert.Contains(t, err.Error(), fmt.Sprint(c.status))
			assert.Contains(t, err.Error(), "the reason")
			assert.Contains(t, err.Error(), "explorer/exploration/7", "the task id")
		})
	}
}

// An unset key variable is the credentials state, not an error of New:
// nothing is sent, the error names the backend and the variable, and
// ReloadKey picks the key up once it is exported.
func TestUnsetKeyIsCredentialsUntilReloaded(t *testing.T) {
	t.Setenv("FANO_TEST_UNSET_KEY", "")
	e := setup(t, func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "Bearer sk-reloaded-123", r.Header.Get("Authorization"))
		writeJSON(w, 200, map[string]any{"choices": []any{map[string]any{"message": map[string]any{"content": "hi"}}}})
	}, func(c *Config) { c.APIKey = ""; c.KeyEnv = "FANO_TEST_UNSET_KEY" })
	assert.Equal(t, gateway.StateCredentials, e.b.Condition().State)
	_, err := e.send(t)
	require.Error(t, err)
	assert.Equal(t, "credentials", gateway.Kind(err))
	assert.Contains(t, err.Error(), "FANO_TEST_UNSET_KEY")
	assert.Contains(t, err.Error(), "router")
	assert.Equal(t, 0, e.f.count(), "nothing sent without a key")

	require.Error(t, e.b.ReloadKey(), "still unset")
	t.Setenv("FANO_TEST_UNSET_KEY", "sk-reloaded-123")
	require.NoError(t, e.b.ReloadKey())
	assert.Equal(t, gateway.StateReady, e.b.Condition().State)
	resp, err := e.send(t)
	require.NoError(t, err)
	assert.Equal(t, "hi", resp.Content)
}

func TestNoCreditMakesBackendUnhealthyUntilASuccess(t *testing.T) {
	var credit sync.Mutex
	broke := true
	e := setup(t, func(w http.ResponseWriter, r *http.Request) {
		credit.Lock()
		defer credit.Unlock()
		if broke {
			writeJSON(w, 402, map[string]any{"error": map[string]any{"message": "Insufficient credits"}})
			return
		}
		writeJSON(w, 200, answer("ok", 1, 1))
	}, nil)
	_, err := e.send(t)
	require.ErrorIs(t, err, gateway.ErrUnavailable)
	assert.Contains(t, err.Error(), "credits spent")
	c, ok := gateway.ConditionOf(err)
	require.True(t, ok)
	assert.Equal(t, gateway.StateCredits, c.State)
	herr := e.b.Health(context.Background())
	require.ErrorIs(t, herr, gateway.ErrUnavailable)

	credit.Lock()
	broke = false
	credit.Unlock()
	_, err = e.send(t)
	require.NoError(t, err)
	require.NoError(t, e.b.Health(context.Background()))
}

// Broken answers: not JSON, truncated JSON, no body, no choice, an error
// object in a 200 — all Transient, naming the backend.
func TestBrokenAnswersAreTransient(t *testing.T) {
	cases := map[string]struct {
		body string
		want string
	}{
		"html":           {"<html><body>Bad gateway</body></html>", "not JSON"},
		"truncated json": {`{"choices":[{"message":{"content":"A projective pl`, "truncated"},
		"no body":        {"", "empty answer"},
		"no choices":     {`{"choices":[]}`, "empty answer (no choices)"},
		"error in 200":   {`{"error":{"message":"upstream overloaded","code":502}}`, "upstream overloaded"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			e := setup(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, c.body)
			}, nil)
			_, err := e.send(t)
			require.ErrorIs(t, err, gateway.ErrTransient)
			assert.Contains(t, err.Error(), "router")
			assert.Contains(t, err.Error(), c.want)
			assert.EqualValues(t, 1, e.b.Stats().Transient)
		})
	}
}

// A model that ended its answer with nothing said, or with a refusal
// given apart from the content, gave a bad answer: asked elsewhere on the
// validation budget, never a passing fault asked again without end (each
// time charged). JSON bodies and streams alike.
func TestAnswersWithNothingSaidAreBad(t *testing.T) {
	cases := map[string]struct {
		body   string
		stream []string
		want   string
	}{
		"empty content": {body: `{"choices":[{"message":{"role":"assistant","content":""},"finish_reason":"stop"}]}`, want: `empty answer (no content, finish_reason "stop")`},
		"blank content": {body: `{"choices":[{"message":{"content":"  \n"}}]}`, want: "empty answer"},
		"null content":  {body: `{"choices":[{"message":{"content":null}}]}`, want: "empty answer"},
		"refusal":       {body: `{"choices":[{"message":{"content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}]}`, want: `refused: "I can't help with that."`},
		"stream, nothing": {stream: []string{`data: {"choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":"stop"}]}` + "\n\n", "data: [DONE]\n\n"},
			want: `empty answer (no content, finish_reason "stop")`},
		"stream, refusal": {stream: []string{`data: {"choices":[{"index":0,"delta":{"refusal":"I can't "}}]}` + "\n\n",
			`data: {"choices":[{"index":0,"delta":{"refusal":"help with that."},"finish_reason":"stop"}]}` + "\n\n", "data: [DONE]\n\n"},
			want: `refused: "I can't help with that."`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			e := setup(t, func(w http.ResponseWriter, r *http.Request) {
				if c.stream != nil {
					sse(w, c.stream...)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, c.body)
			}, func(cfg *Config) { cfg.Stream = c.stream != nil })
			_, err := e.send(t)
			require.ErrorIs(t, err, gateway.ErrBadAnswer)
			assert.Equal(t, "bad_answer", gateway.Kind(err))
			assert.False(t, errors.Is(err, gateway.ErrTransient))
			assert.Contains(t, err.Error(), "router")
			assert.Contains(t, err.Error(), "explorer/exploration/7")
			assert.Contains(t, err.Error(), c.want)
			assert.Zero(t, e.b.Stats().Transient)
			assert.Zero(t, e.b.Stats().Succeeded)
		})
	}
}

func TestContentAsTextParts(t *testing.T) {
	e := setup(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"choices":[{"message":{"content":[{"type":"text","text":"Hello, "},{"type":"text","text":"plane"}]}}]}`)
	}, nil)
	resp, err := e.send(t)
	require.NoError(t, err)
	assert.Equal(t, "Hello, plane", resp.Content)
}

// A body shorter than its Content-Length: the connection broke mid-answer.
func TestAnswerCutOffMidBody(t *testing.T) {
	e := setup(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "1000")
		_, _ = io.WriteString(w, `{"choices":[{"message":{"content":"A proj`)
	}, nil)
	_, err := e.send(t)
	require.ErrorIs(t, err, gateway.ErrTransient)
	assert.Contains(t, err.Error(), "router")
	assert.Contains(t, err.Error(), "cut off")
}

func sse(w http.ResponseWriter, events ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	for _, ev := range events {
		_, _ = io.WriteString(w, ev)
		fl.Flush()
	}
}

func chunk(text string) string {
	b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": text}}}})
	return "data: " + string(b) + "\n\n"
}

func TestStreamedAnswer(t *testing.T) {
	e := setup(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w, ": OPENROUTER PROCESSING\n\n", chunk("A projective "), chunk("plane"), "event: x\r\n"+chunk(" is ..."),
			`data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4}}`+"\n\n", "data: [DONE]\n\n")
	}, func(c *Config) { c.Stream = true })
	resp, err := e.send(t)
	require.NoError(t, err)
	assert.Equal(t, "A projective plane is ...", resp.Content)
	assert.EqualValues(t, 9, resp.PromptTokens)
	assert.EqualValues(t, 4, resp.CompletionTokens)
	assert.True(t, e.f.requests[0].Body.Stream)
	require.NotNil(t, e.f.requests[0].Body.StreamOptions)
	assert.EqualValues(t, 4, e.b.Stats().CompletionTokens)
}

func TestStreamCutOff(t *testing.T) {
	cases := map[string]func(w http.ResponseWriter){
		"no [DONE]": func(w http.ResponseWriter) { sse(w, chunk("A projective "), chunk("plane")) },
		"truncated chunk": func(w http.ResponseWriter) {
			sse(w, chunk("A projective "), `data: {"choices":[{"delta":{"content":"pla`)
		},
		"connection dropped": func(w http.ResponseWriter) {
			sse(w, chunk("A projective "))
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = conn.Close()
			}
		},
		"only [DONE]":   func(w http.ResponseWriter) { sse(w, "data: [DONE]\n\n") },
		"error in body": func(w http.ResponseWriter) { sse(w, chunk("A"), `data: {"error":{"message":"provider died"}}`+"\n\n") },
	}
	for name, serve := range cases {
		t.Run(name, func(t *testing.T) {
			e := setup(t, func(w http.ResponseWriter, r *http.Request) { serve(w) }, func(c *Config) { c.Stream = true })
			_, err := e.send(t)
			require.ErrorIs(t, err, gateway.ErrTransient)
			assert.Contains(t, err.Error(), "router")
		})
	}
}

// blockingAPI answers nothing until the request's context ends; started
// and ended report both moments.
func blockingAPI(started, ended chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-r.Context().Done()
		close(ended)
	}
}

func TestTimeoutIsTransient(t *testing.T) {
	started, ended := make(chan struct{}, 1), make(chan struct{})
	e := setup(t, blockingAPI(started, ended), func(c *Config) { c.Timeout = 10 * time.Minute })
	errc := make(chan error, 1)
	go func() { _, err := e.send(t); errc <- err }()
	<-started
	e.clock.Advance(10 * time.Minute)
	select {
	case err := <-errc:
		require.ErrorIs(t, err, gateway.ErrTransient)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, "transient", gateway.Kind(err))
		assert.Contains(t, err.Error(), "router")
		assert.Contains(t, err.Error(), "timed out")
	case <-time.After(deadline):
		t.Fatal("timeout did not end the request")
	}
	<-ended
}

// wrappedClock is a fake clock behind a type of its own, as fano
// simulate's is: clockwork.WithTimeout took a real timer for it.
type wrappedClock struct{ *clockwork.FakeClock }

func TestTimeoutRunsOnAWrappedClock(t *testing.T) {
	started, ended := make(chan struct{}, 1), make(chan struct{})
	var clock *clockwork.FakeClock
	e := setup(t, blockingAPI(started, ended), func(c *Config) {
		clock = c.Clock.(*clockwork.FakeClock)
		c.Clock, c.Timeout = wrappedClock{clock}, 10*time.Minute
	})
	errc := make(chan error, 1)
	go func() { _, err := e.send(t); errc <- err }()
	<-started
	clock.Advance(10 * time.Minute)
	select {
	case err := <-errc:
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), "timed out")
	case <-time.After(deadline):
		t.Fatal("the injected clock's timeout did not end the request")
	}
	<-ended
}

func TestCancelStopsTheHTTPRequest(t *testing.T) {
	started, ended := make(chan struct{}, 1), make(chan struct{})
	e := setup(t, blockingAPI(started, ended), nil)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := e.b.Send(ctx, gateway.Request{TaskID: "t1", Prompt: "p"})
		errc <- err
	}()
	<-started
	cancel()
	select {
	case err := <-errc:
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, "cancelled", gateway.Kind(err))
	case <-time.After(deadline):
		t.Fatal("cancel did not end Send")
	}
	select {
	case <-ended: // the server saw its request go away
	case <-time.After(deadline):
		t.Fatal("the HTTP request was not stopped")
	}
	assert.EqualValues(t, 1, e.b.Stats().Cancelled)
}

func TestCancelWhileWaitingForTheLimiterSendsNothing(t *testing.T) {
	clock := clockwork.NewFakeClock()
	lim := ratelimit.New(ratelimit.Config{Name: "m", InitialRPM: 1}, clock)
	require.NoError(t, lim.Wait(context.Background())) // next slot in a minute
	e := setup(t, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, answer("x", 1, 1)) },
		func(c *Config) { c.Limiter = lim; c.Clock = clock })
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := e.b.Send(ctx, gateway.Request{TaskID: "t1", Prompt: "p"}); errc <- err }()
	require.NoError(t, clock.BlockUntilContext(context.Background(), 1)) // queued behind the timer
	cancel()
	err := <-errc
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, gateway.ErrNotSent, "the executor's ErrNotSent: nothing charged")
	require.ErrorIs(t, err, ratelimit.ErrNotSent)
	assert.Zero(t, e.f.count())
	assert.EqualValues(t, 1, lim.Stats().Granted, "the cancelled wait took no slot")
	assert.EqualValues(t, 1, e.b.Stats().NotSent)
}

func TestConnectionRefusedIsTransient(t *testing.T) {
	e := setup(t, func(w http.ResponseWriter, r *http.Request) {}, nil)
	e.f.Close()
	_, err := e.send(t)
	require.ErrorIs(t, err, gateway.ErrTransient)
	assert.Contains(t, err.Error(), "router")
}

// Failed requests spend the budget like successful ones.
func TestFailedRequestsCountAgainstTheBudget(t *testing.T) {
	lim := ratelimit.New(ratelimit.Config{Name: "m", InitialRPM: 1 << 20}, nil)
	e := setup(t, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 503, nil) },
		func(c *Config) { c.Limiter = lim; c.Clock = nil })
	for range 3 {
		_, err := e.send(t)
		require.ErrorIs(t, err, gateway.ErrTransient)
	}
	assert.EqualValues(t, 3, lim.Stats().Granted)
}

// The key must not surface anywhere, even when a hostile or buggy server
// echoes the Authorization header back in every answer.
func TestKeyNeverLeaks(t *testing.T) {
	statuses := []int{200, 400, 401, 402, 429, 500, 503}
	var mu sync.Mutex
	next := 0
	e := setup(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		st := statuses[next%len(statuses)]
		next++
		mu.Unlock()
		echo := "your key " + r.Header.Get("Authorization") + " is " + testKey
		w.Header().Set("Retry-After", "1")
		if st == 200 {
			// not JSON, quoting the key
			_, _ = io.WriteString(w, echo)
			return
		}
		writeJSON(w, st, map[string]any{"error": map[string]any{"message": echo}})
	}, nil)

	var texts []string
	for range statuses {
		_, err := e.send(t)
		require.Error(t, err)
		texts = append(texts, err.Error(), fmt.Sprintf("%v %+v %#v", err, err, err))
		var rl *gateway.RateLimitedError
		if errors.As(err, &rl) {
			texts = append(texts, rl.Reason)
		}
	}
	stats, _ := json.Marshal(e.b.Stats())
	texts = append(texts, string(stats), fmt.Sprintf("%v %+v %#v", e.b.cfg, e.b.cfg, e.b.cfg), e.logs.String())
	if h := e.b.Health(context.Background()); h != nil {
		texts = append(texts, h.Error())
	}
	all := strings.Join(texts, "\n")
	require.NotEmpty(t, e.logs.String())
	assert.Contains(t, all, "[redacted]", "the echoed key was blanked out")
	assert.NotContains(t, all, testKey)
	assert.NotContains(t, all, testKey[3:15])
}

func TestKeyFromEnv(t *testing.T) {
	t.Setenv("FANO_TEST_API_KEY", testKey)
	k, err := KeyFromEnv("router", "FANO_TEST_API_KEY")
	require.NoError(t, err)
	assert.Equal(t, testKey, k.Reveal())
	assert.Equal(t, "[redacted]", fmt.Sprint(k))

	t.Setenv("FANO_TEST_EMPTY_KEY", "  ")
	_, err = KeyFromEnv("router", "FANO_TEST_EMPTY_KEY")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "backends.router.api.api_key_env")
	assert.Contains(t, err.Error(), "FANO_TEST_EMPTY_KEY")

	_, err = KeyFromEnv("router", "FANO_TEST_UNSET_KEY_XYZ")
	require.ErrorContains(t, err, "FANO_TEST_UNSET_KEY_XYZ")

	_, err = KeyFromEnv("router", "")
	require.ErrorContains(t, err, "api_key_env")
}

func TestNewRejectsBadConfig(t *testing.T) {
	good := Config{Name: "r", BaseURL: "https://x/v1", Model: "m", APIKey: "k"}
	for name, mod := range map[string]func(*Config){
		"no url": func(c *Config) { c.BaseURL = "" }, "bad url": func(c *Config) { c.BaseURL = "x.org" },
		"no model": func(c *Config) { c.Model = "" }, "no key": func(c *Config) { c.APIKey = "" },
	} {
		c := good
		mod(&c)
		_, err := New(c)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "backend r", name)
	}
}

func TestRedactKeyCatchesPiecesCutAtTheEdges(t *testing.T) {
	assert.Equal(t, "a [redacted] b [redacted]", redactKey("a "+testKey+" b "+testKey, testKey))
	assert.Equal(t, "body ends in [redacted]", redactKey("body ends in "+testKey[:9], testKey))
	assert.Equal(t, "[redacted] starts a body", redactKey(testKey[10:]+" starts a body", testKey))
	assert.Equal(t, "no key here", redactKey("no key here", testKey))
}
