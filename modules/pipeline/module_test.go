package pipeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/modules"
	"fano/pb"
)

// writeDef writes a definition and n items into a temp dir and loads it.
func writeDef(t *testing.T, yaml string, n int) (*Definition, []*Item) {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"id": "i%02d", "claim": "claim %d"}`+"\n", i, i)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "items.jsonl"), []byte(b.String()), 0o644))
	path := filepath.Join(dir, "p.yaml")
	require.NoError(t, os.WriteFile(path, []byte(yaml), 0o644))
	def, err := Load(path)
	require.NoError(t, err)
	items, err := def.LoadItems()
	require.NoError(t, err)
	return def, items
}

// harness runs the module the way its host does: decide, then apply.
type harness struct {
	t   *testing.T
	m   *Module
	now time.Time
	log []*pb.ModuleEvent // every applied event, for replay
	// answer returns the LLM's answer to a prompt.
	answer   func(task *pb.Task, prompt string) string
	requests int
}

func newHarness(t *testing.T, def *Definition, items []*Item) *harness {
	return &harness{t: t, m: New(Config{Def: def, Items: items}), now: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC),
		answer: func(task *pb.Task, prompt string) string {
			r := rand.New(rand.NewPCG(uint64(len(task.Id)), uint64(len(prompt))))
			return SimAnswer(prompt, r)
		}}
}

func (h *harness) apply(evs []*pb.ModuleEvent, err error) {
	h.t.Helper()
	require.NoError(h.t, err)
	for _, e := range evs {
		require.NoError(h.t, h.m.Apply(e, h.now))
		h.log = append(h.log, e)
	}
}

// runTask runs one task to its end as the executor does.
func (h *harness) runTask(task *pb.Task) {
	h.t.Helper()
	for turn := 0; ; turn++ {
		act, err := h.m.NextAction(task)
		require.NoError(h.t, err)
		if act.Kind == modules.ActionDone || turn >= int(task.MaxRequests) {
			h.apply(h.m.DecideCompletion(task, h.now))
			return
		}
		h.requests++
		h.apply(h.m.DecideResponse(task, h.answer(task, act.Prompt), h.now))
	}
}

// runAll proposes and runs tasks one at a time until none is proposed;
// it returns the task ids in the order they ran.
func (h *harness) runAll() []string {
	var ran []string
	seen := map[string]bool{}
	empty := 0
	for {
		tasks := h.m.Propose(h.now)
		var fresh []*pb.Task
		for _, tk := range tasks {
			if !seen[tk.Id] {
				fresh = append(fresh, tk)
			}
		}
		if len(fresh) == 0 {
			// Offered tasks the caller did not run come back with the
			// periodic re-offer.
			if empty++; empty > reofferEvery {
				return ran
			}
			continue
		}
		empty = 0
		for _, tk := range fresh {
			seen[tk.Id] = true
			ran = append(ran, tk.Subject)
			h.runTask(tk)
		}
	}
}

const fanout = `
name: verdicts
items: {source: items.jsonl, key: id}
steps:
  - name: verdict
    llm:
      models: [m1, m2, m3]
      prompt: 'Is it true? {{.item.claim}}'
      schema: {type: object, required: [verdict], properties: {verdict: {type: boolean}, confidence: {type: number, minimum: 0, maximum: 1}}}
