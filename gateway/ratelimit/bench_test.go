package ratelimit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"fano/gateway"
	"fano/gateway/api"
	"fano/gateway/ratelimit"
	"fano/gateway/ratelimit/simclock"
)

// BenchmarkIncident429 replays the seeds/002 incident: 500 concurrent
// workers against a model limited to 200 requests per minute, for 57
// minutes, once through fano's limiter + API backend (a 429 pauses the
// task for its RetryAfter, as the executor does) and once as the naive
// agent-level retry loop (no pacing; each task retried after 2, 8 and 16
// s, then given up for the next one). Both run in the same benchmark, each
// against its own OpenAI-compatible server on 127.0.0.1 that allows 200
// requests in any sliding minute and answers 429 with Retry-After and
// x-ratelimit-* headers above that; an accepted request takes the model 6
// s to answer.
//
// Time is simulated (simclock): the HTTP requests, the limiter and the
// backend are real, but the clock they all read jumps from one event to
// the next once every actor waits, so 57 minutes take seconds and the
// machine's load cannot distort them. FANO_BENCH429_MINUTES shortens the
// run.
//
// Goal: fano ≤ 10 429s where the baseline gets thousands, at ≥ 97 % of the
// allowed 200 RPM.
func BenchmarkIncident429(b *testing.B) {
	if testing.Short() {
		b.Skip("skipped with -short")
	}
	minutes := 57
	if v := os.Getenv("FANO_BENCH429_MINUTES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("FANO_BENCH429_MINUTES=%q: want a positive whole number", v)
		}
		minutes = n
	}
	sc := incident{limit: 200, workers: 500, duration: time.Duration(minutes) * time.Minute, latency: 6 * time.Second,
		restartAt: min(20*time.Minute, time.Duration(minutes)*time.Minute/2), seeded: true}
	var fano, base, unseeded outcome
	for range b.N {
		var wg sync.WaitGroup
		wg.Add(3)
		go func() { defer wg.Done(); fano.add(sc.run(b, true)) }()
		go func() { defer wg.Done(); base.add(sc.run(b, false)) }()
		go func() {
			defer wg.Done()
			noWAL := sc
			noWAL.seeded = false
			unseeded.add(noWAL.run(b, true))
		}()
		wg.Wait()
	}
	n := float64(b.N)
	b.ReportMetric(float64(fano.rateLimited)/n, "fano-429s")
	b.ReportMetric(float64(base.rateLimited)/n, "baseline-429s")
	b.ReportMetric(sc.rpmPercent(fano.ok)/n, "fano-rpm-%")
	b.ReportMetric(sc.rpmPercent(base.ok)/n, "baseline-rpm-%")
	b.ReportMetric(float64(base.rateLimited)/float64(max(fano.rateLimited, 1)), "429-ratio")
	b.ReportMetric(float64(base.failedTasks)/n, "baseline-tasks-given-up")
	b.ReportMetric(float64(unseeded.rateLimited)/n, "restart-without-learned-rate-429s")
	b.ReportMetric(sc.rpmPercent(unseeded.ok)/n, "restart-without-learned-rate-rpm-%")
	per := func(v int64) int64 { return v / int64(b.N) }
	b.Logf("restart at minute %d: fano seeds the new limiter with the rate learned before it (a WAL event); without it: %d 429s, %.2f%% of the limit",
		int(sc.restartAt.Minutes()), per(unseeded.rateLimited), sc.rpmPercent(unseeded.ok)/n)
	b.Logf("%d simulated minutes, %d workers, limit %d RPM: fano %d 429s, %.2f%% of the limit (%d answers, %d other errors); baseline %d 429s, %.2f%% (%d answers, %d tasks given up)",
		minutes, sc.workers, sc.limit, per(fano.rateLimited), sc.rpmPercent(fano.ok)/n, per(fano.ok), per(fano.other),
		per(base.rateLimited), sc.rpmPercent(base.ok)/n, per(base.ok), per(base.failedTasks))
}

