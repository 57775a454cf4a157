package pipeline

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"fano/modules"
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
	want, err := h.m.snapshotJSON()
	require.NoError(t, err)
	got, err := old.snapshotJSON()
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
		a, derr := decodeAnswer(e.Data, nil)
		require.NoError(t, derr)
		a.Key = a.pair.key() // the old events named the pair by its key
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
			case itemDone:
				done++
			case itemFailed:
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
		assert.Equal(t, fin == total, m.AllFinished(), "AllFinished: the run ends on it")
		s := m.Summary()
		assert.Equal(t, done, s.ItemsDone)
		assert.Equal(t, failed, s.ItemsFailed)
	}
	check(h.m)
	h.runAll()
	check(h.m)
	fin, _ := h.m.Progress()
	require.Equal(t, 8, fin)
	assert.Empty(t, h.m.offered, "settled pairs (ok or failed) are not remembered as offered")
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

// The summary (status, panel) shows per step and model the invalid
// answers, tokens and cost beside the counts; the models' costs add up to
// the run's.
func TestSummaryPerStepAndModel(t *testing.T) {
	def, items := writeDef(t, capped, 2)
	h := newHarness(t, def, items)
	h.runAll()
	s := h.m.Summary()
	sum := 0.0
	for _, model := range []string{"m1", "m2"} {
		c := s.Steps["verdict"][model]
		assert.Positive(t, c.CostUSD, model)
		assert.Positive(t, c.Tokens, model)
		sum += c.CostUSD
	}
	assert.InDelta(t, s.CostUSD, sum, 1e-9)

	def, items = writeDef(t, strict, 3)
	h = newHarness(t, def, items)
	h.answer = func(task *pb.Task, prompt string) string {
		if field(task, "item") == "i01" {
			return `{"verdict": true, "confidence": 0.1}`
		}
		return `{"verdict": true, "confidence": 0.95}`
	}
	h.runAll()
	c := h.m.Summary().Steps["verdict"]["m1"]
	assert.Equal(t, Counts{OK: 2, Failed: 1, Invalid: 2, Tokens: c.Tokens}, c, "i01: two invalid answers, then failed")
}

const chain = `
name: chain
items: {source: items.jsonl, key: id}
models: [m1, m2]
steps:
  - name: extract
    llm: {prompt: 'Extract: {{.item.claim}}', schema: {type: object, required: [text], properties: {text: {type: string}}}}
  - name: judge
    needs: [extract]
    llm: {prompt: 'Judge: {{.steps.extract.m1.text}}', schema: {type: object, required: [verdict], properties: {verdict: {type: boolean}}}, attempts: 2}
`

