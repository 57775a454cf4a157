package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const twoSteps = `
name: judged
items: {source: items.jsonl, key: id}
models: [m1]
steps:
  - name: verdict
    llm:
      prompt: 'Is this claim true? {{.item.claim}}'
      schema: {type: object, required: [verdict], properties: {verdict: {type: boolean}}}
  - name: reason
    needs: [verdict]
    llm:
      prompt: 'Why? {{.item.claim}}'
      schema: {type: object, required: [text], properties: {text: {type: string}}}
  - name: tags
    llm:
      prompt: 'Tags for {{.item.claim}}'
      schema: {type: object, required: [words], properties: {words: {type: array, items: {type: string}}}}
`

// A step whose prompt changed between runs is refused, naming it and the
// steps that need it, without a write; --rerun-changed asks it and them
// again (and nothing else), --keep keeps the earlier answers.
func TestChangedStepIsRefusedUnlessRerunOrKept(t *testing.T) {
	fano.Require(t)
	e := newEnv(t, twoSteps, simConfig(0, 4), 5)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out, err := e.cmd(ctx, "pipeline", "run", e.def, "--no-progress").CombinedOutput()
	require.NoError(t, err, "%s", out)
	first := readRun(t, e.data)
	require.Len(t, first.okCount, 15)

	edited := strings.Replace(twoSteps, "Is this claim true?", "Is this claim false?", 1)
	require.NoError(t, os.WriteFile(e.def, []byte(edited), 0o644))
	out, err = e.cmd(ctx, "pipeline", "run", e.def, "--no-progress").CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), "step(s) verdict changed since the last run")
	assert.Contains(t, string(out), "reason need(s) them")
	assert.Equal(t, first.lastSeq, readRun(t, e.data).lastSeq, "refused before any write")

	out, err = e.cmd(ctx, "pipeline", "run", e.def, "--no-progress", "--rerun-changed").CombinedOutput()
	require.NoError(t, err, "%s", out)
	again := readRun(t, e.data)
	asked := map[string]int{}
	for id, n := range again.okCount {
		asked[strings.Split(id, "/")[2]] += n
	}
	assert.Equal(t, map[string]int{"verdict": 10, "reason": 10, "tags": 5}, asked, "verdict and reason asked again, tags not")

	// Changed again, kept: nothing is asked.
	require.NoError(t, os.WriteFile(e.def, []byte(strings.Replace(edited, "Why?", "Why so?", 1)), 0o644))
	out, err = e.cmd(ctx, "pipeline", "run", e.def, "--no-progress", "--keep").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, len(again.requests), len(readRun(t, e.data).requests))
	out, err = e.cmd(ctx, "pipeline", "run", e.def, "--no-progress").CombinedOutput()
	require.NoError(t, err, "kept: the run directory has the new definition now: %s", out)
}
