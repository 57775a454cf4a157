package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/gateway"
	"fano/gateway/ratelimit"
	"fano/gateway/ratelimit/simclock"
)

// windowAPI is an OpenAI-compatible server on 127.0.0.1 that enforces a
// tokens-per-minute limit (a sliding minute, counting a request's prompt
// by its own tokenizer and its answer at admission, as providers do), a
// requests-per-minute limit and a per-day cap (UTC days), answering each
// with the 429 and headers providers send. It reads the simulated clock,
// and gives up the worker's token while the model "thinks".
type windowAPI struct {
	clock         *simclock.Clock
	tpm, rpm      int
	perDay        int
	latency       time.Duration
	completion    int     // tokens of every answer
	charsPerToken float64 // the server's tokenizer
	stop          chan struct{}

	mu       sync.Mutex
	reqs     []time.Time
	toks     []tokEntry
	day      time.Time
	dayUsed  int
	ok       int
	tok429s  []time.Time
	req429s  []time.Time
	day429s  []time.Time
	okTokens int
}

type tokEntry struct {
	at time.Time
	n  int
}

func (s *windowAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body chatRequest
	raw, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(raw, &body)
	chars := 0
	for _, m := range body.Messages {
		chars += len(m.Content)
	}
	prompt := int(math.Ceil(float64(chars) / s.charsPerToken))
	need := prompt + s.completion

	now := s.clock.Now()
	h := w.Header()
	h.Set("Content-Type", "application/json")
	s.mu.Lock()
	if day := now.UTC().Truncate(24 * time.Hour); !day.Equal(s.day) {
		s.day, s.dayUsed = day, 0
	}
	for len(s.reqs) > 0 && !s.reqs[0].After(now.Add(-time.Minute)) {
		s.reqs = s.reqs[1:]
	}
	for len(s.toks) > 0 && !s.toks[0].at.After(now.Add(-time.Minute)) {
		s.toks = s.toks[1:]
	}
	used := 0
	for _, e := range s.toks {
		used += e.n
	}
	refuse := func(list *[]time.Time, body string) {
		*list = append(*list, now)
		s.mu.Unlock()
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, body)
	}
	if s.perDay > 0 && s.dayUsed >= s.perDay {
		h.Set("X-RateLimit-Limit", strconv.Itoa(s.perDay))
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Reset", strconv.FormatInt(s.day.Add(24*time.Hour).UnixMilli(), 10))
		refuse(&s.day429s, `{"error":{"message":"Rate limit exceeded: free-models-per-day. Add 10 credits to unlock 1000 free model requests per day","code":429}}`)
		return
	}
	if s.rpm > 0 {
		h.Set(ratelimit.HeaderLimit, strconv.Itoa(s.rpm))
		if len(s.reqs) >= s.rpm {
			reset := s.reqs[0].Add(time.Minute).Sub(now)
			h.Set(ratelimit.HeaderRemaining, "0")
			h.Set(ratelimit.HeaderReset, reset.String())
			h.Set("Retry-After", strconv.Itoa(int((reset+time.Second-1)/time.Second)))
			refuse(&s.req429s, `{"error":{"message":"Rate limit reached on requests per min (RPM)","code":429}}`)
			return
		}
	}
	if s.tpm > 0 {
		h.Set(ratelimit.HeaderLimitTokens, strconv.Itoa(s.tpm))
		if used+need > s.tpm {
			// Retry-After: when enough leaves the window for this request.
			fit, left := now, used
			for _, e := range s.toks {
				if left+need <= s.tpm {
					break
				}
				left -= e.n
				fit = e.at.Add(time.Minute)
			}
			h.Set(ratelimit.HeaderRemainingTokens, strconv.Itoa(s.tpm-used))
			h.Set(ratelimit.HeaderResetTokens, s.toks[0].at.Add(time.Minute).Sub(now).String())
			h.Set("Retry-After", strconv.Itoa(int((fit.Sub(now)+time.Second-1)/time.Second)))
			refuse(&s.tok429s, fmt.Sprintf(`{"error":{"message":"Rate limit reached for m on tokens per min (TPM): Limit %d, Used %d, Requested %d.","code":"rate_limit_exceeded"}}`, s.tpm, used, need))
			return
		}
	}
	s.reqs = append(s.reqs, now)
	s.toks = append(s.toks, tokEntry{now, need})
	s.dayUsed++
	if s.rpm > 0 {
		h.Set(ratelimit.HeaderRemaining, strconv.Itoa(s.rpm-len(s.reqs)))
		h.Set(ratelimit.HeaderReset, s.reqs[0].Add(time.Minute).Sub(now).String())
	}
	if s.tpm > 0 {
		h.Set(ratelimit.HeaderRemainingTokens, strconv.Itoa(s.tpm-used-need))
		h.Set(ratelimit.HeaderResetTokens, s.toks[0].at.Add(time.Minute).Sub(now).String())
	}
	s.ok++
	s.okTokens += need
	s.mu.Unlock()

	done := s.clock.After(s.latency) // the model writes its answer
	s.clock.Tokens().Add(-1)
	select {
	case <-done:
	case <-r.Context().Done():
		return
	case <-s.stop:
		return
	}
	writeJSON(w, 200, answer("an answer", prompt, s.completion))
}