// Propose looks again only at the items that changed and at new ones,
// yet after every call each ready pair inside the window (a walk from
// the first open item, as many open pairs as the window) has been
// offered: tasks run in random order, some answers invalid, some pairs
// deferred, never waiting for the periodic re-offer.
func TestProposeOffersEveryReadyPairInTheWindow(t *testing.T) {
	for _, yaml := range []string{chain, fanout} {
		def, items := writeDef(t, yaml, 30)
		h := newHarness(t, def, items)
		h.m = New(Config{Def: def, Items: items, Window: 7})
		rng := rand.New(rand.NewPCG(1, 2))
		h.answer = func(task *pb.Task, prompt string) string {
			if rng.IntN(4) == 0 {
				return `not json`
			}
			return SimAnswer(prompt, rng)
		}
		inWindow := func() {
			t.Helper()
			m := h.m
			var n int32
			for _, it := range m.items {
				if n >= int32(m.window) {
					break
				}
				if m.itemStatus(it) != itemOpen {
					continue
				}
				for _, s := range m.def.order {
					if s.LLM == nil || !m.ready(s, it) {
						continue
					}
					for _, model := range s.models {
						p := m.pairOf(s.Name, it.Key, model)
						if done(p) {
							continue
						}
						gen := 0
						if p != nil {
							gen = int(p.Gen)
						}
						require.True(t, m.offered[offerID{m.slotOf(s, m.posOf(it), model), int32(gen)}], "%s/%s/%s gen %d not offered", s.Name, it.Key, model, gen)
						n++
					}
				}
			}
		}
		pool := map[string]*pb.Task{}
		for step := 0; step < 2000; step++ {
			for _, tk := range h.m.Propose(h.now) {
				pool[tk.Id] = tk
			}
			inWindow()
			if len(pool) == 0 {
				break
			}
			ids := make([]string, 0, len(pool))
			for id := range pool {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			id := ids[rng.IntN(len(ids))]
			tk := pool[id]
			delete(pool, id)
			if rng.IntN(10) == 0 {
				// The cost cap or the budget held it back: deferred, a new
				// task id next time.
				h.m.deferred[tk.Id] = "test"
				h.apply(h.m.DecideCompletion(tk, h.now))
				continue
			}
			h.runTask(tk)
		}
		fin, total := h.m.Progress()
		assert.Equal(t, total, fin, "every item finished")
		assert.Empty(t, pool)
	}
}

// An item the full prepared buffer held back is offered by the next
// Propose after room frees up, not only at the periodic re-offer.
func TestHeldBackPreparationIsOfferedOnceThereIsRoom(t *testing.T) {
	def, items := writeDef(t, watermark, 10)
	h := newHarness(t, def, items)
	first := h.m.Propose(h.now)
	require.Len(t, first, 3, "three items prepared at most")
	for _, tk := range first {
		h.runTask(tk)
	}
	second := h.m.Propose(h.now)
	require.Len(t, second, 3)
	for _, tk := range second {
		require.Equal(t, "analyze", field(tk, "step"), "no room for more preparation")
	}
	h.runTask(second[0])
	third := h.m.Propose(h.now)
	require.Len(t, third, 1)
	assert.Equal(t, "prep", field(third[0], "step"))
	assert.Equal(t, "i03", field(third[0], "item"))
}

// The simulator answers each prompt in the shape of that prompt's own
// schema, also when several schemas alternate (it keeps them parsed).
func TestSimAnswerFollowsEachPromptsSchema(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	a := "q\n\n" + SchemaMarker + `{"type":"object","required":["verdict"],"properties":{"verdict":{"type":"boolean"}}}`
	b := "q\n\n" + SchemaMarker + `{"type":"object","required":["n"],"properties":{"n":{"type":"integer","minimum":5,"maximum":5}}}`
	for range 3 {
		var va map[string]any
		require.NoError(t, json.Unmarshal([]byte(SimAnswer(a, r)), &va))
		assert.IsType(t, true, va["verdict"])
		assert.Len(t, va, 1)
		assert.JSONEq(t, `{"n": 5}`, SimAnswer(b, r))
	}
	assert.Equal(t, "{}", SimAnswer("q\n\n"+SchemaMarker+"{not json", r))
}

// An answer's JSON is read from its fenced block when it has one (prose
// with braces around it), else from its first { to its last }.
func TestAnswerJSONFromFenceOrBraces(t *testing.T) {
	def, items := writeDef(t, daily, 1)
	s := def.Step("verdict")
	for _, answer := range []string{
		"Sure {as asked}:\n```json\n{\"verdict\": true}\n```\nanything {else}",
		"The answer is {\"verdict\": false} as requested.",
	} {
		_, stage, err := def.ValidateAnswer(s, items[0], nil, answer)
		assert.NoError(t, err, "%s: %q", stage, answer)
	}
	// Two objects: the first is the answer, the rest is left.
	out, stage, err := def.ValidateAnswer(s, items[0], nil, `{"verdict": true} or, if you prefer, {"verdict": false}`)
	require.NoError(t, err, stage)
	assert.Equal(t, map[string]any{"verdict": true}, out)
}

// Later steps read an earlier step's output decoded once; an output that
// changes (repaired, asked again) is read anew, also while its item is
// still open.
func TestLaterStepsReadAChangedOutputAnew(t *testing.T) {
	def, items := writeDef(t, chain, 1)
	h := newHarness(t, def, items)
	text := "first"
	h.answer = func(task *pb.Task, prompt string) string {
		return `{"text": "` + text + `"}`
	}
	runExtractM1 := func() {
		for _, tk := range h.m.Propose(h.now) {
			if field(tk, "step") == "extract" && field(tk, "model") == "m1" {
				h.runTask(tk)
			}
		}
	}
	read := func() any {
		v, err := h.m.valueOf(h.m.pairOf("extract", "i00", "m1"))
		require.NoError(t, err)
		return v.(map[string]any)["text"]
	}
	runExtractM1()
	require.Equal(t, "first", read())
	require.Equal(t, "first", read(), "read again: the same")
	h.apply(h.m.DecideRepair(modules.Problem{Kind: "invalid_output", ID: "extract/i00/m1", Detail: "test"}, h.now))
	h.apply(h.m.DecideRetryFailed("extract"))
	text = "second"
	for range reofferEvery {
		runExtractM1()
	}
	fin, _ := h.m.Progress()
	require.Zero(t, fin, "the item is still open (extract on m2 not asked)")
	assert.Equal(t, "second", read())
}

// An item of a JSONL file holds its line, not decoded values, except
// while it is open: a finished item's values are dropped, and an item
// opened again (retry) renders the same prompt from its line.
func TestItemValuesAreDecodedOnlyWhileOpen(t *testing.T) {
	def, items := writeDef(t, strict, 6)
	for _, it := range items {
		require.Nil(t, it.Fields(), "read: not decoded yet")
		require.Nil(t, it.vals.open, "read: its prompts' fields not worked out yet")
	}
	h := newHarness(t, def, items)
	prompts := map[string][]string{}
	h.answer = func(task *pb.Task, prompt string) string {
		item := field(task, "item")
		prompts[item] = append(prompts[item], prompt)
		if item == "i02" && len(prompts[item]) <= 2 {
			return `{"verdict": true, "confidence": 0.1}` // both attempts fail the rule
		}
		return `{"verdict": true, "confidence": 0.95}`
	}
	h.runAll()
	require.Equal(t, 6, h.m.Summary().ItemsDone+h.m.Summary().ItemsFailed)
	for _, it := range items {
		assert.Nil(t, it.Fields(), "item %s is finished: its values are dropped", it.Key)
		assert.Nil(t, it.vals.open, "item %s is finished: its prompts' fields are dropped", it.Key)
	}
	assert.Contains(t, prompts["i00"][0], "Is it true? claim 0")
	h.apply(h.m.DecideRetryFailed(""))
	h.runAll()
	require.Len(t, prompts["i02"], 3)
	assert.Equal(t, prompts["i02"][0], prompts["i02"][2], "the retried item's prompt, from its line again")
	assert.Equal(t, 6, h.m.Summary().ItemsDone)
}

// A snapshot is what json.Marshal of the state writes (its own writer,
// the same bytes), with failed pairs' raw answers, stages, attempts,
// generations, costs and the requests per day; and it restores.
func TestSnapshotIsTheStateAsJSON(t *testing.T) {
	def, items, h := mixedAnswers(t)
	same := func() string {
		t.Helper()
		st := h.m.st
		st.Pairs = map[string]*pairRecord{}
		h.m.eachPair(func(id pairID, p *pair) { st.Pairs[id.key()] = p.record() })
		want, err := json.Marshal(st)
		require.NoError(t, err)
		got, err := h.m.snapshotJSON()
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got))
		return string(got)
	}
	h.runAll()
	got := same()
	assert.Contains(t, got, `"a":2`, "a failed pair's attempts")
	assert.Contains(t, got, `"st":"rules"`, "the stage that failed")
	h.apply(h.m.DecideRetryFailed(""))
	h.m.pairOf("verdict", "i07", "m1").Cost = 1.5e-9
	h.m.st.Requests["2026-11-22"] = 3
	got = same()
	assert.Contains(t, got, `"g":1`, "a retried pair's generation")
	m := New(Config{Def: def, Items: items})
	require.NoError(t, m.Restore([]byte(got)))
	assert.Equal(t, h.m.Summary(), m.Summary())
}

