package e2e

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const chainPipeline = `
name: chain
items: {source: items.jsonl, key: id}
models: [m1, m2]
steps:
  - name: verdict
    llm:
      prompt: 'Is this claim true? {{.item.claim}}'
      schema: {type: object, required: [verdict, confidence], properties: {verdict: {type: boolean}, confidence: {type: number, minimum: 0, maximum: 1}}}
  - name: reason
    needs: [verdict]
    llm:
      model: m1
      prompt: 'Why? {{.item.claim}}'
      schema: {type: object, required: [text], properties: {text: {type: string}}}
`

// Export while a run goes on gives what the run last wrote (CSV with a
// column per step, model and field); after a kill -9 it gives every
// item with a step done, open ones with their steps so far.
func TestExportWhileRunningAndAfterACrash(t *testing.T) {
	fano.Require(t)
	e := newEnv(t, chainPipeline, simConfig(40, 2), 80)
	var out bytes.Buffer
	run := e.cmd(context.Background(), "pipeline", "run", e.def, "--no-progress")
	run.Stdout, run.Stderr = &out, &out
	require.NoError(t, run.Start())
	exited := make(chan error, 1)
	go func() { exited <- run.Wait() }()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(90 * time.Second)
	var rows [][]string
	var stderr bytes.Buffer
wait:
	for {
		select {
		case <-tick.C:
			stderr.Reset()
			c := e.cmd(context.Background(), "pipeline", "export", e.def, "--format", "csv")
			c.Stderr = &stderr
			b, err := c.Output()
			if err != nil {
				continue
			}
			if rows, err = csv.NewReader(bytes.NewReader(b)).ReadAll(); err == nil && len(rows) > 3 {
				break wait
			}
		case err := <-exited:
			t.Fatalf("the run ended before an export while it ran: %v\n%s", err, out.String())
		case <-deadline:
			t.Fatalf("no export while running\n%s", out.String())
		}
	}
	assert.Contains(t, stderr.String(), "a run is going: results.jsonl as of ")
	header := strings.Join(rows[0], ",")
	assert.True(t, strings.HasPrefix(header, "key,status,"), header)
	assert.Contains(t, header, "steps.verdict.m1.confidence")
	assert.Contains(t, header, "steps.verdict.m2.verdict")
	require.NoError(t, run.Process.Kill())
	<-exited

	b, err := e.cmd(context.Background(), "pipeline", "export", e.def).Output()
	require.NoError(t, err)
	open, done := 0, 0
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r struct {
			Status string                     `json:"status"`
			Steps  map[string]json.RawMessage `json:"steps"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &r), l)
		switch r.Status {
		case "open":
			open++
			assert.Contains(t, r.Steps, "verdict", "an open item shows the step it has done: %s", l)
			assert.NotContains(t, r.Steps, "reason", l)
		case "done":
			done++
		}
	}
	assert.Positive(t, open, "the crash left items half done: %s", b)
	_, err = os.Stat(filepath.Join(e.data, "output", "results.jsonl"))
	require.NoError(t, err, "the run wrote its partial results as it went")
}
