package scheduler

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startRecent records starts for the module balance: n tasks of module
// started (and completed) within the share window before at.
func startRecent(t *testing.T, s *State, module string, n int, at time.Time) {
	t.Helper()
	for i := range n {
		tk := task(module, "exploration", fmt.Sprintf("done-%s-%d", module, i))
		submit(t, s, tk, at.Add(-30*time.Minute))
		apply(t, s, evStarted(tk.Id, "chatgpt", at.Add(-20*time.Minute)))
		apply(t, s, evCompleted(tk.Id, at.Add(-10*time.Minute)))
	}
}

// pickOrder picks with one backend free until nothing is left.
func pickOrder(s *State, at time.Time) []string {
	var ids []string
	for {
		tk, ok := s.Pick([]string{"chatgpt"}, at)
		if !ok {
			return ids
		}
		ids = append(ids, tk.Module)
	}
}

// Module weights change the pick order: with the explorer at 25% of the
// recent starts, equal weights (the spec's plain 20%) leave it alone and
// the older documenter task goes first; weighting the explorer 3:1 makes
// 25% underserved, and its task goes first.
func TestModuleWeightsChangePickOrder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		weights map[string]int
		first   string
	}{
		{"no weights", nil, "documenter"},
		{"equal weights", map[string]int{"explorer": 30, "documenter": 30}, "documenter"},
		{"explorer weighted", map[string]int{"explorer": 60, "documenter": 20}, "explorer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Config{ModuleWeights: tc.weights})
			startRecent(t, s, "explorer", 1, t0)
			startRecent(t, s, "documenter", 3, t0)
			submit(t, s, task("documenter", "draft_section", "doc"), t0.Add(-time.Minute)) // 50
			submit(t, s, task("explorer", "exploration", "exp"), t0)                       // 50
			s.Recompute(t0, Env{})
			order := pickOrder(s, t0)
			require.Len(t, order, 2)
			assert.Equal(t, tc.first, order[0])
			checkInvariants(t, s)
		})
	}
}

// A weight of 0 means the module is never underserved; a module without
// a weight keeps the spec's 20%.
func TestBalanceShares(t *testing.T) {
	assert.Nil(t, balanceShares(nil))
	assert.Nil(t, balanceShares(map[string]int{"explorer": 0}))
	got := balanceShares(map[string]int{"explorer": 40, "documenter": 40, "researcher": 20})
	assert.InDelta(t, 0.24, got["explorer"], 1e-9)
	assert.InDelta(t, 0.24, got["documenter"], 1e-9)
	assert.InDelta(t, 0.12, got["researcher"], 1e-9)
	s := New(Config{ModuleWeights: map[string]int{"explorer": 1, "documenter": 0}})
	assert.InDelta(t, 0.4, s.balanceShare("explorer"), 1e-9)
	assert.Zero(t, s.balanceShare("documenter"))
	assert.Equal(t, BalanceShare, s.balanceShare("pipeline"))
}

// max_wait_hours is a hard bound: a task that has waited that long runs
// before every task that has not, whatever their priorities (a comment at
// 120 + the boost loses to an old review at 40); among overdue tasks the
// priority orders again. Without the bound the comment goes first.
func TestMaxWaitIsAHardBound(t *testing.T) {
	for _, bound := range []time.Duration{0, 4 * time.Hour} {
		t.Run(fmt.Sprint(bound), func(t *testing.T) {
			s := New(Config{MaxWait: bound})
			old := task("documenter", "review_section", "old") // 40
			older := task("documenter", "review_section", "older")
			older.BasePriority = 30
			submit(t, s, older, t0.Add(-5*time.Hour))
			submit(t, s, old, t0.Add(-4*time.Hour-time.Minute))
			submit(t, s, task("documenter", "address_comment", "urgent"), t0.Add(-3*time.Hour)) // 80 + 40
			submit(t, s, task("explorer", "synthesis", "fresh"), t0)                            // 60
			var subjects []string
			for {
				tk, ok := s.Pick([]string{"chatgpt"}, t0)
				if !ok {
					break
				}
				subjects = append(subjects, tk.Subject)
				if bound > 0 && (tk.Subject == "old" || tk.Subject == "older") {
					assert.Greater(t, tk.Priority, int32(OverdueBoost), "an overdue task says so in its priority")
					shown, overdue := ShownPriority(tk.Priority)
					assert.True(t, overdue)
					assert.Equal(t, map[string]int32{"old": 40 + 4*5, "older": 30 + 5*5}[tk.Subject], shown, "shown: the spec's figure, without the ordering boost")
				} else {
					_, overdue := ShownPriority(tk.Priority)
					assert.False(t, overdue, tk.Subject)
				}
			}
			if bound == 0 {
				assert.Equal(t, []string{"urgent", "old", "fresh", "older"}, subjects) // old: 40 + 20 ties fresh and is older
			} else {
				assert.Equal(t, []string{"old", "older", "urgent", "fresh"}, subjects)
			}
			checkInvariants(t, s)
		})
	}
}

// The bound is crossed between ticks without a re-sort: the task is
// re-keyed once, at the moment it has waited MaxWait.
func TestMaxWaitCrossedBetweenTicks(t *testing.T) {
	s := New(Config{MaxWait: time.Hour, BoostPerHour: 1, MaxBoost: 1})
	submit(t, s, task("documenter", "review_section", "low"), t0)            // 40
	submit(t, s, task("explorer", "synthesis", "high"), t0.Add(time.Minute)) // 60
	first := func(at time.Time) string {
		tk, ok := s.Pick([]string{"chatgpt"}, at)
		require.True(t, ok)
		s.Unpick(tk.Id)
		return tk.Subject
	}
	assert.Equal(t, "high", first(t0.Add(59*time.Minute)))
	before := s.rekeys
	assert.Equal(t, "low", first(t0.Add(time.Hour)))
	assert.Equal(t, uint64(1), s.rekeys-before, "one step: the bound (and the hour's boost) at once")
	assert.Equal(t, "low", first(t0.Add(time.Hour+30*time.Second)), "high is not overdue yet")
	assert.Equal(t, "high", first(t0.Add(time.Hour+time.Minute)), "both overdue: the priority orders again")
}
