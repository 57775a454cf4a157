package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// killMidRun starts `fano pipeline run` and kills it with SIGKILL once
// at least n items are finished; it returns the run's output so far.
func killMidRun(t *testing.T, e env, n int, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	run := e.cmd(context.Background(), append([]string{"pipeline", "run", e.def, "--no-progress"}, args...)...)
	run.Stdout, run.Stderr = &out, &out
	require.NoError(t, run.Start())
	exited := make(chan error, 1)
	go func() { exited <- run.Wait() }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(90 * time.Second)
	for {
		select {
		case <-tick.C:
			var p progress
			if b, err := os.ReadFile(filepath.Join(e.data, "progress.json")); err == nil && json.Unmarshal(b, &p) == nil && p.Done >= n {
				require.NoError(t, run.Process.Kill())
				<-exited
				return out.String()
			}
		case err := <-exited:
			t.Fatalf("fano pipeline run ended before the kill: %v\n%s", err, out.String())
		case <-deadline:
			t.Fatalf("no progress within the deadline\n%s", out.String())
		}
	}
}

// exitCode is a finished command's exit status (0 for no error); any
// other error fails the test.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	return exit.ExitCode()
}

// bare runs fano with only the run directory: no --config.
func bare(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, fano.Path, args...)
}

// A run killed mid-way is recovered by `fano recover` from its run
// directory alone (no --config): its tasks are paused to resume, not
// parked as orphans. verify and status read it with the pipeline's own
// backends. A run directory whose definition is gone is refused by
// recovery, naming the module and why, without a write. The run then
// finishes from the run directory alone, every pair asked once and no
// pair finished before the kill asked again.
func TestRecoverAHalfDoneRunThenItFinishes(t *testing.T) {
	fano.Require(t)
	const items = 60
	e := newEnv(t, verdictPipeline, simConfig(60, 4), items)
	killMidRun(t, e, 5)
	before := readRun(t, e.data)
	require.Less(t, len(before.okAt), items*3, "the kill came mid-run")

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	// The definition is gone: recovery refuses, names why, writes nothing.
	snap := filepath.Join(e.data, "pipeline.yaml")
	require.NoError(t, os.Rename(snap, snap+".away"))
	out, err := bare(ctx, "recover", "--data-dir", e.data).CombinedOutput()
	require.Error(t, err, "%s", out)
	assert.Contains(t, string(out), `unfinished tasks of module "pipeline", which cannot be built`)
	assert.Contains(t, string(out), "pipeline.yaml")
	assert.Equal(t, before.lastSeq, readRun(t, e.data).lastSeq, "a refused recovery writes nothing")
	require.NoError(t, os.Rename(snap+".away", snap))

	out, err = bare(ctx, "recover", "--data-dir", e.data, "--json").Output()
	require.NoError(t, err, "%s", out)
	var rep struct {
		Repairs       []string `json:"repairs"`
		TasksToResume int      `json:"tasks_to_resume"`
	}
	require.NoError(t, json.Unmarshal(out, &rep), "%s", out)
	for _, r := range rep.Repairs {
		assert.NotContains(t, r, "unknown module", "no task is parked as an orphan")
	}
	assert.Positive(t, rep.TasksToResume)

	// A killed run's output files are missing or behind its state (it
	// rewrites them as it goes): verify says so (and only that), repair
	// writes them from the state.
	out, err = bare(ctx, "verify", "--data-dir", e.data).CombinedOutput()
	require.Error(t, err, "%s", out)
	assert.Contains(t, string(out), "modules pipeline")
	assert.Regexp(t, `output/(results.jsonl|failures.jsonl|summary.json) (is missing|differs from the state)`, string(out))
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "  ") && !strings.HasPrefix(l, "      ") && !strings.HasPrefix(l, "  note: ") {
			assert.Regexp(t, `^  output_(missing|stale) `, l, "only the output files are behind")
		}
	}
	out, err = bare(ctx, "repair", "--data-dir", e.data, "--yes").CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = bare(ctx, "verify", "--data-dir", e.data).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "clean")
	out, err = bare(ctx, "status", "--data-dir", e.data).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "m1", "the run's own backends, not the demo's")

	out, err = bare(ctx, "pipeline", "run", e.data, "--json").Output()
	require.NoError(t, err, "%s", out)
	var sum struct {
		ItemsDone int `json:"items_done"`
	}
	require.NoError(t, json.Unmarshal(out, &sum), "stdout is one JSON document: %s", out)
	assert.Equal(t, items, sum.ItemsDone)

	after := readRun(t, e.data)
	assert.Len(t, after.okAt, items*3, "every (item, model) pair has a result")
	for id, n := range after.okCount {
		assert.Equal(t, 1, n, "pair %s answered once", id)
	}
	for id := range before.okAt {
		for _, seq := range after.requests[id] {
			assert.LessOrEqual(t, seq, before.lastSeq, "pair %s was finished before the kill and asked again after it", id)
		}
	}
}
