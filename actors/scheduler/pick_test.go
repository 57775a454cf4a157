package scheduler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/pb"
)

func TestPickRespectsPreference(t *testing.T) {
	s := New(Config{})
	deep := task("explorer", "synthesis", "deep") // 60, needs gemini
	deep.LlmPreference = "gemini"
	plain := task("explorer", "exploration", "plain") // 50, any backend
	submit(t, s, deep, t0)
	submit(t, s, plain, t0)

	got, ok := s.Pick([]string{"chatgpt", "claude"}, t0)
	require.True(t, ok)
	assert.Equal(t, plain.Id, got.Id, "gemini is not free")
	s.Unpick(plain.Id)

	got, ok = s.Pick([]string{"chatgpt", "gemini"}, t0)
	require.True(t, ok)
	assert.Equal(t, deep.Id, got.Id)
	got, ok = s.Pick([]string{"chatgpt", "gemini"}, t0)
	require.True(t, ok)
	assert.Equal(t, plain.Id, got.Id, "a picked task is not returned again")
	_, ok = s.Pick([]string{"chatgpt", "gemini"}, t0)
	assert.False(t, ok)
	checkInvariants(t, s)
}

func TestPickRespectsExclude(t *testing.T) {
	s := New(Config{})
	critic := task("explorer", "critique", "c") // 45
	critic.LlmExclude = []string{"chatgpt", "claude"}
	low := task("explorer", "review_section", "low") // 40
	submit(t, s, critic, t0)
	submit(t, s, low, t0)

	got, ok := s.Pick([]string{"claude", "chatgpt"}, t0)
	require.True(t, ok)
	assert.Equal(t, low.Id, got.Id, "every free backend is excluded for the critic")
	s.Unpick(low.Id)
	got, ok = s.Pick([]string{"chatgpt", "gemini"}, t0)
	require.True(t, ok)
	assert.Equal(t, critic.Id, got.Id)
	_, ok = s.Pick(nil, t0)
	assert.False(t, ok, "no free backend")
	checkInvariants(t, s)
}

func TestPickRespectsNotBefore(t *testing.T) {
	s := New(Config{})
	tk := task("explorer", "synthesis", "retry")
	submit(t, s, tk, t0)
	apply(t, s, evStarted(tk.Id, "chatgpt", t0))
	apply(t, s, evRetry(tk.Id, "timeout", t0.Add(time.Minute), t0.Add(time.Second)))
	other := task("explorer", "exploration", "other")
	submit(t, s, other, t0.Add(2*time.Second))
	checkInvariants(t, s)

	got, ok := s.Pick([]string{"chatgpt"}, t0.Add(30*time.Second))
	require.True(t, ok)
	assert.Equal(t, other.Id, got.Id, "retry is not due")
	_, ok = s.Pick([]string{"chatgpt"}, t0.Add(59*time.Second))
	assert.False(t, ok)

	got, ok = s.Pick([]string{"chatgpt"}, t0.Add(time.Minute))
	require.True(t, ok, "due tasks join at pick time, not only on Recompute")
	assert.Equal(t, tk.Id, got.Id)
	assert.Equal(t, int32(1), got.Attempts)
	checkInvariants(t, s)

	// And on Recompute.
	s2 := New(Config{})
	submit(t, s2, tk, t0)
	apply(t, s2, evRetry(tk.Id, "x", t0.Add(time.Hour), t0))
	s2.Recompute(t0.Add(time.Hour), Env{})
	assert.Empty(t, s2.q.delayed.items)
	checkInvariants(t, s2)
	got, ok = s2.Pick([]string{"a"}, t0.Add(time.Hour))
	require.True(t, ok)
	assert.Equal(t, tk.Id, got.Id)
}

func TestPickedUntilStartedOrUnpicked(t *testing.T) {
	s := New(Config{})
	a := task("explorer", "synthesis", "a")
	b := task("explorer", "exploration", "b")
	submit(t, s, a, t0)
	submit(t, s, b, t0)
	got, _ := s.Pick([]string{"x"}, t0)
	require.Equal(t, a.Id, got.Id)
	assert.True(t, s.Picked(a.Id))
	got, _ = s.Pick([]string{"x"}, t0)
	require.Equal(t, b.Id, got.Id)

	s.Unpick(a.Id)
	s.Unpick(a.Id) // twice is harmless
	checkInvariants(t, s)
	got, _ = s.Pick([]string{"x"}, t0)
	require.Equal(t, a.Id, got.Id)

	apply(t, s, evStarted(a.Id, "x", t0))
	assert.False(t, s.Picked(a.Id))
	s.Unpick(a.Id) // a running task stays running
	tk, _ := s.Task(a.Id)
	assert.Equal(t, pb.TaskState_TASK_STATE_RUNNING, tk.State)

	apply(t, s, evRequeued(b.Id, t0)) // allocation failed via an event
	assert.False(t, s.Picked(b.Id))
	checkInvariants(t, s)
	got, ok := s.Pick([]string{"x"}, t0)
	require.True(t, ok)
	assert.Equal(t, b.Id, got.Id)
}