type incident struct {
	limit    int
	workers  int
	duration time.Duration
	latency  time.Duration
	// restartAt restarts fano (0: never): its limiter and backend are
	// replaced, the old limiter's queue is dropped, requests in flight
	// finish. seeded: the new limiter starts at the rate learned before
	// the restart, as fano's WAL gives it back.
	restartAt time.Duration
	seeded    bool
}

type outcome struct {
	ok, rateLimited, other, failedTasks int64
}

func (o *outcome) add(p outcome) {
	o.ok += p.ok
	o.rateLimited += p.rateLimited
	o.other += p.other
	o.failedTasks += p.failedTasks
}

func (sc incident) rpmPercent(ok int64) float64 {
	return 100 * float64(ok) / sc.duration.Minutes() / float64(sc.limit)
}

// limitedAPI is an OpenAI-compatible server allowing limit requests in
// any sliding minute; rejected requests do not count. It reads the
// simulated clock, and while the model "thinks" it gives up the worker's
// token (see simclock).
type limitedAPI struct {
	limit   int
	latency time.Duration
	clock   *simclock.Clock
	end     time.Time     // nothing after this is counted
	stop    chan struct{} // closed when the run ends

	mu       sync.Mutex
	accepted []time.Time // acceptance times of the last minute, oldest first
	ok, r429 atomic.Int64
}