`

// Propose offers every model of an item before the next item (seeds/003:
// a partial run covers all models evenly).
func TestProposeInterleavesItemsAndModels(t *testing.T) {
	def, items := writeDef(t, fanout, 3)
	m := New(Config{Def: def, Items: items})
	var got []string
	for _, tk := range m.Propose(time.Now()) {
		got = append(got, field(tk, "item")+"@"+tk.LlmPreference)
	}
	assert.Equal(t, []string{"i00@m1", "i00@m2", "i00@m3", "i01@m1", "i01@m2", "i01@m3", "i02@m1", "i02@m2", "i02@m3"}, got)
}

func TestFanOutRecordsOneVerdictPerItemAndModel(t *testing.T) {
	def, items := writeDef(t, fanout, 4)
	h := newHarness(t, def, items)
	h.runAll()
	s := h.m.Summary()
	assert.Equal(t, 4, s.ItemsDone)
	for _, model := range []string{"m1", "m2", "m3"} {
		c := s.Steps["verdict"][model]
		assert.Equal(t, [3]int{4, 0, 0}, [3]int{c.OK, c.Failed, c.Pending}, model)
	}
	// Proposing again offers nothing: finished pairs are skipped.
	assert.Empty(t, h.m.Propose(h.now))
	out, err := h.m.Export(ResultsFile)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Len(t, lines, 4)
	var r Result
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &r))
	assert.Len(t, r.Steps["verdict"], 3, "one verdict per model: %s", lines[0])
}

const grouped = `
name: writers
seed: 5
models: [m1]
items: {source: items.jsonl, key: id}
steps:
  - name: angle
    expression: 'choice(["a", "b", "c"]) + "-" + key'
  - name: drafts
    needs: [angle]
    group:
      - name: short
        llm: {prompt: 'short {{.steps.angle}}', schema: {type: object, required: [text], properties: {text: {type: string}}}}
      - name: long
        llm: {prompt: 'long {{.steps.angle}}', schema: {type: object, required: [text], properties: {text: {type: string}}}}
  - name: merge
    needs: [drafts]
    llm: {prompt: 'merge {{.steps.drafts.short.text}} and {{.steps.drafts.long.text}}', schema: {type: object, required: [text], properties: {text: {type: string}}}}
`

// Both steps of a group are offered at once (they run in parallel), a
// step needing the group waits for both, and its prompt sees both.
func TestGroupRunsBothStepsAndFeedsTheNextOne(t *testing.T) {
	def, items := writeDef(t, grouped, 1)
	h := newHarness(t, def, items)
	first := h.m.Propose(h.now)
	var steps []string
	for _, tk := range first {
		steps = append(steps, field(tk, "step"))
	}
	assert.Equal(t, []string{"short", "long"}, steps, "both group steps at once, merge not yet")
	var prompts []string
	inner := h.answer
	h.answer = func(task *pb.Task, prompt string) string {
		prompts = append(prompts, prompt)
		return inner(task, prompt)
	}
	for _, tk := range first {
		h.runTask(tk)
	}
	h.runAll()
	vals, err := h.m.stepValues(items[0])
	require.NoError(t, err)
	group := vals["drafts"].(map[string]any)
	assert.Contains(t, group, "short")
	assert.Contains(t, group, "long")
	require.Len(t, prompts, 3)
	short := group["short"].(map[string]any)["text"].(string)
	long := group["long"].(map[string]any)["text"].(string)
	assert.Contains(t, prompts[2], "merge "+short+" and "+long)
	// The expression is seeded per item: the same value every time.
	assert.Equal(t, vals["angle"], func() any { v, _ := h.m.stepValues(items[0]); return v["angle"] }())
	assert.True(t, strings.HasSuffix(vals["angle"].(string), "-i00"))
}

const capped = `
name: capped
items: {source: items.jsonl, key: id}
models: [m1, m2]
prices: {m1: {input: 1000, output: 1000}, m2: {input: 1000, output: 1000}}
limits: {max_cost: 1.0, max_output_tokens: 50}
steps:
  - name: verdict
    llm: {prompt: 'Is it true? {{.item.claim}}', schema: {type: object, required: [verdict], properties: {verdict: {type: boolean}}}}
