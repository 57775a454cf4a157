package actors

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"fano/gateway"
	"fano/gateway/api"
	"fano/gateway/ratelimit"
	"fano/modules/probe"
	"fano/pb"
)

// windowServer is an OpenAI-compatible API that enforces limit requests
// per sliding window (a 429 past it), telling its limit in the headers as
// providers do.
type windowServer struct {
	limit  int
	window time.Duration
	mu     sync.Mutex
	recent []time.Time
	served atomic.Int64
	denied atomic.Int64
}

func (s *windowServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	s.mu.Lock()
	i := 0
	for i < len(s.recent) && now.Sub(s.recent[i]) >= s.window {
		i++
	}
	s.recent = s.recent[i:]
	over := len(s.recent) >= s.limit
	if !over {
		s.recent = append(s.recent, now)
	}
	left := s.limit - len(s.recent)
	s.mu.Unlock()
	w.Header().Set(ratelimit.HeaderLimit, strconv.Itoa(s.limit))
	w.Header().Set(ratelimit.HeaderRemaining, strconv.Itoa(max(0, left)))
	w.Header().Set("Content-Type", "application/json")
	if over {
		s.denied.Add(1)
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":{"message":"rate limit reached for requests"}}`)
		return
	}
	s.served.Add(1)
	_, _ = io.WriteString(w, `{"choices":[{"message":{"content":"The Fano plane has seven points."}}]}`)
}

// pacedRun runs tasks single-turn tasks on four API backends whose
// servers allow 100, 200, 300 and 400 requests per window (the minute
// scaled down to window), each paced by its own rate limiter, and
// returns how long they took and the 429s met.
func pacedRun(b *testing.B, tasks int, window time.Duration) (took time.Duration, denied int64) {
	rates := []int{100, 200, 300, 400}
	names := []string{"r100", "r200", "r300", "r400"}
	var servers []*windowServer
	bu := setup(b, setupOpts{backends: names, hourly: 1 << 30, noSync: true, probe: probe.Config{NoPropose: true, Turns: 1, TaskType: benchTaskType},
		mutate: func(o *Options) {
			o.TickInterval = 5 * time.Millisecond
			o.Logger = zerolog.Nop()
			for i, rate := range rates {
				ws := &windowServer{limit: rate, window: window}
				srv := httptest.NewServer(ws)
				b.Cleanup(srv.Close)
				servers = append(servers, ws)
				lim := ratelimit.New(ratelimit.Config{Name: names[i], InitialRPM: rate, Window: window}, clockwork.NewRealClock())
				be, err := api.New(api.Config{Name: names[i], BaseURL: srv.URL + "/v1", Model: "m", APIKey: "sk-bench-1234",
					Limiter: lim, Logger: zerolog.Nop()})
				if err != nil {
					b.Fatal(err)
				}
				o.Backends[i] = be
				o.Allocator.Backends[i].Kind, o.Allocator.Backends[i].MaxConcurrency = "api", 8
			}
		}})
	all := make(chan struct{})
	var done atomic.Int64
	var failed, seen atomic.Int64
	bu.opts.Observe = func(_ string, e *pb.Event) {
		if os.Getenv("FANO_PACED_DEBUG") != "" && seen.Add(1) < 40 {
			fmt.Fprintf(os.Stderr, "%T %v\n", e.Body, e.GetLlmRequestFailed().GetError())
		}
		if e.GetTaskFailed() != nil && failed.Add(1) == 1 {
			fmt.Fprintln(os.Stderr, "failed:", e.GetTaskFailed().GetError())
		}
		if (e.GetTaskCompleted() != nil || e.GetTaskFailed() != nil) && done.Add(1) == int64(tasks) {
			close(all)
		}
	}
	sys, err := Start(bu.opts)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = sys.Stop() }()
	batch := make([]*pb.Task, tasks)
	for i := range batch {
		batch[i] = benchTask(i)
	}
	start := time.Now()
	replies, err := sys.SubmitBatch(batch)
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range replies {
		if !r.GetAccepted() {
			b.Fatalf("not accepted: %v", r)
		}
	}
	sys.Tick()
	select {
	case <-all:
	case <-time.After(2 * time.Minute):
		b.Fatalf("only %d of %d tasks completed", done.Load(), tasks)
	}
	took = time.Since(start)
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d tasks failed", n)
	}
	for _, s := range servers {
		denied += s.denied.Load()
	}
	return took, denied
}

// BenchmarkPacedBackends: 2,000 single-turn tasks on four API backends
// at 100, 200, 300 and 400 requests a minute (real HTTP servers that
// enforce it; the minute scaled down to 3 s), beside the ideal: their sum,
// 1,000 a minute. Goal: >= 95 % of it; no task waits in a paced
// backend's queue while another could serve it.
func BenchmarkPacedBackends(b *testing.B) {
	tasks, window := 2000, 3*time.Second
	if n, err := strconv.Atoi(os.Getenv("FANO_PACED_TASKS")); err == nil {
		tasks = n
	}
	for range b.N {
		took, denied := pacedRun(b, tasks, window)
		ideal := time.Duration(float64(tasks) / 1000 * float64(window))
		b.ReportMetric(float64(ideal)/float64(took), "of-ideal")
		b.ReportMetric(float64(tasks)/took.Seconds()*window.Seconds(), "per-window")
		b.ReportMetric(1000, "ideal-per-window")
		b.ReportMetric(float64(denied), "429s")
		b.Logf("%d tasks in %s; ideal %s (1,000 a window of %s); %d 429s", tasks, took.Round(time.Millisecond), ideal, window, denied)
	}
}

// BenchmarkOverloaded529: 300 single-turn tasks on three backends that
// answer 30 % of requests with a 529 (overloaded), beside the same run
// without faults. The 60/300/900 s retry waits are scaled down 1:600
// (100 ms, 500 ms, 1.5 s) against a 10 ms answer. Goal: a passing fault
// delays the backend, not the task: the run is not paced by a few
// unlucky tasks' waits while other backends are free (faulty throughput
// >= 60 % of the fault-free run's, the 70 % of requests that succeed
// less what the failed ones cost).
func BenchmarkOverloaded529(b *testing.B) {
	const tasks = 300
	backoff := func(bu *bundle) {
		bu.opts.RetryBackoff = []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, 1500 * time.Millisecond}
	}
	for range b.N {
		base := runFaultWorkload(b, tasks, 1, 10*time.Millisecond, backoff)
		faulty := runFaultWorkload(b, tasks, 1, 10*time.Millisecond, func(bu *bundle) {
			backoff(bu)
			var n atomic.Int64
			for _, s := range bu.sims {
				s.Inject(func(context.Context, gateway.Request) error {
					if n.Add(1)%10 < 3 {
						return gateway.Transient("sim", "HTTP 529: overloaded")
					}
					return nil
				})
			}
		})
		tput := func(r faultRun) float64 { return float64(r.completed) / r.took.Seconds() }
		b.ReportMetric(tput(faulty)/tput(base), "of-fault-free")
		b.ReportMetric(tput(faulty), "529-tasks/s")
		b.ReportMetric(tput(base), "baseline-tasks/s")
		b.ReportMetric(float64(faulty.failed), "529-tasks-failed")
		b.Logf("fault-free: %d tasks in %s; 30%% 529s: %d tasks in %s (%d failed)",
			base.completed, base.took.Round(time.Millisecond), faulty.completed, faulty.took.Round(time.Millisecond), faulty.failed)
	}
}