// windowRun is one simulated run: workers send prompts of promptChars
// through one API backend for duration, each waiting out a rate or quota
// fault until the end the fault names (as the executor parks its task).
type windowRun struct {
	workers     int
	promptChars int
	duration    time.Duration
	start       time.Time
	// baseline: the backend as it paced and read 429s before (no token
	// estimates; every 429 a per-minute limit of Retry-After, the
	// -requests reset or a short backoff).
	baseline bool
}

type windowResult struct {
	ok, other, notSent int
	tok429s, req429s   []time.Time
	day429s            []time.Time
	okTokens           int
	lim                ratelimit.Stats
}

// baselineTable is how 429s were read before the recogniser table.
var baselineTable = []rule{{name: "any 429, read as a per-minute limit", statuses: []int{429},
	fault: func(b *Backend, r *reply) *gateway.Fault {
		d, ok := ratelimit.ResetAfter(r.header, r.now)
		if !ok || d <= 0 {
			d = b.shortBackoff()
		}
		return gateway.RateFault("", "requests", b.detail(r), r.now, r.now.Add(d))
	}}}

func (wr windowRun) run(t testing.TB, srv *windowAPI) windowResult {
	t.Helper()
	tok := simclock.NewTokens(wr.workers)
	clock := simclock.New(wr.start, tok)
	srv.clock, srv.stop = clock, make(chan struct{})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 2 * wr.workers
	defer transport.CloseIdleConnections()

	lim := ratelimit.New(ratelimit.Config{Name: "m", InitialRPM: 20}, clock)
	ratelimit.SetHooks(lim, func() { tok.Add(-1) }, func() { tok.Add(1) })
	b, err := New(Config{Name: "router", BaseURL: ts.URL + "/v1", Model: "m", APIKey: "sk-sim",
		Client: &http.Client{Transport: transport}, Clock: clock, Logger: zerolog.Nop(), Limiter: lim})
	require.NoError(t, err)
	table := recogniser
	if wr.baseline {
		b.estimate = func(gateway.Request) int { return 0 }
		table = baselineTable
	}
	b.table = table

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sleepUntil := func(until time.Time) {
		ch := clock.After(until.Sub(clock.Now()))
		tok.Add(-1)
		select {
		case <-ch:
		case <-ctx.Done():
		}
	}
	var other, notSent atomic.Int64
	var wg sync.WaitGroup
	prompt := strings.Repeat("a projective plane of order two ", wr.promptChars/32+1)[:wr.promptChars]
	for w := range wr.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				_, err := b.Send(ctx, gateway.Request{TaskID: fmt.Sprintf("w%d/t%d", w, n), Prompt: prompt})
				if err == nil || ctx.Err() != nil {
					continue
				}
				c, ok := gateway.ConditionOf(err)
				if ok && (c.Class() == gateway.ClassRate || c.Class() == gateway.ClassQuota) {
					if gateway.Kind(err) == "rate_limited" && errorsIsNotSent(err) {
						notSent.Add(1)
					}
					sleepUntil(c.Until) // the task parked until the backend's end
					continue
				}
				other.Add(1)
			}
		}()
	}

	// A watchdog for a broken simulation, in real time: no step in 30 s.
	stuck := make(chan struct{})
	var progress atomic.Int64
	go func() {
		last := int64(-1)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(30 * time.Second):
			}
			if p := progress.Load(); p == last {
				close(stuck)
				return
			} else {
				last = p
			}
		}
	}()
	end := wr.start.Add(wr.duration)
	for {
		if !tok.WaitQuiet(stuck) {
			// Errorf, not Fatalf: run may be on a goroutine of its own.
			t.Errorf("simulation stuck at %s with %d busy actors", clock.Now().Sub(wr.start), tok.Busy())
			break
		}
		next, ok := clock.Next()
		if !ok || next.After(end) {
			break
		}
		clock.AdvanceTo(next)
		progress.Add(1)
	}
	cancel()
	close(srv.stop)
	wg.Wait()
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return windowResult{ok: srv.ok, other: int(other.Load()), notSent: int(notSent.Load()),
		tok429s: srv.tok429s, req429s: srv.req429s, day429s: srv.day429s, okTokens: srv.okTokens, lim: lim.Stats()}
}