`

// The cost cap stops work before a request that could pass it, counting
// the requests in flight: the spend never exceeds the cap.
func TestMaxCostStopsAtTheLimitNotAfter(t *testing.T) {
	def, items := writeDef(t, capped, 30)
	h := newHarness(t, def, items)
	// All proposed tasks ask at once (as 64 executors would) before any
	// answer comes back.
	tasks := h.m.Propose(h.now)
	var asked []*pb.Task
	prompts := map[string]string{}
	for _, tk := range tasks {
		act, err := h.m.NextAction(tk)
		require.NoError(t, err)
		if act.Kind == modules.ActionLLMRequest {
			asked = append(asked, tk)
			prompts[tk.Id] = act.Prompt
		} else {
			h.apply(h.m.DecideCompletion(tk, h.now))
		}
	}
	require.NotEmpty(t, asked)
	require.Less(t, len(asked), len(tasks), "the cap held some back")
	for _, tk := range asked {
		h.apply(h.m.DecideResponse(tk, h.answer(tk, prompts[tk.Id]), h.now))
		h.runTask(tk)
	}
	// The worst case held back for requests in flight comes back as they
	// answer: work goes on up to the cap, then stops for good.
	h.runAll()
	s := h.m.Summary()
	assert.LessOrEqual(t, s.CostUSD, 1.0)
	assert.Greater(t, s.CostUSD, 0.9, "the cap is used, not left far below")
	assert.Contains(t, s.Stopped, "max_cost")
	assert.Empty(t, h.m.Propose(h.now), "nothing more is proposed once the cap is reached")
	ok := s.Steps["verdict"]["m1"].OK + s.Steps["verdict"]["m2"].OK
	// A later run with the same cap offers nothing (no task is started
	// only to be refused).
	snap0, err := h.m.Snapshot()
	require.NoError(t, err)
	same := New(Config{Def: def, Items: items})
	require.NoError(t, same.Restore(snap0))
	assert.Empty(t, same.Propose(h.now))
	assert.Contains(t, same.StopReason(), "max_cost")
	// A later run with a higher cap asks the deferred pairs under new ids.
	def2, _ := writeDef(t, strings.Replace(capped, "max_cost: 1.0", "max_cost: 100", 1), 0)
	m2 := New(Config{Def: def2, Items: items})
	snap, err := h.m.Snapshot()
	require.NoError(t, err)
	require.NoError(t, m2.Restore(snap))
	again := m2.Propose(h.now)
	assert.Len(t, again, 60-ok)
	for _, tk := range again {
		assert.NotEqual(t, "0", field(tk, "gen"), "a deferred pair gets a new task id")
	}
}

const daily = `
name: daily
items: {source: items.jsonl, key: id}
models: [m1]
limits: {daily_requests: 7}
steps:
  - name: verdict
    llm: {prompt: 'Is it true? {{.item.claim}}', schema: {type: object, required: [verdict], properties: {verdict: {type: boolean}}}}
`

func TestDailyRequestBudgetStopsAndResumesNextDay(t *testing.T) {
	def, items := writeDef(t, daily, 20)
	h := newHarness(t, def, items)
	h.runAll()
	assert.Equal(t, 7, h.requests)
	assert.Equal(t, 7, h.m.Summary().ItemsDone)
	h.now = h.now.Add(24 * time.Hour)
	h.runAll()
	assert.Equal(t, 14, h.requests)
}

const strict = `
name: strict
items: {source: items.jsonl, key: id}
models: [m1]
steps:
  - name: verdict
    llm:
      attempts: 2
      prompt: 'Is it true? {{.item.claim}}'
      schema: {type: object, required: [verdict, confidence], properties: {verdict: {type: boolean}, confidence: {type: number}}}
      rules: [output.confidence >= 0.9]
