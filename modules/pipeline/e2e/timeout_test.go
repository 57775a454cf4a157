package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A model that never answers: each call is cancelled at the per-call
// timeout (orchestrator.tasks.request_timeout_seconds), retried after the
// backoff, then the pair fails with stage "request"; the run ends instead
// of waiting on a call that keeps running (seeds/003), and the other
// model's verdicts are all there.
func TestHangingModelIsCancelledAtTheTimeout(t *testing.T) {
	fano.Require(t)
	cfg := strings.Replace(simConfig(0, 2), "m2: {type: sim, hourly_limit: 1000000, max_concurrency: 2, sim: {seed: 2, style: api, latency_ms: 0}}",
		"m2: {type: sim, hourly_limit: 1000000, max_concurrency: 2, sim: {seed: 2, style: api, latency_ms: 0, timeout_rate: 1}}", 1)
	require.Contains(t, cfg, "timeout_rate: 1")
	cfg += `orchestrator:
  tasks: {request_timeout_seconds: 1}
  recovery: {retry_backoff_seconds: [1]}
`
	def := strings.Replace(verdictPipeline, "[m1, m2, m3]", "[m1, m2]", 1)
	e := newEnv(t, def, cfg, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	out, err := e.cmd(ctx, "pipeline", "run", e.def, "--no-progress", "--json").Output()
	require.NoError(t, err, "%s", out)
	t.Logf("run took %s", time.Since(start))
	var sum struct {
		ItemsFailed int                                  `json:"items_failed"`
		Steps       map[string]map[string]map[string]int `json:"steps"`
	}
	require.NoError(t, json.Unmarshal(out, &sum), "%s", out)
	assert.Equal(t, 4, sum.ItemsFailed)
	assert.Equal(t, 4, sum.Steps["verdict"]["m1"]["ok"])
	assert.Equal(t, 4, sum.Steps["verdict"]["m2"]["failed"])
	for _, l := range lines(t, filepath.Join(e.data, "output", "failures.jsonl")) {
		var f struct{ Model, Stage, Error string }
		require.NoError(t, json.Unmarshal([]byte(l), &f))
		assert.Equal(t, "m2", f.Model)
		assert.Equal(t, "request", f.Stage)
		assert.Contains(t, f.Error, "no answer (simulated hang): context canceled", l)
	}
}
