package scheduler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"fano/pb"
)

var benchBackends = []string{"chatgpt", "gemini", "claude", "grok"}

// benchState fills a scheduler with n waiting tasks: a mix of types,
// modules, ages, preferences (25%) and exclusions (15%).
func benchState(b *testing.B, n int) (*State, time.Time) {
	b.Helper()
	rng := rand.New(rand.NewPCG(uint64(n), 1))
	modules := []string{"explorer", "documenter", "researcher"}
	types := slices.Sorted(func(yield func(string) bool) {
		for k := range BasePriorities {
			if !yield(k) {
				return
			}
		}
	})
	// As fano runs it: the config's module weights and max_wait_hours
	// (about half the tasks are past the bound, the rest cross it).
	s := New(Config{MaxPending: n + 1, ModuleWeights: map[string]int{"explorer": 40, "documenter": 40, "researcher": 20}, MaxWait: 4 * time.Hour})
	now := t0.Add(10 * time.Hour)
	for i := range n {
		tk := task(modules[rng.IntN(3)], types[rng.IntN(len(types))], fmt.Sprint(i))
		switch r := rng.IntN(20); {
		case r < 5:
			tk.LlmPreference = benchBackends[rng.IntN(4)]
		case r < 8:
			tk.LlmExclude = []string{benchBackends[rng.IntN(4)]}
		}
		created := now.Add(-time.Duration(rng.Int64N(int64(8 * time.Hour))))
		e, err := s.DecideSubmit(tk, created)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Apply(e); err != nil {
			b.Fatal(err)
		}
	}
	s.Recompute(now, Env{})
	return s, now
}

// frees are the free-backend sets the ops cycle through: 3 or 4 backends.
var benchFrees = [][]string{
	{"chatgpt", "gemini", "claude", "grok"},
	{"chatgpt", "claude", "grok"},
	{"gemini", "claude", "grok"},
	{"chatgpt", "gemini", "grok"},
}

// specResort is the spec's get_next_task: recompute every priority, sort
// all tasks, take the first runnable.
type specResort struct {
	s      *State
	tasks  []*pb.Task
	picked map[string]bool
}

func (r *specResort) next(free []string, now int64) *pb.Task {
	for _, t := range r.tasks {
		t.Priority = r.s.priorityAt(t, now)
	}
	slices.SortFunc(r.tasks, func(a, b *pb.Task) int {
		if before(a, b) {
			return -1
		}
		if before(b, a) {
			return 1
		}
		return 0
	})
	for _, t := range r.tasks {
		if t.State != pb.TaskState_TASK_STATE_PENDING || r.picked[t.Id] || t.NotBefore > now {
			continue
		}
		if t.LlmPreference != "" {
			if slices.Contains(free, t.LlmPreference) {
				return t
			}
			continue
		}
		for _, b := range free {
			if !slices.Contains(t.LlmExclude, b) {
				return t
			}
		}
	}
	return nil
}

func BenchmarkPick(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("fano/pending=%d", n), func(b *testing.B) {
			s, now := benchState(b, n)
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				t, ok := s.Pick(benchFrees[i%len(benchFrees)], now)
				if !ok {
					b.Fatal("nothing to pick")
				}
				s.Unpick(t.Id)
			}
		})
		b.Run(fmt.Sprintf("spec-resort/pending=%d", n), func(b *testing.B) {
			s, now := benchState(b, n)
			r := &specResort{s: s, picked: map[string]bool{}}
			for _, en := range s.tasks {
				r.tasks = append(r.tasks, en.t)
			}
			at := now.UnixNano()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				t := r.next(benchFrees[i%len(benchFrees)], at)
				if t == nil {
					b.Fatal("nothing to pick")
				}
				r.picked[t.Id] = true  // pick ...
				delete(r.picked, t.Id) // ... and put back
			}
		})
	}
}

// benchEnv gives a tick real figures to read: a documenter backlog and one
// backend without deep quota.
var benchEnv = Env{
	HasQuota: func(b string, deep bool) bool { return !(deep && b == "gemini") },
	Backlog: func(m string) int {
		if m == "documenter" {
			return 12
		}
		return 0
	},
}

// tickEvery is the scheduler actor's tick period.
const tickEvery = 100 * time.Millisecond

// BenchmarkTick is the scheduler's work per tick with n waiting tasks: the
// tick (Recompute at a clock 100 ms later) plus a pick, beside the spec's
// get_next_task, which re-sorts everything on every pick. The tasks were
// submitted over the 8 hours before, so about 5/8 of them still step up an
// hour after they were created; one op's cost includes its share of those
// re-keys (rekeys/op). After an hour of simulated ticks the queue is built
// again (off the clock) so every op sees that mix, not a queue whose boosts
// have all reached the cap.
func BenchmarkTick(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("fano/tasks=%d", n), func(b *testing.B) {
			s, now := benchState(b, n)
			start := now
			rekeys := 0
			for i := 0; b.Loop(); i++ {
				now = now.Add(tickEvery)
				if now.Sub(start) > time.Hour {
					b.StopTimer()
					s, now = benchState(b, n)
					start = now
					b.StartTimer()
				}
				before := s.rekeys
				s.Recompute(now, benchEnv)
				rekeys += int(s.rekeys - before)
				t, ok := s.Pick(benchFrees[i%len(benchFrees)], now)
				if !ok {
					b.Fatal("nothing to pick")
				}
				s.Unpick(t.Id)
			}
			b.ReportMetric(float64(rekeys)/float64(b.N), "rekeys/op")
		})
		b.Run(fmt.Sprintf("spec-resort/tasks=%d", n), func(b *testing.B) {
			s, now := benchState(b, n)
			s.Recompute(now, benchEnv)
			r := &specResort{s: s, picked: map[string]bool{}}
			for _, en := range s.tasks {
				r.tasks = append(r.tasks, en.t)
			}
			for i := 0; b.Loop(); i++ {
				now = now.Add(tickEvery)
				t := r.next(benchFrees[i%len(benchFrees)], now.UnixNano())
				if t == nil {
					b.Fatal("nothing to pick")
				}
				r.picked[t.Id] = true  // pick ...
				delete(r.picked, t.Id) // ... and put back
			}
		})
	}
}