func errorsIsNotSent(err error) bool {
	f, ok := err.(*gateway.Fault)
	return ok && f.NotSent
}

// countAfter counts the times at or after t.
func countAfter(ts []time.Time, t time.Time) int {
	n := 0
	for _, x := range ts {
		if !x.Before(t) {
			n++
		}
	}
	return n
}

// Long prompts against a tokens-per-minute limit: fano learns the token
// budget from the x-ratelimit-*-tokens headers and paces by estimated
// tokens (four characters a token, corrected by the server's usage, as the
// server's tokenizer counts about 11 % more), so after the first minutes
// it meets at most one token 429 an hour; the baseline (paced by requests
// only, as before) meets one again and again.
func TestTokensPerMinutePacing(t *testing.T) {
	const hours = 3
	fano, base := tpmScenario(t, hours)

	warm := time.Date(2030, 1, 1, 6, 10, 0, 0, time.UTC)
	limitTokens := 100000.0 * 60 * hours
	t.Logf("%d simulated hours, 8 workers, prompts of 20,000 chars, limit 100,000 TPM: fano %d token 429s (%d after the first 10 minutes), %d answers, %.1f%% of the token limit; baseline %d token 429s (%d after 10 minutes), %d answers, %.1f%%",
		hours, len(fano.tok429s), countAfter(fano.tok429s, warm), fano.ok, 100*float64(fano.okTokens)/limitTokens,
		len(base.tok429s), countAfter(base.tok429s, warm), base.ok, 100*float64(base.okTokens)/limitTokens)
	t.Logf("fano's limiter at the end: %+v", fano.lim)
	assert.LessOrEqual(t, countAfter(fano.tok429s, warm), hours, "at most one token 429 an hour in steady state")
	assert.Greater(t, countAfter(base.tok429s, warm), 10*hours, "the baseline hits the token limit again and again")
	assert.Zero(t, fano.other, "no other errors")
	assert.Empty(t, fano.req429s)
	assert.Greater(t, float64(fano.okTokens)/limitTokens, 0.85, "paced near the limit, not far under it")
	assert.Equal(t, 100000, fano.lim.TokenLimit, "learned from the headers")
}

