package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/pb"
)

// Spec §13.1 test_priority_computation.
func TestPriorityComputation(t *testing.T) {
	s := New(Config{})
	tk := task("documenter", "address_comment", "c1")
	submit(t, s, tk, t0.Add(-2*time.Hour))
	s.Recompute(t0, Env{})
	p := prio(t, s, tk.Id)
	assert.GreaterOrEqual(t, p, int32(90))
	assert.Equal(t, int32(80+40+10), p) // base + comment urgency + 2 h starvation
}

// Spec §13.1 test_preemption_logic.
func TestPreemptionLogic(t *testing.T) {
	s := New(Config{})
	submit(t, s, task("explorer", "exploration", "low"), t0)
	submit(t, s, task("documenter", "address_comment", "high"), t0)
	s.Recompute(t0, Env{})
	next, ok := s.Pick([]string{"chatgpt"}, t0)
	require.True(t, ok)
	assert.Equal(t, "documenter/address_comment/high", next.Id)
}

func TestPriorityBase(t *testing.T) {
	s := New(Config{})
	for typ, want := range BasePriorities {
		if typ == CommentTaskType {
			continue
		}
		tk := task("explorer", typ, "x")
		submit(t, s, tk, t0)
		s.Recompute(t0, Env{})
		assert.Equal(t, int32(want), prio(t, s, tk.Id), typ)
	}
	unknown := task("explorer", "mystery", "x")
	submit(t, s, unknown, t0)
	own := task("explorer", "exploration", "own")
	own.BasePriority = 77
	submit(t, s, own, t0)
	s.Recompute(t0, Env{})
	assert.Equal(t, int32(DefaultBasePriority), prio(t, s, unknown.Id))
	assert.Equal(t, int32(77), prio(t, s, own.Id))

	custom := New(Config{BasePriorities: map[string]int{"exploration": 10}})
	submit(t, custom, task("explorer", "exploration", "x"), t0)
	got, _ := custom.Task("explorer/exploration/x")
	assert.Equal(t, int32(10), got.BasePriority, "submit fills base_priority")
	assert.Equal(t, int32(10), got.Priority)
}

func TestPriorityBacklog(t *testing.T) {
	for _, c := range []struct {
		backlog int
		bonus   int32
	}{{0, 0}, {10, 0}, {11, 15}, {20, 15}, {21, 30}, {500, 30}} {
		s := New(Config{})
		doc := task("documenter", "incorporate_insight", "i")
		exp := task("explorer", "exploration", "e")
		submit(t, s, doc, t0)
		submit(t, s, exp, t0)
		s.Recompute(t0, Env{Backlog: func(m string) int {
			if m == "documenter" {
				return c.backlog
			}
			return 0
		}})
		assert.Equal(t, 55+c.bonus, prio(t, s, doc.Id), "backlog %d", c.backlog)
		assert.Equal(t, int32(50), prio(t, s, exp.Id), "backlog %d", c.backlog)
	}
}

func TestPriorityStarvation(t *testing.T) {
	s := New(Config{})
	tk := task("explorer", "exploration", "e")
	submit(t, s, tk, t0)
	for _, c := range []struct {
		waited time.Duration
		boost  int32
	}{{0, 0}, {59 * time.Minute, 0}, {time.Hour, 5}, {3*time.Hour + 59*time.Minute, 15}, {5 * time.Hour, 25}, {100 * time.Hour, 25}} {
		s.Recompute(t0.Add(c.waited), Env{})
		assert.Equal(t, 50+c.boost, prio(t, s, tk.Id), "waited %s", c.waited)
	}
	capped := New(Config{BoostPerHour: 2, MaxBoost: 7})
	submit(t, capped, tk, t0)
	capped.Recompute(t0.Add(3*time.Hour), Env{})
	assert.Equal(t, int32(56), prio(t, capped, tk.Id))
	capped.Recompute(t0.Add(9*time.Hour), Env{})
	assert.Equal(t, int32(57), prio(t, capped, tk.Id))
}

func TestPriorityCommentUrgency(t *testing.T) {
	s := New(Config{})
	c := task("documenter", "address_comment", "c")
	o := task("documenter", "address_comment", "o")
	o.BasePriority = 50
	submit(t, s, c, t0)
	submit(t, s, o, t0)
	s.Recompute(t0, Env{})
	assert.Equal(t, int32(120), prio(t, s, c.Id))
	assert.Equal(t, int32(90), prio(t, s, o.Id))
}

