package explorer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/actors/scheduler"
	"fano/internal/fanotest"
	"fano/pb"
	"fano/wal"
)

// fano is the binary the subprocess tests run.
var fano fanotest.Binary

func TestMain(m *testing.M) { fanotest.Main(m, &fano) }

const crashConfig = `
data_dir: %[1]s/data
backends:
  chatgpt: {type: sim, hourly_limit: 1000, deep_mode_daily_limit: 100, sim: {seed: 1, style: chatgpt, latency_ms: 120, latency_jitter_ms: 60}}
  gemini:  {type: sim, hourly_limit: 1000, deep_mode_daily_limit: 100, sim: {seed: 2, style: gemini, latency_ms: 120, latency_jitter_ms: 60}}
  claude:  {type: sim, hourly_limit: 1000, deep_mode_daily_limit: 100, sim: {seed: 3, style: claude, latency_ms: 120, latency_jitter_ms: 60}}
control: {enabled: false}
orchestrator:
  tasks:
    max_requests_per_task: {exploration: 2}
explorer:
  seeds_file: %[1]s/seeds.yaml
documenter: {enabled: false}
researcher: {enabled: false}
logging: {level: info, console: json}
`

const crashSeeds = `
seeds:
  - text: "What is the automorphism group of the Fano plane?"
  - text: "Why is there no projective plane of order 6?"
  - text: "How is the Fano plane related to the Hamming code?"
`

// A `fano run` killed with SIGKILL while insights are under review
// resumes without a second review task or a second verdict of any
// reviewer: review tasks are keyed by (insight, round, reviewer), a
// resumed reviewer whose verdict is in the WAL asks nothing, and applying
// a verdict twice changes nothing.
func TestCrashDuringReviewResumesWithoutDuplicateReviews(t *testing.T) {
	fanoBin := fano.Require(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "fano.yaml")
	require.NoError(t, os.WriteFile(cfgPath, fmt.Appendf(nil, crashConfig, dir), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "seeds.yaml"), []byte(crashSeeds), 0o644))
	data := filepath.Join(dir, "data")
	logFile := filepath.Join(data, "logs", "fano.log")

	// 1. Run until a reviewer has started (the log names each explorer
	// task as an LLM takes it), then SIGKILL while its request is out.
	var out bytes.Buffer
	run := exec.Command(fanoBin, "--config", cfgPath, "run")
	run.Stdout, run.Stderr = &out, &out
	require.NoError(t, run.Start())
	exited := make(chan error, 1)
	go func() { exited <- run.Wait() }()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(60 * time.Second)