func (s *limitedAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := s.clock.Now()
	counted := now.Before(s.end)
	s.mu.Lock()
	for len(s.accepted) > 0 && !s.accepted[0].After(now.Add(-time.Minute)) {
		s.accepted = s.accepted[1:]
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set(ratelimit.HeaderLimit, strconv.Itoa(s.limit))
	if len(s.accepted) >= s.limit {
		reset := s.accepted[0].Add(time.Minute).Sub(now)
		s.mu.Unlock()
		if counted {
			s.r429.Add(1)
		}
		h.Set(ratelimit.HeaderRemaining, "0")
		h.Set(ratelimit.HeaderReset, reset.String())
		h.Set("Retry-After", strconv.Itoa(int((reset+time.Second-1)/time.Second)))
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"error":{"message":"Rate limit exceeded: 200 requests per minute","code":429}}`))
		return
	}
	s.accepted = append(s.accepted, now)
	remaining := s.limit - len(s.accepted)
	reset := s.accepted[0].Add(time.Minute).Sub(now)
	s.mu.Unlock()
	if counted {
		s.ok.Add(1)
	}
	h.Set(ratelimit.HeaderRemaining, strconv.Itoa(remaining))
	h.Set(ratelimit.HeaderReset, reset.String())
	done := s.clock.After(s.latency) // the model writes its answer
	s.clock.Tokens().Add(-1)
	select {
	case <-done:
	case <-r.Context().Done():
		return
	case <-s.stop:
		return
	}
	body, _ := json.Marshal(map[string]any{
		"choices": []any{map[string]any{"message": map[string]any{"role": "assistant", "content": "an answer"}, "finish_reason": "stop"}},
		"usage":   map[string]any{"prompt_tokens": 100, "completion_tokens": 50},
	})
	_, _ = w.Write(body)
}

// run plays the incident once: withFano sends through a Limiter (learning
// the limit from the headers, starting at 20 RPM) and waits out each 429;
// otherwise each worker retries a task after 2, 8 and 16 s, then gives it
// up and takes the next one.
func (sc incident) run(b *testing.B, withFano bool) outcome {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tok := simclock.NewTokens(sc.workers)
	clock := simclock.New(start, tok)
	srv := &limitedAPI{limit: sc.limit, latency: sc.latency, clock: clock, end: start.Add(sc.duration), stop: make(chan struct{})}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	defer close(srv.stop)
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConns = 2 * sc.workers
	transport.MaxIdleConnsPerHost = 2 * sc.workers
	defer transport.CloseIdleConnections()

	cfg := api.Config{Name: "arcee", BaseURL: ts.URL + "/v1", Model: "arcee", APIKey: "sk-bench",
		Client: &http.Client{Transport: transport}, Clock: clock, Logger: zerolog.Nop()}
	newBackend := func(learned int) *api.Backend {
		c := cfg
		if withFano {
			c.Limiter = ratelimit.New(ratelimit.Config{Name: "arcee", InitialRPM: 20}, clock)
			ratelimit.SetHooks(c.Limiter, func() { tok.Add(-1) }, func() { tok.Add(1) })
			c.Limiter.Learn(learned, time.Minute)
		}
		be, err := api.New(c)
		if err != nil {
			b.Fatal(err)
		}
		return be
	}
	var cur atomic.Pointer[api.Backend]
	cur.Store(newBackend(0))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// sleep waits d of simulated time, giving up the worker's token.
	sleep := func(d time.Duration) {
		ch := clock.After(d)
		tok.Add(-1)
		select {
		case <-ch:
		case <-ctx.Done():
		}
	}
	backoff := []time.Duration{2 * time.Second, 8 * time.Second, 16 * time.Second}
	var other, failedTasks atomic.Int64
	var wg sync.WaitGroup
	for w := range sc.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for task := 0; ctx.Err() == nil; task++ {
				req := gateway.Request{TaskID: fmt.Sprintf("w%d/t%d", w, task), Prompt: "analyse the paper"}
				if withFano {
					for ctx.Err() == nil {
						be := cur.Load()
						_, err := be.Send(ctx, req)
						var rl *gateway.RateLimitedError
						if errors.As(err, &rl) {
							if cur.Load() != be {
								continue // fano restarted: the task runs again at once
							}
							sleep(rl.RetryAfter) // the task is paused, then requeued
							continue
						}
						if err != nil && ctx.Err() == nil {
							other.Add(1)
						}
						break
					}
					continue
				}
				for attempt := 0; ctx.Err() == nil; attempt++ {
					_, err := cur.Load().Send(ctx, req)
					if err == nil {
						break
					}
					if attempt == len(backoff) {
						failedTasks.Add(1)
						break
					}
					sleep(backoff[attempt])
				}
			}
		}()
	}

	// The driver: whenever every actor waits, jump to the next timer.
	stuck := make(chan struct{})
	var progress atomic.Int64
	go func() { // a watchdog for a broken simulation, in real time
		last := int64(-1)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(20 * time.Second):
			}
			if p := progress.Load(); p == last {
				close(stuck)
				return
			} else {
				last = p
			}
		}
	}()
	end := start.Add(sc.duration)
	restarted := false
	for {
		if !tok.WaitQuiet(stuck) {
			b.Fatalf("simulation stuck at %s with %d busy actors", clock.Now().Sub(start), tok.Busy())
		}
		next, ok := clock.Next()
		if !ok || next.After(end) {
			break
		}
		if withFano && sc.restartAt > 0 && !restarted && !next.Before(start.Add(sc.restartAt)) {
			// The restart: a new limiter (seeded from the WAL, or at the
			// initial rate), the old one's queue let go.
			restarted = true
			old := cur.Load()
			learned := 0
			if sc.seeded {
				learned, _ = old.Limiter().Learned()
			}
			cur.Store(newBackend(learned))
			old.Limiter().Pause(end.Add(time.Hour))
			continue
		}
		clock.AdvanceTo(next)
		progress.Add(1)
	}
	cancel()
	wg.Wait()
	if withFano {
		b.Logf("fano limiter at the end (seeded %v): %+v", sc.seeded, cur.Load().Limiter().Stats())
	}
	return outcome{ok: srv.ok.Load(), rateLimited: srv.r429.Load(), other: other.Load(), failedTasks: failedTasks.Load()}
}