`

// Answers failing the rules are kept with their raw text and stage;
// revalidate against relaxed rules promotes them with no LLM call, and
// --retry-failed asks only what still fails.
func TestRevalidateAndRetryFailedOnly(t *testing.T) {
	def, items := writeDef(t, strict, 10)
	h := newHarness(t, def, items)
	conf := map[string]float64{}
	h.answer = func(task *pb.Task, prompt string) string {
		c := 0.5
		if field(task, "item") == "i03" {
			c = 0.95
		}
		if field(task, "item") == "i07" {
			return "not json at all"
		}
		conf[field(task, "item")] = c
		return fmt.Sprintf(`{"verdict": true, "confidence": %v}`, c)
	}
	h.runAll()
	fails := h.m.Failures()
	require.Len(t, fails, 9)
	assert.Equal(t, "rules", fails[0].Stage)
	assert.Contains(t, fails[0].Raw, `"confidence": 0.5`)
	assert.Equal(t, 2, fails[0].Attempts)
	assert.Equal(t, "parse", fails[6].Stage, "i07's stage")
	requests := h.requests

	relaxed, _ := writeDef(t, strings.Replace(strict, "0.9", "0.4", 1), 0)
	m2 := New(Config{Def: relaxed, Items: items})
	snap, err := h.m.Snapshot()
	require.NoError(t, err)
	require.NoError(t, m2.Restore(snap))
	h.m = m2
	evs, rv, err := m2.DecideRevalidate()
	h.apply(evs, err)
	assert.Equal(t, 9, rv.Checked)
	assert.Len(t, rv.Promoted, 8)
	assert.Equal(t, requests, h.requests, "no LLM call")
	assert.Len(t, m2.Failures(), 1)

	// Retry only the failed pair (i07): one task, a new generation.
	h.apply(m2.DecideRetryFailed(""))
	tasks := m2.Propose(h.now)
	require.Len(t, tasks, 1)
	assert.Equal(t, "i07", field(tasks[0], "item"))
	assert.Equal(t, "1", field(tasks[0], "gen"))
}

// Replaying the applied events into a fresh module rebuilds the same
// state (what recovery does after a crash).
func TestReplayEqualsLive(t *testing.T) {
	def, items := writeDef(t, strict, 6)
	h := newHarness(t, def, items)
	h.answer = func(task *pb.Task, prompt string) string {
		if field(task, "item") == "i02" {
			return `{"verdict": true, "confidence": 0.1}`
		}
		return `{"verdict": true, "confidence": 0.95}`
	}
	h.runAll()
	live, err := h.m.snapshotJSON()
	require.NoError(t, err)
	m2 := New(Config{Def: def, Items: items})
	for _, e := range h.log {
		require.NoError(t, m2.Apply(e, h.now))
	}
	// Applying the log twice (a replay over a checkpoint) changes nothing.
	for _, e := range h.log {
		if e.Type == "answer_ok" {
			require.NoError(t, m2.Apply(e, h.now))
		}
	}
	replayed, err := m2.snapshotJSON()
	require.NoError(t, err)
	var a, b state
	require.NoError(t, json.Unmarshal(live, &a))
	require.NoError(t, json.Unmarshal(replayed, &b))
	for k, p := range a.Pairs {
		assert.Equal(t, p.Status, b.Pairs[k].Status, k)
		assert.Equal(t, string(p.Output), string(b.Pairs[k].Output), k)
	}
}

// Tasks already offered are not built again on every call, but all are
// offered again now and then (the scheduler may have refused some while
// its queue was full).
func TestProposeSkipsOfferedTasksButReoffersThemPeriodically(t *testing.T) {
	def, items := writeDef(t, fanout, 2)
	m := New(Config{Def: def, Items: items})
	require.Len(t, m.Propose(time.Now()), 6)
	again := 0
	for range reofferEvery - 2 {
		again += len(m.Propose(time.Now()))
	}
	assert.Zero(t, again)
	assert.Len(t, m.Propose(time.Now()), 6, "the periodic re-offer")
}

const watermark = `
name: papers
items: {source: items.jsonl, key: id}
classes: {cheap: [c1], expensive: [x1]}
limits: {max_prepared: 3}
steps:
  - name: prep
    llm: {class: cheap, prompt: 'prep {{.item.claim}}', schema: {type: object, required: [text], properties: {text: {type: string}}}}
  - name: analyze
    needs: [prep]
    llm: {class: expensive, prompt: 'analyze {{.steps.prep.text}}', schema: {type: object, required: [text], properties: {text: {type: string}}}}
