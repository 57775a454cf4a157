package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const dailyPipeline = `
name: daily
items: {source: items.jsonl, key: id}
models: [m1]
limits: {daily_requests: 5}
steps:
  - name: verdict
    llm:
      prompt: 'Is this claim true? {{.item.claim}}'
      schema: {type: object, required: [verdict], properties: {verdict: {type: boolean}}}
`

// A run whose daily request budget is spent waits for the next day's
// budget, and says so (status, progress file, summary); with --no-wait it
// exits non-zero instead, naming when the budget comes back.
func TestSpentDailyBudgetWaitsOrExitsWithNoWait(t *testing.T) {
	fano.Require(t)
	e := newEnv(t, dailyPipeline, simConfig(0, 2), 20)
	ctx := context.Background()
	out, err := e.cmd(ctx, "pipeline", "run", e.def, "--no-progress", "--no-wait").CombinedOutput()
	var noWait *exec.ExitError
	require.ErrorAs(t, err, &noWait, "%s", out)
	assert.Equal(t, 5, noWait.ExitCode(), "the daily budget's exit code")
	assert.Contains(t, string(out), "stop: daily_budget (exit 5)")
	assert.Contains(t, string(out), "daily_requests 5 reached for ")
	assert.Contains(t, string(out), "T00:00:00Z: run again then")
	assert.Contains(t, string(out), "pipeline daily: 5 of 20 items done")

	// Without --no-wait the run stays, waiting.
	var buf bytes.Buffer
	run := e.cmd(ctx, "pipeline", "run", e.def, "--no-progress")
	run.Stdout, run.Stderr = &buf, &buf
	require.NoError(t, run.Start())
	exited := make(chan error, 1)
	go func() { exited <- run.Wait() }()
	var p struct {
		Done         int    `json:"items_finished"`
		Waiting      string `json:"waiting"`
		WaitingUntil string `json:"waiting_until"`
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(60 * time.Second)
wait:
	for {
		select {
		case <-tick.C:
			b, err := os.ReadFile(filepath.Join(e.data, "progress.json"))
			if err == nil && json.Unmarshal(b, &p) == nil && p.WaitingUntil != "" {
				break wait
			}
		case err := <-exited:
			t.Fatalf("the run ended instead of waiting: %v\n%s", err, buf.String())
		case <-deadline:
			t.Fatalf("the run never said it waits\n%s", buf.String())
		}
	}
	until, err := time.Parse(time.RFC3339, p.WaitingUntil)
	require.NoError(t, err)
	assert.Equal(t, time.Duration(0), until.Sub(until.Truncate(24*time.Hour)), "a UTC midnight")
	assert.True(t, until.After(time.Now()))
	assert.Equal(t, 5, p.Done)
	st, err := e.cmd(ctx, "pipeline", "status", e.def).CombinedOutput()
	require.NoError(t, err, "%s", st)
	assert.Contains(t, string(st), "waiting: daily_requests 5 reached for ")
	assert.Contains(t, string(st), "goes on at "+p.WaitingUntil)
	require.NoError(t, run.Process.Signal(syscall.SIGTERM))
	var exit *exec.ExitError
	require.ErrorAs(t, <-exited, &exit, "%s", buf.String())
	assert.Equal(t, 6, exit.ExitCode(), "stopped by a signal with work left")
	assert.Contains(t, buf.String(), "stop: stopped (exit 6): terminated; 15 items left")
	assert.Contains(t, buf.String(), "waiting: daily_requests 5 reached for ")
	assert.True(t, strings.Contains(buf.String(), "5 of 20 items done"), buf.String())
}
