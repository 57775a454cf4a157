package pipeline

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/pb"
)

const judged = `
name: judged
items: {source: items.jsonl, key: id}
models: [m1]
steps:
  - name: judge
    llm: {prompt: 'Judge {{.item.claim}}', schema: {type: object, required: [decision], properties: {decision: {enum: [PASS, REPAIR]}}}}
  - name: fix
    needs: [judge]
    repeat:
      times: 2
      while: 'steps.judge.decision == "REPAIR"'
      steps:
        - name: repair
          llm: {prompt: 'Repair {{.item.claim}} (judged {{.steps.judge.decision}})', schema: {type: object, required: [text], properties: {text: {type: string}}}}
        - name: judge
          needs: [repair]
          llm: {prompt: 'Judge again {{.item.claim}}: {{.steps.repair.text}}', schema: {type: object, required: [decision], properties: {decision: {enum: [PASS, REPAIR]}}}}
  - name: publish
    needs: [fix]
    when: 'steps.judge.decision == "PASS"'
    llm: {prompt: 'Publish {{.item.claim}}', schema: {type: object, required: [ok], properties: {ok: {type: boolean}}}}
`

// judge -> repair -> judge, at most twice: an item judged PASS at once
// skips every round; one judged REPAIR once is repaired and judged again
// once; one judged REPAIR every time runs both rounds and stops. when:
// skips publish for what never passed. The rounds are steps of their own
// (asked once each, durable as any), listed under the repeat's name.
func TestWhenAndBoundedRepeat(t *testing.T) {
	def, items := writeDef(t, judged, 3)
	h := newHarness(t, def, items)
	asked := map[string]int{}
	h.answer = func(task *pb.Task, prompt string) string {
		item, step := field(task, "item"), field(task, "step")
		asked[item+"/"+step]++
		switch {
		case strings.HasPrefix(step, "repair"):
			return `{"text": "fixed"}`
		case step == "publish":
			return `{"ok": true}`
		case item == "i00":
			return `{"decision": "PASS"}`
		case item == "i01" && step == "judge_1":
			return `{"decision": "PASS"}`
		}
		return `{"decision": "REPAIR"}`
	}
	h.runAll()
	assert.Equal(t, map[string]int{
		"i00/judge": 1, "i00/publish": 1,
		"i01/judge": 1, "i01/repair_1": 1, "i01/judge_1": 1, "i01/publish": 1,
		"i02/judge": 1, "i02/repair_1": 1, "i02/judge_1": 1, "i02/repair_2": 1, "i02/judge_2": 1,
	}, asked)
	sum := h.m.Summary()
	assert.Equal(t, 3, sum.ItemsDone)
	assert.Equal(t, 1, sum.Steps["publish"]["m1"].Skipped)
	assert.Equal(t, 2, sum.Steps["repair_2"]["m1"].Skipped)

	b, err := h.m.Export(ResultsFile)
	require.NoError(t, err)
	var r struct {
		Steps map[string]json.RawMessage `json:"steps"`
	}
	require.NoError(t, json.Unmarshal([]byte(strings.Split(string(b), "\n")[1]), &r))
	assert.JSONEq(t, `{"decision":"REPAIR"}`, string(r.Steps["judge"]), "the first judge under its own name")
	assert.JSONEq(t, `{"repair_1":{"text":"fixed"},"judge_1":{"decision":"PASS"}}`, string(r.Steps["fix"]))

	// Replayed from its events, the state decides the same.
	again := New(Config{Def: def, Items: items})
	for _, e := range h.log {
		require.NoError(t, again.Apply(e, h.now))
	}
	assert.Equal(t, sum.Steps, again.Summary().Steps)
	assert.Empty(t, again.Propose(h.now))
}

// A repeat is checked: its bounds, its condition, its steps.
func TestRepeatIsChecked(t *testing.T) {
	for bad, want := range map[string]string{
		"times: 2": "repeat.times must be 1..10",
		`while: 'steps.judge.decision == "REPAIR"'`: "repeat.while: give the condition",
	} {
		repl := "times: 11"
		if strings.HasPrefix(bad, "while") {
			repl = "while: ''"
		}
		_, err := Parse([]byte(strings.Replace(judged, bad, repl, 1)), "p.yaml")
		require.ErrorContains(t, err, want)
	}
}