`

// The cheap preparation runs at most max_prepared items ahead of the
// expensive analysis (seeds/000's prepared buffer).
func TestPreparedBufferWatermark(t *testing.T) {
	def, items := writeDef(t, watermark, 10)
	h := newHarness(t, def, items)
	// The expensive model is away: only cheap tasks run.
	for range 5 {
		for _, tk := range h.m.Propose(h.now) {
			if tk.LlmPreference == "c1" {
				h.runTask(tk)
			}
		}
	}
	assert.Equal(t, 3, h.m.Summary().Steps["prep"]["c1"].OK, "three items prepared, no more")
	// Analysis drains the buffer; preparation follows it.
	h.runAll()
	assert.Equal(t, 10, h.m.Summary().ItemsDone)
}

// Cost comes from the token usage the backend reported with the answer
// when there is one; another task's usage is not taken for it.
func TestCostFromReportedUsage(t *testing.T) {
	def, items := writeDef(t, capped, 1)
	m := New(Config{Def: def, Items: items})
	tk := m.Propose(time.Now())[0]
	act, err := m.NextAction(tk)
	require.NoError(t, err)
	require.Equal(t, modules.ActionLLMRequest, act.Kind)
	m.TakeUsage("another/task", modules.Usage{PromptTokens: 9000, CompletionTokens: 9000})
	m.TakeUsage(tk.Id, modules.Usage{PromptTokens: 1000, CompletionTokens: 500}) // price 1000 USD per million both ways
	evs, err := m.DecideResponse(tk, `{"verdict": true}`, time.Now())
	require.NoError(t, err)
	require.NoError(t, m.Apply(evs[0], time.Now()))
	assert.InDelta(t, 1.5, m.Summary().CostUSD, 1e-9)
}

// field reads a part of a task's subject: step, model, gen or item.
func field(t *pb.Task, name string) string {
	step, model, gen, item, _ := parseSubject(t.Subject)
	return map[string]string{"step": step, "model": model, "gen": fmt.Sprint(gen), "item": item}[name]
}

// A task of a model the edited definition no longer uses (recovered
// after a restart) ends without asking and without recording anything.
func TestTaskOfADroppedModelEndsQuietly(t *testing.T) {
	def, items := writeDef(t, fanout, 1)
	old := New(Config{Def: def, Items: items}).Propose(time.Now())
	edited, _ := writeDef(t, strings.Replace(fanout, "[m1, m2, m3]", "[m1, m2]", 1), 0)
	m := New(Config{Def: edited, Items: items})
	act, err := m.NextAction(old[2])
	require.NoError(t, err)
	assert.Equal(t, modules.ActionDone, act.Kind)
	evs, err := m.DecideCompletion(old[2], time.Now())
	require.NoError(t, err)
	assert.Empty(t, evs)
}

// Between the decision on an answer and its event being applied (after
// the WAL write), the answer's cost is still held back: a request decided
// in that gap sees it (a real run overspent its cap without this).
func TestDecidedCostStaysHeldUntilApplied(t *testing.T) {
	def, items := writeDef(t, capped, 1)
	m := New(Config{Def: def, Items: items})
	tk := m.Propose(time.Now())[0]
	_, err := m.NextAction(tk)
	require.NoError(t, err)
	evs, err := m.DecideResponse(tk, `{"verdict": true}`, time.Now())
	require.NoError(t, err)
	held := m.reservedCost()
	assert.Positive(t, held, "decided, not yet applied: still held")
	assert.Zero(t, m.spent)
	require.NoError(t, m.Apply(evs[0], time.Now()))
	assert.Zero(t, m.reservedCost())
	assert.InDelta(t, held, m.spent, 1e-12)
}

const groupedNoExpr = `
name: writers
models: [m1, m2]
prices: {m1: {input: 0.003, output: 0.0071}, m2: {input: 1.5, output: 2}}
items: {source: items.jsonl, key: id}
steps:
  - name: drafts
    group:
      - name: short
        llm: {prompt: 'short {{.item.claim}}', schema: {type: object, required: [text], properties: {text: {type: string}}}}
      - name: long
        llm: {models: [m1], prompt: 'long {{.item.claim}}', schema: {type: object, required: [text], properties: {text: {type: string}}}}
  - name: merge
    needs: [drafts]
    llm: {prompt: 'merge {{.steps.drafts.long.text}}', schema: {type: object, required: [text], properties: {text: {type: string}}}}