func TestPriorityQuota(t *testing.T) {
	s := New(Config{})
	pref := task("explorer", "synthesis", "deep")
	pref.LlmPreference = "gemini"
	pref.RequiresDeepMode = true
	shallow := task("explorer", "synthesis", "shallow")
	shallow.LlmPreference = "gemini"
	anyb := task("explorer", "synthesis", "any")
	for _, tk := range []*pb.Task{pref, shallow, anyb} {
		submit(t, s, tk, t0)
	}
	var asked []quotaKey
	s.Recompute(t0, Env{HasQuota: func(b string, deep bool) bool {
		asked = append(asked, quotaKey{b, deep})
		return !deep // gemini has no deep quota left
	}})
	assert.Equal(t, int32(60-50), prio(t, s, pref.Id))
	assert.Equal(t, int32(60), prio(t, s, shallow.Id))
	assert.Equal(t, int32(60), prio(t, s, anyb.Id), "no preference, no penalty")
	assert.ElementsMatch(t, []quotaKey{{"gemini", true}, {"gemini", false}}, asked, "asked once per backend and mode")

	// A task submitted between ticks gets the penalty from the last tick's view.
	late := task("explorer", "synthesis", "late")
	late.LlmPreference = "gemini"
	late.RequiresDeepMode = true
	submit(t, s, late, t0.Add(time.Second))
	assert.Equal(t, int32(10), prio(t, s, late.Id))
	s.Recompute(t0.Add(2*time.Second), Env{})
	assert.Equal(t, int32(60), prio(t, s, late.Id), "nil HasQuota: always")
}

func TestPriorityModuleBalance(t *testing.T) {
	s := New(Config{})
	// Nine explorer starts and one documenter start in the last hour.
	for i := range 9 {
		tk := task("explorer", "exploration", string(rune('a'+i)))
		submit(t, s, tk, t0)
		apply(t, s, evStarted(tk.Id, "chatgpt", t0.Add(time.Duration(i)*time.Minute)))
	}
	d := task("documenter", "draft_section", "d")
	submit(t, s, d, t0)
	apply(t, s, evStarted(d.Id, "claude", t0.Add(10*time.Minute)))

	we := task("explorer", "exploration", "waiting")
	wd := task("documenter", "draft_section", "waiting")
	wr := task("researcher", "synthesize_findings", "waiting")
	for _, tk := range []*pb.Task{we, wd, wr} {
		submit(t, s, tk, t0.Add(15*time.Minute))
	}
	now := t0.Add(20 * time.Minute)
	s.Recompute(now, Env{})
	assert.Equal(t, int32(50), prio(t, s, we.Id), "explorer has 90%")
	assert.Equal(t, int32(50+15), prio(t, s, wd.Id), "documenter has 10%")
	assert.Equal(t, int32(50+15), prio(t, s, wr.Id), "researcher has 0%")

	// Once the window has passed there are no starts: no bonus for anyone.
	// (The starvation boost is taken out.)
	later := t0.Add(2 * time.Hour)
	s.Recompute(later, Env{})
	boost := int32(5) // 1 h 45 min waited
	assert.Equal(t, 50+boost, prio(t, s, wd.Id))
	assert.Equal(t, 50+boost, prio(t, s, wr.Id))

	// No starts at all: no bonus.
	fresh := New(Config{})
	submit(t, fresh, wr, t0)
	fresh.Recompute(t0, Env{})
	assert.Equal(t, int32(50), prio(t, fresh, wr.Id))
}

func TestModuleStartsPruned(t *testing.T) {
	s := New(Config{ShareWindow: time.Hour})
	a := task("explorer", "exploration", "a")
	b := task("documenter", "draft_section", "b")
	submit(t, s, a, t0)
	submit(t, s, b, t0)
	apply(t, s, evStarted(a.Id, "chatgpt", t0))
	apply(t, s, evStarted(b.Id, "claude", t0.Add(61*time.Minute)))
	snap := s.Snapshot()
	require.Len(t, snap.RecentStarts, 1)
	assert.Equal(t, "documenter", snap.RecentStarts[0].Module)
	assert.Equal(t, t0.Add(61*time.Minute).UnixNano(), snap.RecentStarts[0].At)
}