func TestPickTiesByCreatedAtThenID(t *testing.T) {
	s := New(Config{})
	submit(t, s, task("explorer", "exploration", "z"), t0)
	submit(t, s, task("explorer", "exploration", "b"), t0.Add(time.Second))
	submit(t, s, task("explorer", "exploration", "a"), t0.Add(time.Second))
	s.Recompute(t0.Add(time.Second), Env{})
	var order []string
	for {
		got, ok := s.Pick([]string{"x"}, t0.Add(time.Second))
		if !ok {
			break
		}
		order = append(order, got.Subject)
	}
	assert.Equal(t, []string{"z", "a", "b"}, order)
}

func TestShouldPreempt(t *testing.T) {
	s := New(Config{})
	run := task("explorer", "exploration", "run") // 50
	submit(t, s, run, t0)
	apply(t, s, evStarted(run.Id, "chatgpt", t0))

	w20 := task("explorer", "exploration", "w20")
	w20.BasePriority = 70
	submit(t, s, w20, t0)
	ok, id := s.ShouldPreempt(run.Id, "chatgpt")
	assert.False(t, ok, "20 higher is not enough")
	assert.Empty(t, id)

	other := task("explorer", "exploration", "other")
	other.BasePriority = 100
	other.LlmPreference = "gemini"
	submit(t, s, other, t0)
	ok, _ = s.ShouldPreempt(run.Id, "chatgpt")
	assert.False(t, ok, "a task preferring another backend does not preempt")

	excl := task("explorer", "exploration", "excl")
	excl.BasePriority = 99
	excl.LlmExclude = []string{"chatgpt"}
	submit(t, s, excl, t0)
	ok, _ = s.ShouldPreempt(run.Id, "chatgpt")
	assert.False(t, ok, "a task excluding the backend does not preempt")

	w21 := task("explorer", "exploration", "w21")
	w21.BasePriority = 71
	submit(t, s, w21, t0)
	ok, id = s.ShouldPreempt(run.Id, "chatgpt")
	assert.True(t, ok)
	assert.Equal(t, w21.Id, id)

	ok, id = s.ShouldPreempt(run.Id, "gemini")
	assert.True(t, ok)
	assert.Equal(t, other.Id, id)

	// A picked task is on its way to another backend: it does not count.
	s.Recompute(t0, Env{})
	got, _ := s.Pick([]string{"claude"}, t0)
	require.Equal(t, excl.Id, got.Id)
	got, _ = s.Pick([]string{"claude"}, t0)
	require.Equal(t, w21.Id, got.Id)
	ok, _ = s.ShouldPreempt(run.Id, "chatgpt")
	assert.False(t, ok)

	ok, _ = s.ShouldPreempt("explorer/exploration/nope", "chatgpt")
	assert.False(t, ok)
	ok, _ = s.ShouldPreempt(w20.Id, "chatgpt")
	assert.False(t, ok, "not running")
}

// A waiting task the freed backend could not run (its deep-mode budget is
// spent) does not preempt: the preempted task would be picked again at the
// next tick and preempted again, every tick (seen in `fano simulate`).
func TestShouldPreemptForOnlyWhatTheSlotCanRun(t *testing.T) {
	s := New(Config{})
	run := task("explorer", "exploration", "run") // 50
	submit(t, s, run, t0)
	apply(t, s, evStarted(run.Id, "gemini", t0))

	deep := task("explorer", "exploration", "deep")
	deep.BasePriority = 100
	deep.RequiresDeepMode = true
	submit(t, s, deep, t0)
	ok, _ := s.ShouldPreemptFor(run.Id, "gemini", true, false)
	assert.False(t, ok, "a deep task does not preempt for a backend without deep quota")
	ok, id := s.ShouldPreemptFor(run.Id, "gemini", true, true)
	assert.True(t, ok)
	assert.Equal(t, deep.Id, id)

	normal := task("explorer", "exploration", "normal")
	normal.BasePriority = 90
	submit(t, s, normal, t0)
	ok, _ = s.ShouldPreemptFor(run.Id, "gemini", false, false)
	assert.False(t, ok, "nothing preempts for a backend without quota")
	ok, id = s.ShouldPreemptFor(run.Id, "gemini", true, false)
	assert.True(t, ok)
	assert.Equal(t, normal.Id, id)
}

