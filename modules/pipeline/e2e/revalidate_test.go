package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const strictPipeline = `
name: strict
items: {source: items.jsonl, key: id}
models: [m1]
steps:
  - name: verdict
    llm:
      attempts: 1
      prompt: 'Is this claim true? {{.item.claim}}'
      schema: {type: object, required: [verdict, confidence], properties: {verdict: {type: boolean}, confidence: {type: number, minimum: 0, maximum: 1}}}
      rules: [output.confidence >= 0.95]
`

func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	s := strings.TrimSpace(string(b))
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// Answers that failed the rules are in failures.jsonl with their raw text
// and stage; after the rule is relaxed in the file, revalidate promotes
// them with no LLM request, and --retry-failed asks only what still fails.
func TestRevalidatePromotesAnswersThatNowPass(t *testing.T) {
	fano.Require(t)
	e := newEnv(t, strictPipeline, simConfig(0, 4), 40)
	ctx := context.Background()
	out, err := e.cmd(ctx, "pipeline", "run", e.def, "--no-progress").CombinedOutput()
	require.Equal(t, 3, exitCode(t, err), "failed items: %s", out)
	fails := lines(t, filepath.Join(e.data, "output", "failures.jsonl"))
	require.NotEmpty(t, fails)
	var f struct{ Stage, Raw string }
	require.NoError(t, json.Unmarshal([]byte(fails[0]), &f))
	assert.Equal(t, "rules", f.Stage)
	assert.Contains(t, f.Raw, "confidence")
	requestsBefore := len(readRun(t, e.data).requests)

	relaxed := strings.Replace(strictPipeline, "0.95", "0", 1)
	require.NoError(t, os.WriteFile(e.def, []byte(relaxed), 0o644))
	out, err = e.cmd(ctx, "pipeline", "revalidate", e.def, "--json").Output()
	require.NoError(t, err, "%s", out)
	var rv struct {
		Checked  int      `json:"checked"`
		Promoted []string `json:"promoted"`
	}
	require.NoError(t, json.Unmarshal(out, &rv), "%s", out)
	assert.Equal(t, len(fails), rv.Checked)
	assert.Len(t, rv.Promoted, len(fails))
	assert.Empty(t, lines(t, filepath.Join(e.data, "output", "failures.jsonl")))
	assert.Len(t, lines(t, filepath.Join(e.data, "output", "results.jsonl")), 40)
	after := readRun(t, e.data)
	assert.Len(t, after.requests, requestsBefore, "no LLM request")
	for id, n := range after.okCount {
		assert.Equal(t, 1, n, id)
	}

	// status agrees.
	out, err = e.cmd(ctx, "pipeline", "status", e.def, "--json").Output()
	require.NoError(t, err, "%s", out)
	var sum struct {
		ItemsDone   int `json:"items_done"`
		ItemsFailed int `json:"items_failed"`
	}
	require.NoError(t, json.Unmarshal(out, &sum))
	assert.Equal(t, 40, sum.ItemsDone)
	assert.Zero(t, sum.ItemsFailed)
}
