// Package e2e runs real `fano pipeline` subprocesses: SIGKILL and resume,
// bad input, the maintenance commands, and the throughput benchmark.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"fano/internal/fanotest"
	"fano/pb"
	"fano/wal"
)

var fano fanotest.Binary

func TestMain(m *testing.M) { fanotest.Main(m, &fano) }

// simConfig: three simulated models slow enough that requests are in
// flight when the test kills fano.
func simConfig(latencyMS, conc int) string {
	return fmt.Sprintf(`
backends:
  m1: {type: sim, hourly_limit: 1000000, max_concurrency: %[2]d, sim: {seed: 1, style: api, latency_ms: %[1]d}}
  m2: {type: sim, hourly_limit: 1000000, max_concurrency: %[2]d, sim: {seed: 2, style: api, latency_ms: %[1]d}}
  m3: {type: sim, hourly_limit: 1000000, max_concurrency: %[2]d, sim: {seed: 3, style: api, latency_ms: %[1]d}}
explorer: {enabled: false}
documenter: {enabled: false}
researcher: {enabled: false}
control: {enabled: false}
logging: {level: info, console: json}
`, latencyMS, conc)
}

const verdictPipeline = `
name: verdicts
items: {source: items.jsonl, key: id}
models: [m1, m2, m3]
steps:
  - name: verdict
    llm:
      prompt: 'Is this claim true? {{.item.claim}}'
      schema: {type: object, required: [verdict, confidence], properties: {verdict: {type: boolean}, confidence: {type: number, minimum: 0, maximum: 1}}}
`

type env struct {
	dir, cfg, def, data string
}

func newEnv(t *testing.T, pipelineYAML, fanoYAML string, items int) env {
	t.Helper()
	dir := t.TempDir()
	e := env{dir: dir, cfg: filepath.Join(dir, "fano.yaml"), def: filepath.Join(dir, "p.yaml"), data: filepath.Join(dir, "run")}
	require.NoError(t, os.WriteFile(e.cfg, []byte(fanoYAML), 0o644))
	require.NoError(t, os.WriteFile(e.def, []byte(pipelineYAML), 0o644))
	var b strings.Builder
	for i := range items {
		fmt.Fprintf(&b, `{"id": "c%05d", "claim": "claim number %d"}`+"\n", i, i)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "items.jsonl"), []byte(b.String()), 0o644))
	return e
}

func (e env) cmd(ctx context.Context, args ...string) *exec.Cmd {
	return e.cmdOf(ctx, fano.Path, args...)
}

// cmdOf is cmd with another fano binary.
func (e env) cmdOf(ctx context.Context, bin string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, bin, append([]string{"--config", e.cfg, "--data-dir", e.data}, args...)...)
}

// walPipeline reads the pipeline module's events and the request intents
// from a run directory's WAL.
type walPipeline struct {
	lastSeq  uint64
	okAt     map[string]uint64 // task id -> seq of its answer_ok
	okCount  map[string]int
	requests map[string][]uint64 // task id -> seqs of its LLM requests
}

func readRun(t *testing.T, data string) walPipeline {
	t.Helper()
	log, err := wal.Open(filepath.Join(data, "fano.db"), wal.Options{LockTimeout: time.Second})
	require.NoError(t, err)
	defer log.Close()
	w := walPipeline{okAt: map[string]uint64{}, okCount: map[string]int{}, requests: map[string][]uint64{}}
	require.NoError(t, log.Replay(1, func(ent wal.Entry) error {
		w.lastSeq = ent.Seq
		if ent.Owner != "scheduler" && ent.Owner != "module/pipeline" {
			return nil
		}
		var ev pb.Event
		if err := proto.Unmarshal(ent.Payload, &ev); err != nil {
			return nil // not an event (archives, effects)
		}
		if me := ev.GetModuleEvent(); me != nil && me.Type == "answer_ok" {
			w.okCount[me.TaskId]++
			w.okAt[me.TaskId] = ent.Seq
		}
		if r := ev.GetLlmRequestStarted(); r != nil {
			w.requests[r.TaskId] = append(w.requests[r.TaskId], ent.Seq)
		}
		return nil
	}))
	return w
}

type progress struct {
	Done  int `json:"items_finished"`
	Total int `json:"items"`
}