// refPick is the brute-force reference: scan every task, each with the
// spec's priority at now.
func refPick(s *State, free []string, now int64, picked map[string]bool) *pb.Task {
	var best *pb.Task
	var bestP int32
	for id, en := range s.tasks {
		t := en.t
		if t.State != pb.TaskState_TASK_STATE_PENDING || picked[id] || t.NotBefore > now {
			continue
		}
		fits := false
		if t.LlmPreference != "" {
			fits = slices.Contains(free, t.LlmPreference)
		} else {
			for _, b := range free {
				if !slices.Contains(t.LlmExclude, b) {
					fits = true
					break
				}
			}
		}
		if !fits {
			continue
		}
		if p := s.priorityAt(t, now); best == nil || ordered(p, bestP, t, best) {
			best, bestP = t, p
		}
	}
	return best
}

func TestPickMatchesBruteForce(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { pickProperty(t, seed) })
	}
}

func pickProperty(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 42))
	backends := []string{"chatgpt", "gemini", "claude", "grok"}
	modules := []string{"explorer", "documenter", "researcher"}
	types := []string{"exploration", "critique", "synthesis", "address_comment", "draft_section", "extract_content", "mystery"}
	s := New(Config{MaxPending: 100000})
	now := t0
	picked := map[string]bool{}
	var running, finished []string
	n, hits, misses, retried := 0, 0, 0, 0
	quotaOff := map[string]bool{}
	env := Env{
		HasQuota: func(b string, deep bool) bool { return !(quotaOff[b] && deep) },
		Backlog:  func(m string) int { return len(m) * int(seed%5) },
	}
	randFree := func() []string {
		free := []string{}
		for _, b := range backends {
			if rng.IntN(3) > 0 {
				free = append(free, b)
			}
		}
		rng.Shuffle(len(free), func(i, j int) { free[i], free[j] = free[j], free[i] })
		return free
	}
	removeAt := func(l []string, i int) []string { l[i] = l[len(l)-1]; return l[:len(l)-1] }

	for step := range 4000 {
		now = now.Add(time.Duration(rng.IntN(180)) * time.Second)
		switch r := rng.IntN(100); {
		case r < 35: // submit
			n++
			tk := task(modules[rng.IntN(len(modules))], types[rng.IntN(len(types))], fmt.Sprint(n))
			switch rng.IntN(10) {
			case 0, 1, 2:
				tk.LlmPreference = backends[rng.IntN(len(backends))]
				tk.RequiresDeepMode = rng.IntN(2) == 0
			case 3, 4:
				tk.LlmExclude = []string{backends[rng.IntN(4)], backends[rng.IntN(4)]}
			case 5:
				tk.LlmExclude = slices.Clone(backends[:3])
			}
			if rng.IntN(5) == 0 {
				tk.BasePriority = int32(rng.IntN(100) + 1)
			}
			submit(t, s, tk, now)
		case r < 65: // pick, compared with the reference
			free := randFree()
			got, ok := s.Pick(free, now)
			// The reference sees the priorities after the pick (due tasks
			// get theirs when they join) and the picks before it.
			want := refPick(s, free, now.UnixNano(), picked)
			if ok {
				require.NotNil(t, want, "step %d: picked %s, reference none", step, got.Id)
				require.Equal(t, want.Id, got.Id, "step %d free %v", step, free)
				picked[got.Id] = true
				hits++
				if got.Attempts > 0 {
					retried++
				}
			} else {
				misses++
				require.Nil(t, want, "step %d: reference picks %v", step, want)
			}
		case r < 75: // start or unpick a picked task
			for id := range picked {
				delete(picked, id)
				if rng.IntN(3) == 0 {
					s.Unpick(id)
				} else {
					apply(t, s, evStarted(id, backends[rng.IntN(4)], now))
					running = append(running, id)
				}
				break
			}
		case r < 87: // a running task ends one way or another
			if len(running) == 0 {
				continue
			}
			i := rng.IntN(len(running))
			id := running[i]
			running = removeAt(running, i)
			switch rng.IntN(5) {
			case 0:
				apply(t, s, evCompleted(id, now))
				finished = append(finished, id)
			case 1:
				apply(t, s, evFailed(id, "x", now))
				finished = append(finished, id)
			case 2:
				apply(t, s, evRetry(id, "later", now.Add(time.Duration(rng.IntN(900))*time.Second), now))
			case 3:
				apply(t, s, evPaused(id, "preempted", time.Time{}, now))
				for _, e := range s.DecideResume(now) {
					apply(t, s, e)
				}
			case 4:
				apply(t, s, evPaused(id, "rate_limited", now.Add(10*time.Minute), now))
			}
		case r < 90: // resume due tasks
			for _, e := range s.DecideResume(now) {
				apply(t, s, e)
			}
		case r < 93: // cancel a waiting task
			for id, en := range s.tasks {
				if en.t.State == pb.TaskState_TASK_STATE_PENDING || en.t.State == pb.TaskState_TASK_STATE_PAUSED {
					e, err := s.DecideCancel(id, "test", now)
					require.NoError(t, err)
					apply(t, s, e)
					delete(picked, id)
					finished = append(finished, id)
					break
				}
			}
		case r < 95: // forget
			if len(finished) > 0 {
				i := rng.IntN(len(finished))
				apply(t, s, evForgotten(finished[i], now))
				finished = removeAt(finished, i)
			}
		default: // tick
			quotaOff[backends[rng.IntN(4)]] = rng.IntN(2) == 0
			s.Recompute(now, env)
		}
		if step%50 == 0 {
			checkInvariants(t, s)
		}
	}
	checkInvariants(t, s)
	t.Logf("picks %d, none %d, retried tasks picked %d, tasks %d", hits, misses, retried, s.Len())
	require.Greater(t, hits, 500)
	require.Greater(t, misses, 10)
	require.Greater(t, retried, 10)
}

