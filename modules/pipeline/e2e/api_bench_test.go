package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fano/gateway/ratelimit"
)

// rpmServer is an OpenAI-compatible chat API on 127.0.0.1 that accepts
// limit requests in any sliding minute and answers 429 (Retry-After and
// x-ratelimit-* headers) above that, like the seeds/002 provider.
type rpmServer struct {
	limit    int
	mu       sync.Mutex
	accepted []time.Time
	first    time.Time
	last     time.Time
	ok, r429 atomic.Int64
}

func (s *rpmServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
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
		s.r429.Add(1)
		h.Set(ratelimit.HeaderRemaining, "0")
		h.Set(ratelimit.HeaderReset, reset.String())
		h.Set("Retry-After", strconv.Itoa(int((reset+time.Second-1)/time.Second)))
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"error":{"message":"Rate limit exceeded","code":429}}`))
		return
	}
	s.accepted = append(s.accepted, now)
	if s.first.IsZero() {
		s.first = now
	}
	s.last = now
	remaining := s.limit - len(s.accepted)
	reset := s.accepted[0].Add(time.Minute).Sub(now)
	s.mu.Unlock()
	s.ok.Add(1)
	h.Set(ratelimit.HeaderRemaining, strconv.Itoa(remaining))
	h.Set(ratelimit.HeaderReset, reset.String())
	body, _ := json.Marshal(map[string]any{
		"choices": []any{map[string]any{"message": map[string]any{"role": "assistant", "content": `{"verdict": true, "confidence": 0.8}`}, "finish_reason": "stop"}},
		"usage":   map[string]any{"prompt_tokens": 100, "completion_tokens": 20},
	})
	_, _ = w.Write(body)
}

// BenchmarkPipelineAPI200RPM: items through a real `fano pipeline run` on
// the API backend against a 127.0.0.1 server allowing 200 requests a
// minute, fano starting from initial_rpm 20 and learning the rate from the
// headers. Reports the achieved rate as a share of the limit (goal ≥ 97 %)
// and the 429s (goal ≤ 10). FANO_BENCH_API_ITEMS sets the item count
// (default 400: about two minutes).
func BenchmarkPipelineAPI200RPM(b *testing.B) {
	items := 400
	if v := os.Getenv("FANO_BENCH_API_ITEMS"); v != "" {
		items, _ = strconv.Atoi(v)
	}
	fano.Require(b)
	for range b.N {
		srv := &rpmServer{limit: 200}
		hs := httptest.NewServer(srv)
		cfg := fmt.Sprintf(`
backends:
  api: {type: api, hourly_limit: 100000, max_concurrency: 64, api: {base_url: %s/v1, model: m, api_key_env: FANO_BENCH_KEY, initial_rpm: 20}}
explorer: {enabled: false}
documenter: {enabled: false}
researcher: {enabled: false}
control: {enabled: false}
logging: {level: warn, console: json}
`, hs.URL)
		def := `
name: apibench
items: {source: items.jsonl, key: id}
models: [api]
steps:
  - name: verdict
    llm:
      prompt: 'Is this claim true? {{.item.claim}}'
      schema: {type: object, required: [verdict], properties: {verdict: {type: boolean}}}
`
		e := newEnv(&testing.T{}, def, cfg, items)
		cmd := e.cmd(context.Background(), "pipeline", "run", e.def, "--no-progress", "--json")
		cmd.Env = append(os.Environ(), "FANO_BENCH_KEY=test-key-not-secret")
		out, err := cmd.CombinedOutput()
		hs.Close()
		if err != nil {
			b.Fatalf("fano pipeline run: %v\n%s", err, out)
		}
		srv.mu.Lock()
		span := srv.last.Sub(srv.first)
		srv.mu.Unlock()
		ok := srv.ok.Load()
		// fano paces requests evenly (it does not spend the first minute's
		// burst allowance), so the rate is requests over the span from the
		// first accepted request to the last.
		rpm := float64(ok-1) / span.Minutes()
		share := 100 * rpm / 200
		b.ReportMetric(rpm, "rpm")
		b.ReportMetric(share, "%-of-limit")
		b.ReportMetric(float64(srv.r429.Load()), "429s")
		b.ReportMetric(float64(ok), "requests")
		_ = os.RemoveAll(e.dir)
	}
}