// A `fano pipeline run` killed with SIGKILL mid-run resumes: no finished
// (item, model) pair is asked again, every pair has exactly one result,
// and results.jsonl holds every item with a verdict from every model.
func TestSIGKILLMidRunResumesWithoutRedoingFinishedPairs(t *testing.T) {
	fano.Require(t)
	const items = 150
	e := newEnv(t, verdictPipeline, simConfig(60, 4), items)

	var out bytes.Buffer
	run := e.cmd(context.Background(), "pipeline", "run", e.def, "--no-progress")
	run.Stdout, run.Stderr = &out, &out
	require.NoError(t, run.Start())
	exited := make(chan error, 1)
	go func() { exited <- run.Wait() }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(90 * time.Second)
wait:
	for {
		select {
		case <-tick.C:
			var p progress
			if b, err := os.ReadFile(filepath.Join(e.data, "progress.json")); err == nil && json.Unmarshal(b, &p) == nil && p.Done >= 5 {
				break wait
			}
		case err := <-exited:
			t.Fatalf("fano pipeline run ended before the kill: %v\n%s", err, out.String())
		case <-deadline:
			t.Fatalf("no progress within the deadline\n%s", out.String())
		}
	}
	require.NoError(t, run.Process.Kill())
	<-exited

	before := readRun(t, e.data)
	require.NotEmpty(t, before.okAt, "answers were saved before the kill")
	require.Less(t, len(before.okAt), items*3, "the kill came mid-run")
	t.Logf("at the kill: %d of %d pairs done", len(before.okAt), items*3)

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	// After the kill, export renders the results so far from the WAL.
	partial, err := e.cmd(ctx, "pipeline", "export", e.def).Output()
	require.NoError(t, err, "%s", partial)
	for _, l := range strings.Split(strings.TrimSpace(string(partial)), "\n") {
		assert.Regexp(t, `"status":"(done|open)"`, l)
	}
	again, err := e.cmd(ctx, "pipeline", "run", e.def, "--json").Output()
	require.NoError(t, err, "%s", again)
	var sum struct {
		ItemsDone int `json:"items_done"`
	}
	require.NoError(t, json.Unmarshal(again, &sum), "%s", again)
	assert.Equal(t, items, sum.ItemsDone)
	assert.True(t, fanotest.LogHas(filepath.Join(e.data, "logs", "fano.log"), "modules.pipeline.stopped", `"reason":"finished"`),
		"the run ended on its last item, not on idle ticks")
	assert.False(t, fanotest.LogHas(filepath.Join(e.data, "logs", "fano.log"), "health.monitor.queue_depth"),
		"the tasks a pipeline queues ahead by design are no health problem")

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

	res, err := os.ReadFile(filepath.Join(e.data, "output", "results.jsonl"))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(res)), "\n")
	require.Len(t, lines, items)
	for _, l := range lines {
		var r struct {
			Steps struct {
				Verdict map[string]map[string]any `json:"verdict"`
			} `json:"steps"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &r))
		assert.Len(t, r.Steps.Verdict, 3, l)
	}

	// verify agrees with the files; a damaged results file is found and
	// repaired from the state.
	v, err := e.cmd(ctx, "pipeline", "verify", e.def).CombinedOutput()
	require.NoError(t, err, "%s", v)
	require.NoError(t, os.WriteFile(filepath.Join(e.data, "output", "results.jsonl"), []byte("junk\n"), 0o644))
	v, err = e.cmd(ctx, "pipeline", "verify", e.def).CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(v), "output_stale output/results.jsonl")
	v, err = e.cmd(ctx, "pipeline", "repair", e.def).CombinedOutput()
	require.NoError(t, err, "%s", v)
	fixed, err := os.ReadFile(filepath.Join(e.data, "output", "results.jsonl"))
	require.NoError(t, err)
	assert.Equal(t, string(res), string(fixed))
}

// A bad pipeline file: one line per problem with file:line, a non-zero
// exit, and no run directory created.
func TestBadPipelineFileWritesNothing(t *testing.T) {
	fano.Require(t)
	bad := verdictPipeline + `
  - name: summary
    needs: [nope]
    llm: {prompt: '{{.steps.verdict', model: m9}
`
	e := newEnv(t, bad, simConfig(0, 1), 3)
	for _, sub := range []string{"validate", "run"} {
		out, err := e.cmd(context.Background(), "pipeline", sub, e.def).CombinedOutput()
		require.Error(t, err, sub)
		assert.Contains(t, string(out), e.def+":12: step summary needs \"nope\"", sub)
		assert.Contains(t, string(out), e.def+":13: step summary: prompt: unclosed action", sub)
		assert.NoDirExists(t, e.data, sub)
	}
	// A model the fano config does not have: its step's line.
	e2 := newEnv(t, strings.Replace(verdictPipeline, "[m1, m2, m3]", "[m1, gpt9]", 1), simConfig(0, 1), 3)
	out, err := e2.cmd(context.Background(), "pipeline", "run", e2.def).CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), e2.def+`:6: step verdict: model "gpt9" is not an enabled backend`)
	assert.NoDirExists(t, e2.data)
}