// A pick carries what a backend is chosen by, not the task's context and
// messages, and changing it changes nothing in the scheduler.
func TestPickIsARoutingCopy(t *testing.T) {
	s := New(Config{})
	tk := task("explorer", "exploration", "a")
	tk.Context = map[string]string{"question": "q"}
	tk.LlmExclude = []string{"claude"}
	tk.RequiresDeepMode = true
	submit(t, s, tk, t0)
	apply(t, s, evStarted(tk.Id, "gemini", t0))
	apply(t, s, evRetry(tk.Id, "again", t0, t0))

	got, ok := s.Pick([]string{"gemini"}, t0)
	require.True(t, ok)
	require.Equal(t, tk.Id, got.Id)
	assert.Equal(t, []string{"claude"}, got.LlmExclude)
	assert.True(t, got.RequiresDeepMode)
	assert.Equal(t, int32(1), got.Attempts)
	assert.Equal(t, "gemini", got.GetConversation().GetLlm(), "the conversation's backend is chosen first")
	assert.Nil(t, got.Context)

	got.LlmExclude[0] = "changed"
	got.Conversation.Llm = "changed"
	full, _ := s.Task(tk.Id)
	assert.Equal(t, []string{"claude"}, full.LlmExclude)
	assert.Equal(t, "gemini", full.GetConversation().GetLlm())
	assert.Equal(t, map[string]string{"question": "q"}, full.Context, "the scheduler's task keeps its context")
}

// PickIDFor picks as PickFor does, in the same order, and says which
// picks need deep mode: the refill that passes a slot on relies on both.
func TestPickIDForPicksAsPickFor(t *testing.T) {
	byCopy, byID := New(Config{}), New(Config{})
	for i, typ := range []string{"synthesis", "exploration", "critique", "review_section", "exploration"} {
		tk := task("explorer", typ, fmt.Sprintf("s%d", i))
		tk.RequiresDeepMode = i%2 == 0
		submit(t, byCopy, tk, t0)
		submit(t, byID, pb.CloneTask(tk), t0)
	}
	free, deepFree := []string{"api"}, []string{"api"}
	for {
		want, ok := byCopy.PickFor(free, deepFree, t0)
		id, deep, idOK := byID.PickIDFor(free, deepFree, t0)
		require.Equal(t, ok, idOK)
		if !ok {
			break
		}
		require.Equal(t, want.Id, id)
		require.Equal(t, want.RequiresDeepMode, deep, "task %s", id)
		require.True(t, byID.Picked(id))
	}
	checkInvariants(t, byID)
}
