package pipeline

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"fano/pb"
)

// A run whose daily request budget is spent waits for the next day's
// budget (on the clock it is given) and goes on; it ends only when every
// item is done. With NoWait it ends at the wait instead, saying so.
func TestRunWaitsForTheNextDaysBudgetAndGoesOn(t *testing.T) {
	def, items := writeDef(t, daily, 20) // 7 requests a day
	clk := clockwork.NewFakeClockAt(time.Date(2026, 11, 23, 22, 30, 0, 0, time.UTC))
	h := newHarness(t, def, items)
	watch := RunWatch{}
	days := 0
	for {
		h.now = clk.Now()
		h.runAll()
		_, until, waiting := h.m.Waiting()
		var v RunVerdict
		for range idleTicksToEnd {
			v = watch.Observe(true, waiting)
		}
		if v == RunFinished {
			break
		}
		require.Equal(t, RunWaiting, v)
		y, mo, d := clk.Now().Date()
		require.Equal(t, time.Date(y, mo, d+1, 0, 0, 0, 0, time.UTC), until, "the next UTC midnight")
		s := h.m.Summary()
		assert.Equal(t, until.Format(time.RFC3339), s.WaitingUntil)
		assert.Contains(t, s.Waiting, "daily_requests 7 reached for "+clk.Now().Format("2006-01-02"))
		assert.Empty(t, s.Stopped, "a spent day is a wait, not a stop")
		// Nothing is proposed before the next day starts.
		clk.Advance(until.Sub(clk.Now()) - time.Second)
		assert.Empty(t, h.m.Propose(clk.Now()))
		clk.Advance(time.Second)
		days++
		require.Less(t, days, 10)
	}
	assert.Equal(t, 2, days, "20 requests at 7 a day: two waits, done on the third day")
	assert.Equal(t, 20, h.m.Summary().ItemsDone)
	assert.Equal(t, 20, h.requests)
	_, _, waiting := h.m.Waiting()
	assert.False(t, waiting, "nothing left: no wait even with the day's budget spent")

	// --no-wait: the same spent day ends the run.
	h2 := newHarness(t, def, items)
	h2.runAll()
	_, _, waiting = h2.m.Waiting()
	noWait := RunWatch{NoWait: true}
	var v RunVerdict
	for range idleTicksToEnd {
		v = noWait.Observe(true, waiting)
	}
	assert.Equal(t, RunBudgetExit, v)
	assert.Equal(t, RunGoing, noWait.Observe(false, waiting), "busy: not over")
}

// New facts are pb messages; a WAL written before those existed holds
// JSON, and replaying it gives the same state.
func TestEventsArePBAndOldJSONEventsStillApply(t *testing.T) {
	def, items := writeDef(t, strict, 4)
	h := newHarness(t, def, items)
	h.answer = func(task *pb.Task, prompt string) string {
		if field(task, "item") == "i01" {
			return `{"verdict": true, "confidence": 0.1}`
		}
		return `{"verdict": true, "confidence": 0.95}`
	}
	h.runAll()
	evs, err := h.m.DecideRetryFailed("")
	require.NoError(t, err)
	h.apply(evs, nil)
	types := map[string]bool{}
	for _, e := range h.log {
		types[e.Type] = true
		require.NotEmpty(t, e.Data, e.Type)
		assert.NotEqual(t, byte('{'), e.Data[0], "%s is written as pb", e.Type)
	}
	assert.Subset(t, keys(types), []string{"answer_ok", "answer_invalid", "pair_failed", "retry_failed"})
	var pe pb.PipelinePairEvent
	require.NoError(t, proto.Unmarshal(h.log[0].Data, &pe))
	assert.Equal(t, "verdict", pe.Step)
	assert.Equal(t, "m1", pe.Model)

	// The same facts the old way (JSON, as runs before pb/pipeline.proto
	// wrote them), replayed into a fresh module.
	old := New(Config{Def: def, Items: items})
	for _, e := range h.log {
		require.NoError(t, old.Apply(asOldJSON(t, e), h.now))
	}
	want, err := h.m.Snapshot()
	require.NoError(t, err)
	got, err := old.Snapshot()
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(got))
	assert.Equal(t, h.m.Summary(), old.Summary())
}

