package actors

import (
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"fano/actors/allocator"
	"fano/modules/probe"
)

// dayResult is what a simulated day used.
type dayResult struct {
	hourly      map[string][]int // backend -> uses per hour
	deep        map[string]int
	rateLimited int
}

// simulateDay runs 24 hours on a fake clock with more work than quota:
// three backends of 50 requests an hour (10 % kept back) and deep-mode
// budgets of 100, 20 and 100 a day. Each hour it waits until the usable
// budget of every backend is spent.
func simulateDay(t testing.TB) dayResult {
	start := time.Date(2026, 1, 5, 0, 0, 30, 0, time.UTC)
	clock := clockwork.NewFakeClockAt(start)
	deepLimits := map[string]int{"chatgpt": 100, "gemini": 20, "claude": 100}
	b := setup(t, setupOpts{clock: clock, hourly: 50, deep: 100, memory: true,
		probe: probe.Config{Questions: questions(4000), Turns: 1, DeepQuestions: 400},
		mutate: func(o *Options) {
			for i := range o.Allocator.Backends {
				o.Allocator.Backends[i].DeepDailyLimit = deepLimits[o.Allocator.Backends[i].Name]
			}
		}})
	b.start()
	res := dayResult{hourly: map[string][]int{}, deep: map[string]int{}}
	usable := 45 // 50 less the 10 % buffer
	for h := 0; h < 24; h++ {
		if h > 0 {
			clock.Advance(time.Hour)
		}
		b.sys.Tick()
		used := map[string]int{}
		total := 0
		deadline := time.After(30 * time.Second)
		for total < 3*usable {
			select {
			case n := <-b.events:
				if q := n.Event.GetQuotaUsed(); q != nil {
					used[q.Backend]++
					total++
					if q.DeepMode {
						res.deep[q.Backend]++
					}
				}
				if n.Event.GetRateLimitRecorded() != nil {
					res.rateLimited++
				}
			case <-deadline:
				t.Fatalf("hour %d: only %d of %d requests ran (%v)", h, total, 3*usable, used)
			}
		}
		for _, name := range []string{"chatgpt", "claude", "gemini"} {
			res.hourly[name] = append(res.hourly[name], used[name])
		}
	}
	// Nothing more may run this hour: the allocator refuses a 46th use.
	for _, q := range b.sys.Quotas() {
		var ok bool
		b.sys.state.withAllocator(func(bk *allocator.Book) { ok = bk.CanUse(q.Name, false, b.clock.Now()) })
		require.False(t, ok, q.Name)
	}
	for _, s := range b.sims {
		res.rateLimited += int(s.Stats().RateLimited)
	}
	return res
}

func TestSimulatedDayUsesEveryBudget(t *testing.T) {
	res := simulateDay(t)
	for name, hours := range res.hourly {
		for h, n := range hours {
			require.Equal(t, 45, n, "%s hour %d", name, h)
		}
	}
	require.Equal(t, map[string]int{"chatgpt": 100, "gemini": 20, "claude": 100}, res.deep)
	require.Zero(t, res.rateLimited, "no backend may answer 'rate limited'")
}

// BenchmarkSimulatedDay: a day with known limits on the fake clock. Goal:
// quota used >= 99 % of the usable hourly budget (the configured limit
// less the 10 % buffer) and of the deep budgets, with 0 rate-limit answers.
// The baseline is the budget itself (100 %).
func BenchmarkSimulatedDay(b *testing.B) {
	for i := 0; i < b.N; i++ {
		res := simulateDay(b)
		used, budget := 0, 0
		for _, hours := range res.hourly {
			for _, n := range hours {
				used += n
				budget += 45
			}
		}
		deep := res.deep["chatgpt"] + res.deep["gemini"] + res.deep["claude"]
		b.ReportMetric(100*float64(used)/float64(budget), "hourly-used-%")
		b.ReportMetric(100*float64(deep)/220, "deep-used-%")
		b.ReportMetric(float64(res.rateLimited), "rate-limited")
	}
}