wait:
	for {
		select {
		case <-tick.C:
			if fanotest.LogHas(logFile, "modules.explorer.task_started", "/"+TypeReview+"/") {
				break wait
			}
		case err := <-exited:
			t.Fatalf("fano run ended before any review: %v\n%s", err, out.String())
		case <-deadline:
			t.Fatalf("no review recorded within the deadline\n%s", out.String())
		}
	}
	require.NoError(t, run.Process.Kill())
	<-exited

	// Reviews were in flight at the kill.
	inFlight := runningTasks(t, data)
	t.Logf("running at the kill: %v", inFlight)
	assert.True(t, slices.ContainsFunc(inFlight, func(id string) bool { return strings.Contains(id, "/"+TypeReview+"/") }),
		"a review was in flight at the kill: %v", inFlight)

	// 2. Run again until no work is left.
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	again, err := exec.CommandContext(ctx, fanoBin, "--config", cfgPath, "run", "--until-idle").CombinedOutput()
	require.NoError(t, err, "%s", again)
	assert.Contains(t, string(again), "no work left")

	// 3. fano recover finds nothing to repair and no unfinished task.
	recOut, err := exec.Command(fanoBin, "--config", cfgPath, "recover", "--json").Output()
	require.NoError(t, err)
	var rep struct {
		TasksPaused int            `json:"tasks_paused"`
		Problems    []string       `json:"problems"`
		TaskStates  map[string]int `json:"task_states"`
	}
	require.NoError(t, json.Unmarshal(recOut, &rep), "%s", recOut)
	assert.Zero(t, rep.TasksPaused)
	assert.Empty(t, rep.Problems)
	for st, n := range rep.TaskStates {
		assert.Contains(t, []string{"COMPLETED", "FAILED", "CANCELLED"}, st, "%d tasks %s", n, st)
	}

	// 4. The WAL: each task submitted once, each (insight, round,
	// reviewer) verdict logged once, and the rebuilt state agrees.
	log, err := wal.Open(filepath.Join(data, "fano.db"), wal.Options{LockTimeout: time.Second})
	require.NoError(t, err)
	defer log.Close()
	submitted := map[string]int{}
	for _, e := range fanotest.Events(t, log, "scheduler") {
		if s := e.GetTaskSubmitted(); s != nil {
			submitted[s.Task.Id]++
		}
	}
	reviewTasks := 0
	for id, n := range submitted {
		assert.Equal(t, 1, n, "task %s submitted %d times", id, n)
		if strings.Contains(id, "/"+TypeReview+"/") {
			reviewTasks++
		}
	}
	verdicts := map[string]int{}
	for _, e := range fanotest.Events(t, log, "module/"+Name) {
		if me := e.GetModuleEvent(); me.Type == evReview {
			d, err := decode[reviewData](me)
			require.NoError(t, err)
			verdicts[fmt.Sprintf("%s/r%d/%s", d.Insight, d.Round, d.Reviewer)]++
		}
	}
	for k, n := range verdicts {
		assert.Equal(t, 1, n, "verdict %s logged %d times", k, n)
	}
	assert.Equal(t, reviewTasks, len(verdicts), "one verdict per review task")

	m := recoverModule(t, log)
	decided := 0
	for _, ins := range m.Insights() {
		assert.NotContains(t, []string{StatusPending, StatusDedupCheck}, ins.Status, ins.ID)
		seen := map[string]bool{}
		for _, r := range ins.Reviews {
			k := fmt.Sprintf("r%d/%s", r.Round, r.Reviewer)
			assert.False(t, seen[k], "insight %s has two verdicts of %s", ins.ID, k)
			seen[k] = true
		}
		if len(ins.Reviews) > 0 {
			decided++
		}
	}
	assert.Positive(t, decided)
	assert.Empty(t, m.Verify())
	for _, ins := range m.Blessed() {
		_, err := os.Stat(filepath.Join(data, "output", "blessed", ins.ID+".json"))
		assert.NoError(t, err, "output file of %s", ins.ID)
	}
}

// runningTasks replays the scheduler's events of a stopped data dir and
// lists the tasks that were running.
func runningTasks(t *testing.T, data string) []string {
	t.Helper()
	log, err := wal.Open(filepath.Join(data, "fano.db"), wal.Options{LockTimeout: 5 * time.Second})
	require.NoError(t, err)
	defer log.Close()
	st := scheduler.New(scheduler.Config{})
	for _, e := range fanotest.Events(t, log, "scheduler") {
		_ = st.Apply(e)
	}
	var out []string
	for _, tk := range st.Tasks(func(tk *pb.Task) bool { return tk.State == pb.TaskState_TASK_STATE_RUNNING }, 0) {
		out = append(out, tk.Id)
	}
	return out
}

// recoverModule rebuilds the explorer as recovery does: checkpoint, then
// the module's later WAL entries.
func recoverModule(t *testing.T, log *wal.Log) *Module {
	t.Helper()
	m, err := New(Config{Backends: []string{"chatgpt", "claude", "gemini"}})
	require.NoError(t, err)
	cp, ok, err := log.LoadCheckpoint("module/" + Name)
	require.NoError(t, err)
	from := int64(0)
	if ok {
		require.NoError(t, m.Restore(cp.Snapshot))
		from = int64(cp.Seq)
	}
	require.NoError(t, log.Replay(uint64(from+1), func(ent wal.Entry) error {
		if ent.Owner != "module/"+Name {
			return nil
		}
		es := walEventsOf(t, ent)
		return m.Apply(es.GetModuleEvent(), time.Unix(0, es.At))
	}))
	return m
}
