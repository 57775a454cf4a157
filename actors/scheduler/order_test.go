package scheduler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"fano/pb"
)

// tickView is what the reference knows of the last tick: the figures env
// gave and the starts of the share window, recorded by the test itself.
type tickView struct {
	at      int64
	backlog map[string]int
	quota   map[quotaKey]bool // asked for the preferences of unfinished tasks at the tick
	shares  map[string]int
	total   int
}

// specPriority is spec §6.1.1's formula written out again, independent of
// the scheduler's caches: what the spec's full re-sort computes for t at now.
func specPriority(cfg Config, t *pb.Task, now int64, v tickView) int32 {
	p := int(t.BasePriority)
	if p == 0 {
		p = DefaultBasePriority
		if b, ok := cfg.BasePriorities[t.TaskType]; ok {
			p = b
		}
	}
	p += backlogPressure(v.backlog[t.Module])
	if waited := now - t.CreatedAt; t.CreatedAt > 0 && waited > 0 {
		p += min(int(waited/int64(time.Hour))*cfg.BoostPerHour, cfg.MaxBoost)
		if cfg.MaxWait > 0 && waited >= int64(cfg.MaxWait) {
			p += OverdueBoost // the hard bound: before every task within it
		}
	}
	if t.TaskType == CommentTaskType {
		p += CommentUrgency
	}
	if t.LlmPreference != "" {
		if q, asked := v.quota[quotaKey{t.LlmPreference, t.RequiresDeepMode}]; asked && !q {
			p -= NoQuotaPenalty
		}
	}
	share := BalanceShare
	if w, ok := cfg.ModuleWeights[t.Module]; ok {
		sum := 0
		for _, x := range cfg.ModuleWeights {
			sum += x
		}
		share = BalanceShare * float64(w) / (float64(sum) / float64(len(cfg.ModuleWeights)))
	}
	if v.total > 0 && float64(v.shares[t.Module])/float64(v.total) < share {
		p += BalanceBonus
	}
	return int32(p)
}

// specOrder is the spec's get_next_task done for every task at once: every
// waiting task's priority recomputed at now, all sorted, the runnable kept.
func specOrder(s *State, v tickView, free, deepFree []string, now int64, picked map[string]bool) []string {
	type ranked struct {
		t *pb.Task
		p int32
	}
	var all []ranked
	for _, t := range s.Tasks(nil, 0) {
		if t.State != pb.TaskState_TASK_STATE_PENDING || picked[t.Id] || t.NotBefore > now {
			continue
		}
		list := free
		if t.RequiresDeepMode {
			list = deepFree
		}
		fits := false
		if t.LlmPreference != "" {
			fits = slices.Contains(list, t.LlmPreference)
		} else {
			for _, b := range list {
				if !slices.Contains(t.LlmExclude, b) {
					fits = true
					break
				}
			}
		}
		if fits {
			all = append(all, ranked{t, specPriority(s.cfg, t, now, v)})
		}
	}
	slices.SortFunc(all, func(a, b ranked) int {
		if ordered(a.p, b.p, a.t, b.t) {
			return -1
		}
		return 1
	})
	var ids []string
	for _, r := range all {
		ids = append(ids, r.t.Id)
	}
	return ids
}

// drain is the scheduler's whole order for a free set: pick until nothing
// is left, then put every pick back.
func drain(s *State, free, deepFree []string, now time.Time) []string {
	var ids []string
	for {
		tk, ok := s.PickFor(free, deepFree, now)
		if !ok {
			break
		}
		ids = append(ids, tk.Id)
	}
	for _, id := range ids {
		s.Unpick(id)
	}
	return ids
}

// TestOrderMatchesSpecResort drives the scheduler through submits, picks,
// starts, retries, pauses, cancels and ticks across many hours (so tasks
// cross their starvation steps and reach the cap between ticks and picks,
// and the env figures change on every tick), and at many times compares
// its whole order, and every task's priority, with the spec's full re-sort.
func TestOrderMatchesSpecResort(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { orderProperty(t, seed) })
	}
}