`

// results.jsonl writes the stored outputs as they are: the same bytes as
// decoding them and encoding them again, for groups, fan-outs, numbers,
// escapes and text that is not ASCII; and its own writer writes what
// encoding/json would (costs from 1e-8 up).
func TestResultsWriteStoredOutputsAsDecodedOnesWould(t *testing.T) {
	def, items := writeDef(t, groupedNoExpr, 6)
	h := newHarness(t, def, items)
	answers := []string{
		`{"text": "a<b & c>d \u2028 ü 日本", "n": 12345678.25, "tiny": 1e-9, "big": 1e21, "list": [1, 2.5, {"z": null, "a": true}]}`,
		`Sure: {"text": "plain", "n": -0.0}`,
		"```json\n{\"text\": \"fenced \\\"quoted\\\"\", \"n\": 3}\n```",
	}
	n := 0
	h.answer = func(*pb.Task, string) string { n++; return answers[n%len(answers)] }
	h.runAll()
	require.Equal(t, 6, h.m.Summary().ItemsDone)
	raw, err := h.m.results(true, nil)
	require.NoError(t, err)
	decoded, err := h.m.results(false, nil)
	require.NoError(t, err)
	assert.Equal(t, string(decoded), string(raw))
	got, err := h.m.Export(ResultsFile)
	require.NoError(t, err)
	assert.Equal(t, string(raw), string(got), "no expression: the stored outputs are written as they are")
	var r Result
	require.NoError(t, json.Unmarshal([]byte(strings.SplitN(string(got), "\n", 2)[0]), &r))
	assert.Len(t, r.Steps["drafts"].(map[string]any)["short"], 2, "one output per model in the group's step")
	assert.Contains(t, string(got), `e-`, "a cost small enough for an exponent")

	for c := range 256 {
		s := "k" + string(rune(c)) + string([]byte{byte(c)})
		want, err := json.Marshal(s)
		require.NoError(t, err)
		var b bytes.Buffer
		require.NoError(t, appendJSON(&b, s))
		assert.Equal(t, string(want), b.String(), "%q", s)
	}
	for _, f := range []float64{0, 1, -1, 0.5, 1e-6, 9.99e-7, 1e-7, 1.5e-8, 123456.789, 1e20, 1e21, 1.5e300, -2.5e-9, 1e-100} {
		want, err := json.Marshal(f)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(appendFloat(nil, f)), "%v", f)
	}
}

// limits.max_items keeps the first items of the source only.
func TestMaxItemsKeepsTheFirstItems(t *testing.T) {
	def, _ := writeDef(t, strings.Replace(fanout, "steps:", "limits: {max_items: 4}\nsteps:", 1), 10)
	items, err := def.LoadItems()
	require.NoError(t, err)
	require.Len(t, items, 4)
	assert.Equal(t, "i03", items[3].Key)
	_, err = Parse([]byte(strings.Replace(fanout, "steps:", "limits: {max_items: -1}\nsteps:", 1)), "p.yaml")
	require.ErrorContains(t, err, "limits: a limit is zero (none) or positive")
}

const groupOfTwo = `
name: grouped
items: {source: items.jsonl, key: id}
models: [m1]
steps:
  - name: first
    llm: {prompt: 'Is it true? {{.item.claim}}', schema: {type: object, required: [verdict], properties: {verdict: {type: boolean}}}}
  - name: notes
    needs: [first]
    group:
      - name: summary
        llm: {prompt: 'Summarize: {{.item.claim}}', schema: {type: object, required: [text], properties: {text: {type: string}}}}
      - name: keywords
        llm: {prompt: 'Keywords: {{.item.claim}}', schema: {type: object, required: [words], properties: {words: {type: array, items: {type: string}}}}}
`

// A group's steps are listed under the group only, in results.jsonl
// written from the stored outputs and from computed values alike.
func TestGroupStepsAreListedOnce(t *testing.T) {
	for name, yaml := range map[string]string{
		"raw":        groupOfTwo,
		"expression": strings.Replace(groupOfTwo, "steps:\n", "steps:\n  - name: tone\n    expression: '\"calm\"'\n", 1),
	} {
		t.Run(name, func(t *testing.T) {
			def, items := writeDef(t, yaml, 2)
			h := newHarness(t, def, items)
			h.runAll()
			b, err := h.m.Export(ResultsFile)
			require.NoError(t, err)
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			require.Len(t, lines, 2)
			for _, l := range lines {
				var r struct {
					Steps map[string]json.RawMessage `json:"steps"`
				}
				require.NoError(t, json.Unmarshal([]byte(l), &r))
				assert.Contains(t, r.Steps, "notes", l)
				assert.NotContains(t, r.Steps, "summary", l)
				assert.NotContains(t, r.Steps, "keywords", l)
				assert.Contains(t, string(r.Steps["notes"]), `"summary"`, l)
			}
		})
	}
}

