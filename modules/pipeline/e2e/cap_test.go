package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// --max-cost stops a real run at the limit (never past it), and a second
// run with a higher cap finishes the rest without asking anything twice.
func TestMaxCostStopsARunAtTheLimit(t *testing.T) {
	fano.Require(t)
	def := strings.Replace(verdictPipeline, "models: [m1, m2, m3]",
		"models: [m1, m2, m3]\nprices: {m1: {input: 100, output: 100}, m2: {input: 100, output: 100}, m3: {input: 100, output: 100}}\nlimits: {max_output_tokens: 20}", 1)
	e := newEnv(t, def, simConfig(5, 4), 60)
	ctx := context.Background()
	type summary struct {
		ItemsDone int     `json:"items_done"`
		Cost      float64 `json:"cost_usd"`
		Requests  int     `json:"requests"`
		Stopped   string  `json:"stopped"`
		Stop      struct {
			Reason string `json:"reason"`
			Detail string `json:"detail"`
		} `json:"stop"`
	}
	out, err := e.cmd(ctx, "pipeline", "run", e.def, "--no-progress", "--json", "--max-cost", "0.5").Output()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	assert.Equal(t, 4, exit.ExitCode(), "the cost cap's exit code")
	assert.Contains(t, string(exit.Stderr), "stopped (cost_cap, exit 4): max_cost 0.5000: a request of step verdict on")
	var first summary
	require.NoError(t, json.Unmarshal(out, &first), "stdout is the summary alone: %s", out)
	assert.Equal(t, "cost_cap", first.Stop.Reason)
	assert.Contains(t, first.Stop.Detail, "limits.max_output_tokens 20")
	assert.LessOrEqual(t, first.Cost, 0.5)
	// Stopped before a request whose worst case (its prompt and 20
	// answer tokens, about 0.01) could pass the cap.
	assert.Greater(t, first.Cost, 0.47)
	assert.Contains(t, first.Stop.Detail, "max_cost 0.5000")
	assert.Less(t, first.ItemsDone, 60)

	out, err = e.cmd(ctx, "pipeline", "run", e.def, "--no-progress", "--json", "--max-cost", "100").Output()
	require.NoError(t, err, "%s", out)
	var second summary
	require.NoError(t, json.Unmarshal(out, &second), "%s", out)
	assert.Equal(t, 60, second.ItemsDone)
	assert.Empty(t, second.Stopped)
	assert.Equal(t, "done", second.Stop.Reason)
	w := readRun(t, e.data)
	assert.Len(t, w.okCount, 180)
	for id, n := range w.okCount {
		assert.Equal(t, 1, n, id)
	}
}
