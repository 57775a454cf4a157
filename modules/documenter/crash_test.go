package documenter

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"google.golang.org/protobuf/proto"

	"fano/internal/fanotest"
	"fano/modules/dedup"
	"fano/pb"
	"fano/wal"
)

// fano is the binary the subprocess tests run.
var fano fanotest.Binary

func TestMain(m *testing.M) { fanotest.Main(m, &fano) }

const crashConfig = `
data_dir: %[1]s/data
backends:
  chatgpt: {type: sim, hourly_limit: 1000, deep_mode_daily_limit: 100, sim: {seed: 1, style: chatgpt, latency_ms: 100, latency_jitter_ms: 50}}
  gemini:  {type: sim, hourly_limit: 1000, deep_mode_daily_limit: 100, sim: {seed: 2, style: gemini, latency_ms: 100, latency_jitter_ms: 50}}
  claude:  {type: sim, hourly_limit: 1000, deep_mode_daily_limit: 100, sim: {seed: 3, style: claude, latency_ms: 100, latency_jitter_ms: 50}}
control: {enabled: false}
orchestrator:
  tasks:
    max_requests_per_task: {exploration: 2}
explorer:
  seeds_file: %[1]s/seeds.yaml
  consensus: {min_bless: 1, max_reject: 3}
documenter: {enabled: true, title: "Crash Test Planes"}
researcher: {enabled: false}
logging: {level: info, console: json}
`

const crashSeeds = `
seeds:
  - text: "What is the automorphism group of the Fano plane?"
  - text: "Why is there no projective plane of order 6?"
`

// A `fano run` killed with SIGKILL right after a section draft was
// recorded (before its exposition evaluation and incorporation) resumes:
// afterwards DOCUMENT.md on disk is exactly what the recovered state
// renders, and every insight is incorporated at most once.
func TestCrashBetweenDraftAndIncorporation(t *testing.T) {
	fanoBin := fano.Require(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "fano.yaml")
	require.NoError(t, os.WriteFile(cfgPath, fmt.Appendf(nil, crashConfig, dir), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "seeds.yaml"), []byte(crashSeeds), 0o644))
	data := filepath.Join(dir, "data")
	logFile := filepath.Join(data, "logs", "fano.log")

	var out bytes.Buffer
	run := exec.Command(fanoBin, "--config", cfgPath, "run")
	run.Stdout, run.Stderr = &out, &out
	require.NoError(t, run.Start())
	exited := make(chan error, 1)
	go func() { exited <- run.Wait() }()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(90 * time.Second)
wait:
	for {
		select {
		case <-tick.C:
			if fanotest.LogHas(logFile, "modules.documenter.drafted") {
				break wait
			}
		case err := <-exited:
			t.Fatalf("fano run ended before any draft: %v\n%s", err, out.String())
		case <-deadline:
			t.Fatalf("no draft within the deadline\n%s", out.String())
		}
	}
	require.NoError(t, run.Process.Kill())
	<-exited

	// At the kill, some draft awaited its incorporation (logged, not
	// required: the timing is the OS's).
	log, err := wal.Open(filepath.Join(data, "fano.db"), wal.Options{LockTimeout: 5 * time.Second})
	require.NoError(t, err)
	mid := recovered(t, log)
	require.NoError(t, log.Close())
	waiting := 0
	for _, o := range mid.Opportunities() {
		if o.Status == StatusExposition {
			waiting++
		}
	}
	t.Logf("drafts awaiting incorporation at the kill: %d", waiting)

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	again, err := exec.CommandContext(ctx, fanoBin, "--config", cfgPath, "run", "--until-idle").CombinedOutput()
	require.NoError(t, err, "%s", again)
	assert.Contains(t, string(again), "no work left")

	log, err = wal.Open(filepath.Join(data, "fano.db"), wal.Options{LockTimeout: 5 * time.Second})
	require.NoError(t, err)
	defer log.Close()
	m := recovered(t, log)
	assert.NotEmpty(t, m.SectionIDs(), "sections were written")
	assert.Empty(t, m.Verify(), "each insight incorporated at most once")
	incorporated := map[string]int{}
	for _, e := range fanotest.Events(t, log, "module/"+Name) {
		if me := e.GetModuleEvent(); me.Type == evIncorporated {
			d, err := decode[incorporatedData](me)
			require.NoError(t, err)
			incorporated[d.Insight]++
		}
	}
	for id, n := range incorporated {
		assert.Equal(t, 1, n, "insight %s incorporated %d times in the WAL", id, n)
	}
	for _, o := range m.Opportunities() {
		assert.NotContains(t, []string{StatusEvaluating, StatusDrafting, StatusExposition}, o.Status, o.Insight)
	}
	disk, err := os.ReadFile(filepath.Join(data, "output", DocumentMD))
	require.NoError(t, err)
	assert.Equal(t, m.DocumentMarkdown(), string(disk), "DOCUMENT.md is what the state renders")
	js, err := os.ReadFile(filepath.Join(data, "output", DocumentJSON))
	require.NoError(t, err)
	var f DocumentFile
	require.NoError(t, json.Unmarshal(js, &f))
	assert.Len(t, f.Sections, len(m.SectionIDs()))
}

// recovered rebuilds the documenter as recovery does: checkpoint, then
// the module's later WAL entries.
func recovered(t *testing.T, log *wal.Log) *Module {
	t.Helper()
	m, err := New(Config{Title: "Crash Test Planes", Backends: []string{"chatgpt", "claude", "gemini"}, Checker: dedup.New(dedup.Config{})})
	require.NoError(t, err)
	cp, ok, err := log.LoadCheckpoint("module/" + Name)
	require.NoError(t, err)
	from := uint64(1)
	if ok {
		require.NoError(t, m.Restore(cp.Snapshot))
		from = cp.Seq + 1
	}
	require.NoError(t, log.Replay(from, func(ent wal.Entry) error {
		if ent.Owner != "module/"+Name {
			return nil
		}
		var e pb.Event
		if err := proto.Unmarshal(ent.Payload, &e); err != nil {
			return err
		}
		return m.Apply(e.GetModuleEvent(), time.Unix(0, e.At))
	}))
	return m
}
