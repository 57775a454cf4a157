package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"fano/pb"
	"fano/wal"
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

// A step's own timeout_seconds: a request past it is recorded as
// "timeout" (the request's failure in the WAL, the pair's stage in
// results.jsonl and failures.jsonl), counts as one of the step's
// attempts, and once they are spent the pair fails and the run finishes
// (seeds/003: 180 s per verdict, log the timeout, continue), with the
// config's request timeout left at its hour.
func TestStepTimeoutIsAnAttemptAndTheRunFinishes(t *testing.T) {
	fano.Require(t)
	cfg := strings.Replace(simConfig(0, 2), "m2: {type: sim, hourly_limit: 1000000, max_concurrency: 2, sim: {seed: 2, style: api, latency_ms: 0}}",
		"m2: {type: sim, hourly_limit: 1000000, max_concurrency: 2, sim: {seed: 2, style: api, latency_ms: 0, timeout_rate: 1}}", 1)
	def := strings.Replace(verdictPipeline, "[m1, m2, m3]", "[m1, m2]", 1) + "      timeout_seconds: 0.3\n      attempts: 2\n"
	e := newEnv(t, def, cfg, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := e.cmd(ctx, "pipeline", "run", e.def, "--no-progress", "--json").Output()
	require.Error(t, err, "failed items: a non-zero exit")
	require.NoError(t, ctx.Err(), "the run finished on its own")
	var sum struct {
		ItemsFailed int `json:"items_failed"`
	}
	require.NoError(t, json.Unmarshal(out, &sum), "%s", out)
	assert.Equal(t, 4, sum.ItemsFailed)

	timeouts := map[string]int{}
	log, err := wal.Open(filepath.Join(e.data, "fano.db"), wal.Options{LockTimeout: time.Second, ReadOnly: true})
	require.NoError(t, err)
	require.NoError(t, log.Replay(1, func(ent wal.Entry) error {
		var ev pb.Event
		if proto.Unmarshal(ent.Payload, &ev) == nil {
			if f := ev.GetLlmRequestFailed(); f != nil && f.Kind == "timeout" {
				timeouts[f.TaskId]++
			}
		}
		return nil
	}))
	require.NoError(t, log.Close())
	require.Len(t, timeouts, 4, "every m2 pair timed out")
	for id, n := range timeouts {
		assert.Contains(t, id, "/m2/")
		assert.Equal(t, 2, n, "two attempts, each a timeout: %s", id)
	}
	trace, err := os.ReadFile(filepath.Join(e.data, "logs", "trace.log"))
	require.NoError(t, err)
	assert.Equal(t, 8, strings.Count(string(trace), `"outcome":"timeout"`), "each attempt in the trace")
	fails, err := os.ReadFile(filepath.Join(e.data, "output", "failures.jsonl"))
	require.NoError(t, err)
	assert.Equal(t, 4, strings.Count(string(fails), `"stage":"timeout"`), "%s", fails)
	res, err := os.ReadFile(filepath.Join(e.data, "output", "results.jsonl"))
	require.NoError(t, err)
	assert.Equal(t, 4, strings.Count(string(res), `"failed":{"verdict":{"m2":"timeout"}}`), "%s", res)
}