// A snapshot lists the pairs in their keys' order whether it walks the
// definition's grid (most pairs begun) or sorts them (few begun, or
// pairs the definition no longer has): items whose keys sort otherwise
// than their lines, keys that are each other's prefixes, models listed
// out of order.
func TestSnapshotPairOrderIsTheKeysOrder(t *testing.T) {
	dir := t.TempDir()
	keys := []string{"b", "a/x", "a", "a b", "ä", "10", "9", "a!"}
	var lines strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&lines, "{\"id\": %q, \"claim\": \"c\"}\n", k)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "items.jsonl"), []byte(lines.String()), 0o644))
	path := filepath.Join(dir, "p.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`
name: order
items: {source: items.jsonl, key: id}
models: [m2, m1]
steps:
  - name: judge
    needs: [extract]
    llm: {prompt: 'Judge {{.item.claim}}', schema: {type: object, required: [v], properties: {v: {type: boolean}}}}
  - name: extract
    llm: {prompt: 'Extract {{.item.claim}}', schema: {type: object, required: [t], properties: {t: {type: string}}}}
`), 0o644))
	def, err := Load(path)
	require.NoError(t, err)
	items, err := def.LoadItems()
	require.NoError(t, err)
	h := newHarness(t, def, items)
	byKey := func() []pairID {
		var ks []string
		h.m.eachPair(func(id pairID, _ *pair) { ks = append(ks, id.key()) })
		slices.Sort(ks)
		ids := make([]pairID, len(ks))
		for i, k := range ks {
			ids[i] = pairIDOf(k)
		}
		return ids
	}

	// Few pairs begun: sorted.
	tasks := h.m.Propose(h.now)
	require.NotEmpty(t, tasks)
	h.runTask(tasks[0])
	assert.False(t, h.m.walksGrid(), "one pair of 32: sorting is cheaper")
	assert.Equal(t, byKey(), h.m.sortedPairIDs())

	// Every pair: the grid's walk.
	h.runAll()
	require.Equal(t, 2*2*len(keys), h.m.npairs)
	assert.True(t, h.m.walksGrid())
	assert.Equal(t, byKey(), h.m.sortedPairIDs())

	// A pair of a model the definition no longer has: sorted, not lost.
	p := h.m.ensure(pairID{"extract", "a", "m0"})
	p.status, p.Output = statusOK, outText(`{"t":"x"}`)
	assert.False(t, h.m.walksGrid())
	assert.Equal(t, byKey(), h.m.sortedPairIDs())
}

// A module over items in another order than LoadItems gave them (a part
// of them, reversed) finds each item's pairs by the item, not by the
// place it had in the list it was read in.
func TestItemsInAnotherOrderKeepTheirOwnPairs(t *testing.T) {
	def, items := writeDef(t, chained, 12)
	part := slices.Clone(items[3:])
	slices.Reverse(part)
	h := newHarness(t, def, part)
	h.runAll()
	sum := h.m.Summary()
	require.Equal(t, len(part), sum.ItemsDone)
	for _, it := range part {
		for _, s := range def.Order() {
			for _, model := range s.ModelsOf() {
				p := h.m.pairFor(s, it, model)
				require.NotNil(t, p, "%s/%s/%s", s.Name, it.Key, model)
				assert.Same(t, h.m.pairOf(s.Name, it.Key, model), p)
				v, err := h.m.valueOf(p)
				require.NoError(t, err)
				assert.NotNil(t, v)
			}
		}
	}
	data, err := h.m.resultsJSONL()
	require.NoError(t, err)
	for _, it := range part {
		assert.Equal(t, 1, strings.Count(string(data), `"key":"`+it.Key+`"`), it.Key)
	}
}

// Pairs with the same short output hold one copy of it, read back from
// a snapshot too; a long one is each pair's own.
func TestShortOutputsAreShared(t *testing.T) {
	def, items := writeDef(t, exportBenchDef, 6)
	h := newHarness(t, def, items)
	h.answer = func(*pb.Task, string) string { return `{"verdict": true}` }
	h.runAll()
	s := def.Step("verdict")
	first := h.m.pairFor(s, items[0], "api").Output
	require.Equal(t, `{"verdict":true}`, string(first))
	for _, it := range items[1:] {
		assert.Same(t, unsafe.StringData(string(first)), unsafe.StringData(string(h.m.pairFor(s, it, "api").Output)), it.Key)
	}
	snap, err := h.m.Snapshot()
	require.NoError(t, err)
	m := New(Config{Def: def, Items: items})
	require.NoError(t, m.Restore(snap))
	again := m.pairFor(s, items[0], "api").Output
	assert.Same(t, unsafe.StringData(string(again)), unsafe.StringData(string(m.pairFor(s, items[5], "api").Output)))

	long := json.RawMessage(`{"verdict":true,"why":"` + strings.Repeat("x", sharedOutputLen) + `"}`)
	var set outputSet
	a, b := set.intern(slices.Clone(long)), set.intern(slices.Clone(long))
	assert.Equal(t, string(long), string(a))
	assert.NotSame(t, unsafe.StringData(string(a)), unsafe.StringData(string(b)), "a long output is its pair's own")
}

// The key index finds every item by its key, as text or bytes, a
// repeated key at its last place (as a map would keep it), and no item
// for a key none has.
func TestKeyIndexFindsItemsByKey(t *testing.T) {
	var items []*Item
	for i := range 5000 {
		items = append(items, &Item{Key: fmt.Sprintf("k%d", i)})
	}
	items = append(items, &Item{Key: "k7"}, &Item{Key: ""})
	x := newKeyIndex(items)
	for i, it := range items[:5000] {
		want := i
		if it.Key == "k7" {
			want = 5000
		}
		got, ok := x.find(items, it.Key)
		require.True(t, ok, it.Key)
		require.Equal(t, want, got, it.Key)
		got, ok = x.findBytes(items, []byte(it.Key))
		require.True(t, ok, it.Key)
		require.Equal(t, want, got, it.Key)
	}
	got, ok := x.find(items, "")
	assert.True(t, ok)
	assert.Equal(t, 5001, got)
	_, ok = x.find(items, "k5000")
	assert.False(t, ok)
	_, ok = x.findBytes(items, []byte("nope"))
	assert.False(t, ok)
	var empty keyIndex
	_, ok = empty.find(nil, "k1")
	assert.False(t, ok)
}

// mixedAnswers is a harness over 8 items whose first four get answers
// that fail (text that needs escaping, NUL bytes, no JSON) in turn with
// ones that pass; the others pass.
func mixedAnswers(t *testing.T) (*Definition, []*Item, *harness) {
	t.Helper()
	def, items := writeDef(t, strict, 8)
	h := newHarness(t, def, items)
	answers := []string{
		"{\"verdict\": true, \"confidence\": 0.5, \"why\": \"a<b & \\\"q\\\" \\t\\u0001 ü\"}",
		"not json at all \x00 \u2028",
		`{"verdict": true, "confidence": 0.95}`,
	}
	n := 0
	h.answer = func(task *pb.Task, _ string) string {
		n++
		if field(task, "item") < "i04" {
			return answers[n%2]
		}
		return answers[2]
	}
	return def, items, h
}