func orderProperty(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 99))
	backends := []string{"chatgpt", "gemini", "claude", "grok"}
	modules := []string{"explorer", "documenter", "researcher"}
	types := []string{"exploration", "critique", "synthesis", "address_comment", "draft_section", "extract_content", "mystery"}
	cfg := Config{MaxPending: 100000}
	if seed%3 == 1 {
		cfg.BoostPerHour, cfg.MaxBoost = 2, 7 // a cap that is not a whole number of steps
	}
	if seed%2 == 1 {
		// Weighted balance (one module unweighted) and the hard bound,
		// crossed between ticks like the hourly steps.
		cfg.ModuleWeights = map[string]int{"explorer": 90, "documenter": 10}
		cfg.MaxWait = 150 * time.Minute
	}
	s := New(cfg)
	now := t0
	picked := map[string]bool{}
	var running []string
	type start struct {
		module string
		at     int64
	}
	var starts []start
	view := tickView{backlog: map[string]int{}, quota: map[quotaKey]bool{}, shares: map[string]int{}}
	checks, compared := 0, 0

	tick := func() {
		backlog := map[string]int{}
		for _, m := range modules {
			backlog[m] = rng.IntN(30)
		}
		noQuota := map[quotaKey]bool{}
		for _, b := range backends {
			noQuota[quotaKey{b, true}] = rng.IntN(3) == 0
			noQuota[quotaKey{b, false}] = rng.IntN(8) == 0
		}
		at := now.UnixNano()
		// The tick asks about the modules that have tasks in memory.
		v := tickView{at: at, backlog: map[string]int{}, quota: map[quotaKey]bool{}, shares: map[string]int{}}
		for m := range s.Counts() {
			v.backlog[m] = backlog[m]
		}
		for _, tk := range s.Tasks(func(tk *pb.Task) bool { return !IsFinished(tk.State) && tk.LlmPreference != "" }, 0) {
			k := quotaKey{tk.LlmPreference, tk.RequiresDeepMode}
			v.quota[k] = !noQuota[k]
		}
		for _, st := range starts {
			if st.at >= at-int64(time.Hour) && st.at <= at {
				v.shares[st.module]++
				v.total++
			}
		}
		view = v
		s.Recompute(now, Env{
			HasQuota: func(b string, deep bool) bool { return !noQuota[quotaKey{b, deep}] },
			Backlog:  func(m string) int { return backlog[m] },
		})
	}
	compare := func(step int) {
		checks++
		at := now.UnixNano()
		free := slices.Clone(backends)
		deepFree := slices.Clone(backends)
		if rng.IntN(2) == 0 {
			free = free[:1+rng.IntN(4)]
			deepFree = deepFree[:rng.IntN(4)]
		}
		want := specOrder(s, view, free, deepFree, at, picked)
		got := drain(s, free, deepFree, now)
		if !slices.Equal(want, got) {
			i := 0
			for i < len(want) && i < len(got) && want[i] == got[i] {
				i++
			}
			t.Fatalf("step %d: order for free %v deep %v differs at place %d of %d/%d: spec %v, scheduler %v",
				step, free, deepFree, i, len(want), len(got), want[i:min(i+3, len(want))], got[i:min(i+3, len(got))])
		}
		compared += len(got)
		// The picks moved the scheduler's clock to now: every unfinished
		// task's priority (running, paused, delayed too) is the spec's.
		for _, tk := range s.Tasks(func(tk *pb.Task) bool { return !IsFinished(tk.State) }, 0) {
			require.Equal(t, specPriority(s.cfg, tk, at, view), tk.Priority, "step %d: priority of %s", step, tk.Id)
		}
	}

	n := 0
	for step := range 2000 {
		switch r := rng.IntN(100); {
		case r < 60:
			now = now.Add(time.Duration(rng.IntN(300)) * time.Second)
		case r < 90:
			now = now.Add(time.Duration(rng.IntN(40)) * time.Minute)
		default:
			now = now.Add(time.Duration(rng.IntN(150)) * time.Minute)
		}
		switch r := rng.IntN(100); {
		case r < 35:
			n++
			tk := task(modules[rng.IntN(len(modules))], types[rng.IntN(len(types))], fmt.Sprint(n))
			switch rng.IntN(10) {
			case 0, 1, 2:
				tk.LlmPreference = backends[rng.IntN(len(backends))]
				tk.RequiresDeepMode = rng.IntN(2) == 0
			case 3, 4:
				tk.LlmExclude = []string{backends[rng.IntN(4)], backends[rng.IntN(4)]}
			case 5:
				tk.RequiresDeepMode = true
			}
			if rng.IntN(5) == 0 {
				tk.BasePriority = int32(rng.IntN(100) + 1)
			}
			submit(t, s, tk, now)
		case r < 50:
			tk, ok := s.Pick(backends[:1+rng.IntN(4)], now)
			if ok {
				picked[tk.Id] = true
			}
		case r < 58:
			for id := range picked {
				delete(picked, id)
				if rng.IntN(3) == 0 {
					s.Unpick(id)
				} else {
					tk, _ := s.Task(id)
					apply(t, s, evStarted(id, backends[rng.IntN(4)], now))
					// The scheduler keeps the starts within an hour of the
					// newest (a clock that goes back sees no older ones).
					for len(starts) > 0 && starts[0].at < now.UnixNano()-int64(time.Hour) {
						starts = starts[1:]
					}
					starts = append(starts, start{tk.Module, now.UnixNano()})
					running = append(running, id)
				}
				break
			}
		case r < 70:
			if len(running) == 0 {
				continue
			}
			i := rng.IntN(len(running))
			id := running[i]
			running = slices.Delete(running, i, i+1)
			switch rng.IntN(4) {
			case 0:
				apply(t, s, evCompleted(id, now))
			case 1:
				apply(t, s, evRetry(id, "later", now.Add(time.Duration(rng.IntN(5400))*time.Second), now))
			case 2:
				apply(t, s, evPaused(id, "rate_limited", now.Add(10*time.Minute), now))
			case 3:
				apply(t, s, evRequeued(id, now))
			}
		case r < 74:
			for _, e := range s.DecideResume(now) {
				apply(t, s, e)
			}
		case r < 77:
			for _, tk := range s.Tasks(func(tk *pb.Task) bool { return tk.State == pb.TaskState_TASK_STATE_PENDING }, 1) {
				e, err := s.DecideCancel(tk.Id, "test", now)
				require.NoError(t, err)
				apply(t, s, e)
				delete(picked, tk.Id)
			}
		case r < 92:
			tick()
		case r < 93:
			// The wall clock went back: the tick re-keys everything at the
			// earlier time.
			now = now.Add(-time.Duration(rng.IntN(90)) * time.Minute)
			tick()
		default:
			compare(step)
		}
		if step%40 == 0 {
			compare(step)
			checkInvariants(t, s)
		}
	}
	checkInvariants(t, s)
	t.Logf("%d comparisons, %d picks compared, %d tasks", checks, compared, s.Len())
	require.Greater(t, compared, 3000)
}