// A per-day cap (OpenRouter's free-models-per-day: a 429 naming the daily
// limit, X-RateLimit-Reset in epoch milliseconds) parks the model until
// the reset: after each day's first 429, at most two more that day; the
// baseline (every 429 a per-minute limit) meets it every few seconds.
func TestDailyCapParksUntilItsReset(t *testing.T) {
	const days = 3
	fano, base := dayCapScenario(t, days)

	perDay := func(ts []time.Time) map[string]int {
		m := map[string]int{}
		for _, x := range ts {
			m[x.UTC().Format("2006-01-02")]++
		}
		return m
	}
	t.Logf("%d simulated days, 4 workers, cap 50 requests a day: fano %d daily-cap 429s %v, %d answers, %d requests not sent; baseline %d daily-cap 429s %v, %d answers",
		days, len(fano.day429s), perDay(fano.day429s), fano.ok, fano.notSent, len(base.day429s), perDay(base.day429s), base.ok)
	require.NotEmpty(t, fano.day429s, "the cap was met")
	for day, n := range perDay(fano.day429s) {
		assert.LessOrEqual(t, n-1, 2, "day %s: at most two 429s after the first", day)
	}
	// From 06:00 on the first day to 06:00 on the fourth: four UTC days.
	assert.Equal(t, 50*(days+1), fano.ok, "the whole cap used every day")
	assert.Zero(t, fano.other)
	assert.Empty(t, fano.req429s)
	assert.Greater(t, len(base.day429s), 1000*days, "the baseline meets the cap every few seconds")
}

// tpmScenario runs fano and the baseline side by side for hours: 8
// workers, prompts of 20,000 characters, a limit of 100,000 TPM whose
// tokenizer counts 3.6 characters a token, answers of 500 tokens after 20 s.
func tpmScenario(t testing.TB, hours int) (fano, base windowResult) {
	scenario := func(baseline bool) windowRun {
		return windowRun{workers: 8, promptChars: 20000, duration: time.Duration(hours) * time.Hour,
			start: time.Date(2030, 1, 1, 6, 0, 0, 0, time.UTC), baseline: baseline}
	}
	server := func() *windowAPI {
		return &windowAPI{tpm: 100000, rpm: 1000, latency: 20 * time.Second, completion: 500, charsPerToken: 3.6}
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); fano = scenario(false).run(t, server()) }()
	go func() { defer wg.Done(); base = scenario(true).run(t, server()) }()
	wg.Wait()
	return fano, base
}

// dayCapScenario runs fano and the baseline side by side for days from
// 06:00 UTC: 4 workers against a cap of 50 requests a UTC day (and 20 a
// minute), answers after 10 s.
func dayCapScenario(t testing.TB, days int) (fano, base windowResult) {
	scenario := func(baseline bool) windowRun {
		return windowRun{workers: 4, promptChars: 400, duration: time.Duration(days) * 24 * time.Hour,
			start: time.Date(2030, 1, 1, 6, 0, 0, 0, time.UTC), baseline: baseline}
	}
	server := func() *windowAPI {
		return &windowAPI{perDay: 50, rpm: 20, latency: 10 * time.Second, completion: 200, charsPerToken: 4}
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); fano = scenario(false).run(t, server()) }()
	go func() { defer wg.Done(); base = scenario(true).run(t, server()) }()
	wg.Wait()
	return fano, base
}

// BenchmarkWindow429s reports the 429s of both scenarios beside their
// baselines: token 429s an hour after the first 10 minutes of a 3-hour
// TPM run, and daily-cap 429s a day (the first of each day included)
// over 3 days.
func BenchmarkWindow429s(b *testing.B) {
	for range b.N {
		fano, base := tpmScenario(b, 3)
		warm := time.Date(2030, 1, 1, 6, 10, 0, 0, time.UTC)
		perHour := func(r windowResult) float64 { return float64(countAfter(r.tok429s, warm)) / (3 - 10.0/60) }
		b.ReportMetric(perHour(fano), "fano-token-429s/h")
		b.ReportMetric(perHour(base), "baseline-token-429s/h")
		b.ReportMetric(100*float64(fano.okTokens)/(100000*60*3), "fano-tpm-%")
		b.ReportMetric(100*float64(base.okTokens)/(100000*60*3), "baseline-tpm-%")
		fano, base = dayCapScenario(b, 3)
		b.ReportMetric(float64(len(fano.day429s))/4, "fano-daycap-429s/day")
		b.ReportMetric(float64(len(base.day429s))/4, "baseline-daycap-429s/day")
		b.ReportMetric(float64(len(base.day429s))/float64(max(len(fano.day429s), 1)), "daycap-429-ratio")
	}
}
