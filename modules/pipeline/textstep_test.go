package pipeline

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/pb"
)

const prose = `
name: prose
items: {source: items.jsonl, key: id}
models: [m1]
steps:
  - name: summary
    llm:
      prompt: 'Summarise: {{.item.claim}}'
      rules: ['len(output) >= 10']
  - name: verdict
    needs: [summary]
    llm:
      prompt: 'Judge this summary: {{.steps.summary}}'
      schema: {type: object, required: [verdict], properties: {verdict: {type: boolean}}}
`

// A step without a schema takes a prose answer as its text, in one
// request: its rules read it as output, later prompts put it in, and it
// is exported. A step with a schema still refuses prose, and an empty
// answer is no text.
func TestStepWithoutSchemaTakesProse(t *testing.T) {
	def, items := writeDef(t, prose, 3)
	h := newHarness(t, def, items)
	var judged []string
	h.answer = func(task *pb.Task, prompt string) string {
		if field(task, "step") == "verdict" {
			judged = append(judged, prompt)
			return `{"verdict": true}`
		}
		if field(task, "item") == "i01" {
			return "too short" // fails the rule: 9 chars
		}
		return "  The claim says " + field(task, "item") + " holds.\n"
	}
	h.runAll()
	assert.Equal(t, 2+3+2, h.requests, "a summary each for i00 and i02, i01's 3 attempts, two verdicts")
	require.Len(t, judged, 2)
	assert.True(t, strings.HasPrefix(judged[0], "Judge this summary: The claim says i0"), judged[0])
	vals, err := h.m.stepValues(items[0])
	require.NoError(t, err)
	assert.Equal(t, "The claim says i00 holds.", vals["summary"], "the text, trimmed")
	fails := h.m.Failures()
	require.Len(t, fails, 1)
	assert.Equal(t, "rules", fails[0].Stage, "prose was read; its rule failed")

	s := def.Step("verdict")
	_, stage, err := def.ValidateAnswer(s, items[0], nil, "Yes, it is true.")
	assert.Error(t, err)
	assert.Equal(t, "parse", stage, "a schema asks for JSON")
	_, stage, err = def.ValidateAnswer(def.Step("summary"), items[0], nil, " \n ")
	assert.Error(t, err)
	assert.Equal(t, "parse", stage, "an empty answer is no text")
}