// asOldJSON re-encodes a pipeline event the way the module wrote it
// before its events were pb messages.
func asOldJSON(t *testing.T, e *pb.ModuleEvent) *pb.ModuleEvent {
	t.Helper()
	var data []byte
	var err error
	switch e.Type {
	case "retry_failed":
		ks, derr := decodeRetry(e.Data)
		require.NoError(t, derr)
		data, err = json.Marshal(keysEvent{Keys: ks})
	case "run_finished":
		return e
	default:
		a, derr := decodeAnswer(e.Data)
		require.NoError(t, derr)
		data, err = json.Marshal(a)
	}
	require.NoError(t, err)
	require.Equal(t, byte('{'), data[0])
	return &pb.ModuleEvent{Type: e.Type, TaskId: e.TaskId, Data: data}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// The spend is the pairs' cost summed, not a copy kept beside them: a
// snapshot of an older run (with its "spent") restores to the pairs' sum.
func TestSpentIsThePairsCost(t *testing.T) {
	def, items := writeDef(t, capped, 3)
	h := newHarness(t, def, items)
	h.runAll()
	live := h.m.Summary().CostUSD
	require.Positive(t, live)
	snap, err := h.m.Snapshot()
	require.NoError(t, err)
	assert.NotContains(t, string(snap), `"spent"`)
	oldSnap := strings.Replace(string(snap), `{"pairs"`, `{"spent":99,"pairs"`, 1)
	m := New(Config{Def: def, Items: items})
	require.NoError(t, m.Restore([]byte(oldSnap)))
	assert.Equal(t, live, m.Summary().CostUSD)
}

// The prepared buffer is counted as pairs and offers change, and the
// count always equals a walk over every item.
func TestPreparedCountFollowsChanges(t *testing.T) {
	def, items := writeDef(t, watermark, 10)
	h := newHarness(t, def, items)
	walk := func(m *Module) int {
		n := 0
		for _, it := range m.items {
			if m.cheapStarted(it) && m.expensiveOpen(it) {
				n++
			}
		}
		return n
	}
	for range 4 {
		for _, tk := range h.m.Propose(h.now) {
			require.Equal(t, walk(h.m), h.m.prepared())
			if tk.LlmPreference == "c1" {
				h.runTask(tk)
			} else {
				h.runTask(tk)
				require.Equal(t, walk(h.m), h.m.prepared())
			}
		}
	}
	snap, err := h.m.Snapshot()
	require.NoError(t, err)
	m := New(Config{Def: def, Items: items})
	require.NoError(t, m.Restore(snap))
	assert.Equal(t, walk(m), m.prepared())
}

const clipped = `
name: clipped
items: {source: items.jsonl, key: id}
models: [m1]
steps:
  - name: verdict
    llm: {prompt: 'Claim {{inc 1}}: {{clip 5 .item.claim}}', schema: {type: object, required: [verdict], properties: {verdict: {type: boolean}}}}
`

// Prompts have the template functions every fano prompt has
// (modules/prompts), and end with the step's schema.
func TestPromptsShareTheTemplateFunctions(t *testing.T) {
	def, items := writeDef(t, clipped, 1)
	m := New(Config{Def: def, Items: items})
	tk := m.Propose(time.Now())[0]
	act, err := m.NextAction(tk)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(act.Prompt, "Claim 2: claim …\n\n"+SchemaMarker), act.Prompt)
	assert.True(t, strings.HasSuffix(act.Prompt, `"type":"object"}`), act.Prompt)
}

// Items' status is counted as their pairs change (progress is not a walk
// over every item); the count always equals that walk, through failures,
// a retry and a restore.
func TestFinishedCountFollowsChanges(t *testing.T) {
	def, items := writeDef(t, strict, 8)
	h := newHarness(t, def, items)
	h.answer = func(task *pb.Task, prompt string) string {
		if field(task, "item") == "i03" || field(task, "item") == "i05" {
			return `{"verdict": true, "confidence": 0.1}`
		}
		return `{"verdict": true, "confidence": 0.95}`
	}
	walk := func(m *Module) (done, failed int) {
		for _, it := range m.items {
			switch m.itemStatus(it) {
			case "done":
				done++
			case "failed":
				failed++
			}
		}
		return done, failed
	}
	check := func(m *Module) {
		t.Helper()
		done, failed := walk(m)
		fin, total := m.Progress()
		assert.Equal(t, done+failed, fin)
		assert.Equal(t, 8, total)
		s := m.Summary()
		assert.Equal(t, done, s.ItemsDone)
		assert.Equal(t, failed, s.ItemsFailed)
	}
	check(h.m)
	h.runAll()
	check(h.m)
	fin, _ := h.m.Progress()
	require.Equal(t, 8, fin)
	evs, err := h.m.DecideRetryFailed("")
	require.NoError(t, err)
	h.apply(evs, nil)
	check(h.m)
	fin, _ = h.m.Progress()
	assert.Equal(t, 6, fin, "the two retried items are open again")
	snap, err := h.m.Snapshot()
	require.NoError(t, err)
	m := New(Config{Def: def, Items: items})
	require.NoError(t, m.Restore(snap))
	check(m)
}