// Step counts come in pipeline order (a step after those it needs, a
// group's steps in its place), and the meter gives each its rate since
// its first look and the time left at that rate.
func TestStepCountsInPipelineOrderWithRateAndETA(t *testing.T) {
	def, items := writeDef(t, groupOfTwo, 4)
	h := newHarness(t, def, items)
	var meter RateMeter
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	first := meter.Observe(t0, h.m.StepCounts())
	var order []string
	for _, c := range first {
		order = append(order, c.Step)
		assert.Equal(t, 4, c.Pending)
		assert.Equal(t, -1.0, c.ETASeconds, "no rate yet")
	}
	assert.Equal(t, []string{"first", "summary", "keywords"}, order)
	for _, tk := range h.m.Propose(h.now) {
		if field(tk, "step") == "first" && (field(tk, "item") == "i00" || field(tk, "item") == "i01") {
			h.runTask(tk)
		}
	}
	later := meter.Observe(t0.Add(4*time.Second), h.m.StepCounts())
	assert.Equal(t, StepProgress{Step: "first", Model: "m1", Done: 2, Pending: 2, RatePerSec: 0.5, ETASeconds: 4}, later[0])
	assert.Equal(t, -1.0, later[1].ETASeconds, "summary has not started")
}

// A task that ends with fewer answers recorded than its attempts allow
// (its answer was counted, then lost to a crash before the module's
// event) does not fail its pair: a new round asks again.
func TestLostAnswerIsAskedAgainNotFailed(t *testing.T) {
	def, items := writeDef(t, strings.Replace(fanout, "models: [m1, m2, m3]", "models: [m1]\n      attempts: 1", 1), 1)
	h := newHarness(t, def, items)
	tk := h.m.Propose(h.now)[0]
	_, err := h.m.NextAction(tk)
	require.NoError(t, err)
	evs, err := h.m.DecideCompletion(tk, h.now) // the executor's budget is spent, no answer recorded
	require.NoError(t, err)
	require.Len(t, evs, 1)
	assert.Equal(t, "pair_deferred", evs[0].Type)
	h.apply(evs, nil)
	h.runAll()
	assert.Equal(t, 1, h.m.Summary().ItemsDone)
	assert.Empty(t, h.m.Failures())
}

// The panel's report lists the steps in pipeline order with their rate
// (over the module's clock, from the first report) and time left.
func TestPanelReportHasStepsInOrderWithRate(t *testing.T) {
	def, items := writeDef(t, groupOfTwo, 4)
	h := newHarness(t, def, items)
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	h.m.SetNow(t0)
	first := h.m.Report().(PanelReport)
	var order []string
	for _, c := range first.Steps {
		order = append(order, c.Step)
	}
	assert.Equal(t, []string{"first", "summary", "keywords"}, order)
	for _, tk := range h.m.Propose(h.now) {
		if field(tk, "step") == "first" && (field(tk, "item") == "i00" || field(tk, "item") == "i01") {
			h.runTask(tk)
		}
	}
	h.m.SetNow(t0.Add(4 * time.Second))
	later := h.m.Report().(PanelReport)
	assert.Equal(t, StepProgress{Step: "first", Model: "m1", Done: 2, Pending: 2, RatePerSec: 0.5, ETASeconds: 4}, later.Steps[0])
}

// ExportTo streams each output file as Export renders it whole, across
// many of its chunks.
func TestExportToWritesWhatExportReturns(t *testing.T) {
	def, items := writeDef(t, fanout, 1500)
	h := newHarness(t, def, items)
	h.runAll()
	for _, name := range h.m.ExportPaths() {
		whole, err := h.m.Export(name)
		require.NoError(t, err)
		var streamed bytes.Buffer
		require.NoError(t, h.m.ExportTo(name, &streamed))
		assert.Equal(t, string(whole), streamed.String(), name)
		if name == ResultsFile {
			assert.Greater(t, len(whole), 2*streamChunk, "more than a chunk")
		}
	}
}
