package researcher_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/app"
	"fano/config"
	"fano/internal/fanotest"
	"fano/modules/researcher"
	"fano/wal"
)

// These tests run `fano run --until-idle` in process (app.Main), on a real
// data directory.

const runConfig = `
data_dir: %[1]s/data
backends:
  chatgpt: {type: sim, hourly_limit: 1000, sim: {seed: 1, style: chatgpt}}
  claude:  {type: sim, hourly_limit: 1000, sim: {seed: 3, style: claude}}
control: {enabled: false}
orchestrator:
  tasks:
    max_requests_per_task: {exploration: 1}
explorer:
  seeds_file: %[1]s/seeds.yaml
documenter: {enabled: false}
researcher: {enabled: true, sources_dir: %[2]s}
logging: {level: info, console: json}
`

func runFano(t *testing.T, dir, sources string) (app.Result, *wal.Log) {
	t.Helper()
	cfgPath := filepath.Join(dir, "fano.yaml")
	require.NoError(t, os.WriteFile(cfgPath, fmt.Appendf(nil, runConfig, dir, sources), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "seeds.yaml"), []byte("seeds:\n  - text: \"How many points has the Fano plane?\"\n"), 0o644))
	cfg, err := config.Load(cfgPath)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	m := app.NewMain(app.Options{Config: cfg, UntilIdle: true, Console: "off"})
	require.NoError(t, m.Open(ctx))
	runErr := m.Run(ctx)
	require.NoError(t, m.Close())
	require.NoError(t, runErr)
	require.Equal(t, "idle", m.Result().Reason, "the run ended idle, not by its deadline")
	log, err := wal.Open(filepath.Join(dir, "data", "fano.db"), wal.Options{LockTimeout: 5 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = log.Close() })
	return m.Result(), log
}

// The researcher turns a source file into an explorer seed: `fano run`
// evaluates, extracts and synthesizes the source, the finding's question
// reaches the explorer as a module message and becomes a seed (an
// explorer event in the WAL), and the finding is recorded delivered; replaying the researcher's WAL events rebuilds
// its state with the finding delivered.
func TestSourceFileBecomesSeed(t *testing.T) {
	dir := t.TempDir()
	sources := filepath.Join(dir, "sources")
	require.NoError(t, os.Mkdir(sources, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(sources, "hamming.md"),
		[]byte("# Hamming code\n\nThe Hamming code of length 7 is built from the Fano plane: its codewords of weight 3 are the lines."), 0o644))
	_, log := runFano(t, dir, sources)

	srcs, _, err := researcher.LoadSources(sources)
	require.NoError(t, err)
	m, err := researcher.New(researcher.Config{Sources: srcs})
	require.NoError(t, err)
	for _, e := range fanotest.Events(t, log, "module/"+researcher.Name) {
		require.NoError(t, m.Apply(e.GetModuleEvent(), time.Unix(0, e.At)))
	}
	fs := m.Findings()
	require.Len(t, fs, 1, "one finding from the source")
	assert.True(t, fs[0].Delivered)
	assert.Equal(t, srcs[0].ID, fs[0].From)

	var seeds []string
	for _, e := range fanotest.Events(t, log, "module/explorer") {
		if me := e.GetModuleEvent(); me.Type == "seed_added" {
			var d struct{ Text string }
			require.NoError(t, json.Unmarshal(me.Data, &d))
			seeds = append(seeds, d.Text)
		}
	}
	assert.Contains(t, seeds, strings.TrimSpace(fs[0].Question), "the finding's question is an explorer seed")
}

// Bad input: a missing sources directory is logged as an error naming it
// and fano runs on — the explorer still explores its seeds.
func TestMissingSourcesDirAffectsNothingElse(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "no-such-dir")
	res, log := runFano(t, dir, missing)
	assert.Positive(t, res.Completed, "the run ended with its work done")
	logText, err := os.ReadFile(filepath.Join(dir, "data", "logs", "fano.log"))
	require.NoError(t, err)
	assert.Contains(t, string(logText), "modules.researcher.source_problem")
	assert.Contains(t, string(logText), missing)
	threads := 0
	for _, e := range fanotest.Events(t, log, "module/explorer") {
		if e.GetModuleEvent().Type == "thread_started" {
			threads++
		}
	}
	assert.Positive(t, threads, "the explorer ran")
}
