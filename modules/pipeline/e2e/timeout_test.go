package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A model that never answers: each call is cancelled at the per-call
// timeout (orchestrator.tasks.request_timeout_seconds) and asked again
// after the backoff, instead of waiting on a call that keeps running
// (seeds/003); the other model's verdicts are all there. A hang is the
// backend's fault, never the pair's (issue 11): the pairs wait, so the run
// is stopped here and its WAL read.
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
	// Long enough for every m2 pair to be asked at least twice (1 s
	// timeout + 1 s backoff), far shorter than a call left running.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_ = e.cmd(ctx, "pipeline", "run", e.def, "--no-progress", "--json").Run()
	w := readRun(t, e.data)
	m1, m2 := 0, 0
	for id, reqs := range w.requests {
		switch {
		case strings.Contains(id, "/m1/"):
			m1++
			assert.Equal(t, 1, w.okCount[id], "m1 answers once: %s", id)
		case strings.Contains(id, "/m2/"):
			m2++
			assert.GreaterOrEqual(t, len(reqs), 2, "a hung call is cancelled at the timeout and asked again: %s", id)
			assert.Zero(t, w.okCount[id], id)
		}
	}
	assert.Equal(t, 4, m1)
	assert.Equal(t, 4, m2)
}
