package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/control"
	"fano/wal"
)

// What a newcomer meets first: version, help, status and tasks with fano
// running and stopped, and the demo run twice.

// probeConfig runs the probe (five questions, three turns each) on one sim
// backend answering in latencyMS, its panel on address.
func probeConfig(dataDir, address string, latencyMS int) string {
	return fmt.Sprintf(`
data_dir: %s
backends:
  sima: {type: sim, hourly_limit: 1000, sim: {seed: 1, latency_ms: %d}}
explorer: {enabled: false}
documenter: {enabled: false}
researcher: {enabled: false}
control: {address: %q}
orchestrator:
  scheduler: {tick_interval_ms: 20}
logging: {level: debug, console: json}
`, dataDir, latencyMS, address)
}

func TestVersionOfBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Path: "fano", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-11-23T20:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		}}
	v := versionOf(bi, "")
	assert.Equal(t, "v1.2.3", v.Version)
	assert.Equal(t, "0123456789abcdef0123456789abcdef01234567", v.Revision)
	require.NotNil(t, v.Time)
	assert.Equal(t, time.Date(2026, 11, 23, 20, 0, 0, 0, time.UTC), *v.Time)
	assert.True(t, v.Modified)
	assert.Equal(t, "go1.99.1", v.GoVersion)
	var out strings.Builder
	require.NoError(t, printVersion(&out, v))
	assert.Equal(t, "fano v1.2.3 (commit 0123456789ab, 2026-11-23 20:00 UTC, with uncommitted changes) go1.99.1\n", out.String())

	assert.Equal(t, "v9", versionOf(bi, "v9").Version, "-ldflags -X main.version wins")
	bi.Main.Version, bi.Settings = "", nil
	v = versionOf(bi, "")
	assert.Equal(t, "(devel)", v.Version)
	assert.Empty(t, v.Revision)
	assert.False(t, v.Modified)
	out.Reset()
	require.NoError(t, printVersion(&out, v))
	assert.Equal(t, "fano (devel) (no version control information) go1.99.1\n", out.String())
}

func TestVersionCommand(t *testing.T) {
	out, errOut, err := runQuick(t, "version")
	require.NoError(t, err, errOut)
	assert.True(t, strings.HasPrefix(out, "fano "), out)
	assert.True(t, strings.HasSuffix(out, " "+runtime.Version()+"\n"), out)
	assert.NotContains(t, out, "dev\n")

	out, errOut, err = runQuick(t, "version", "--json")
	require.NoError(t, err, errOut)
	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &v), out)
	assert.Equal(t, runtime.Version(), v["go_version"])
	assert.NotEmpty(t, v["version"])
	assert.Contains(t, v, "modified")
}

// Help speaks to the user: every command says what it does, and no text
// a user reads points into the specification.
func TestHelpTextsSpeakToTheUser(t *testing.T) {
	spec := regexp.MustCompile(`§|\bspec\b|\bspecification\b|issue \d`)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		name := c.CommandPath()
		assert.NotEmpty(t, c.Short, "%s has no short help", name)
		assert.NotRegexp(t, spec, c.Short, name)
		assert.NotRegexp(t, spec, c.Long, name)
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			assert.NotRegexp(t, spec, f.Usage, "%s --%s", name, f.Name)
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	root := newRoot(os.Stdout, os.Stderr)
	walk(root)
	_, out, _ := cli("--help")
	assert.Contains(t, out, "fano run --until-idle", "the root help says how to start")
}

// The JSON of `fano status` has one shape: running (from the panel) and
// stopped (from the data directory) have the same keys, but for what only
// one of them can know. Stopped, `fano tasks` says it read the disk, and
// mentions tasks cut off only when one was RUNNING; lists say how many
// tasks there are beyond those shown.
func TestStatusAndTasksRunningAndStopped(t *testing.T) {
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	cfg := writeConfig(t, dir, probeConfig(dataDir, "127.0.0.1:0", 60_000))
	r := startFano(t, cfg, dataDir, true) // a request hangs: its task is RUNNING

	out, errOut, err := runQuick(t, "status", "--json", "--config", cfg)
	require.NoError(t, err, errOut)
	var live map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &live), out)
	assert.Equal(t, true, live["running"])
	assert.Equal(t, "running", live["state"])

	out, errOut, err = runQuick(t, "tasks", "--config", cfg, "--limit", "2")
	require.NoError(t, err, errOut)
	assert.Contains(t, out, "2 of 5 (use --limit or --state)\n")
	out, errOut, err = runQuick(t, "tasks", "--config", cfg, "--limit", "0")
	require.NoError(t, err, errOut)
	assert.Len(t, strings.Split(strings.TrimSpace(out), "\n"), 6, "a header and all five tasks, no note:\n%s", out)
	out, _, err = runQuick(t, "tasks", "--json", "--config", cfg, "--limit", "1")
	require.NoError(t, err)
	var rep tasksReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	assert.Equal(t, 5, rep.Total)
	assert.Len(t, rep.Tasks, 1)

	// Killed mid-request: the task stays RUNNING in the data directory.
	require.NoError(t, r.cmd.Process.Signal(syscall.SIGKILL))
	<-r.done
	_ = os.Remove(filepath.Join(dataDir, control.AddrFile)) // a crash leaves it; no panel answers there

	out, errOut, err = runQuick(t, "status", "--json", "--config", cfg)
	require.NoError(t, err, errOut)
	var off map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &off), out)
	assert.Equal(t, false, off["running"])
	assert.Equal(t, "stopped", off["state"])
	liveKeys := slices.Sorted(maps.Keys(live))
	offKeys := slices.Sorted(maps.Keys(off))
	assert.Equal(t, without(liveKeys, "started_at", "uptime"), without(offKeys, "recovery", "message"),
		"one schema: live %v, stopped %v", liveKeys, offKeys)
	assert.Equal(t, slices.Sorted(maps.Keys(live["tasks"].(map[string]any))), slices.Sorted(maps.Keys(off["tasks"].(map[string]any))))
	assert.Equal(t, float64(1), off["tasks"].(map[string]any)["running"], "counted from the data directory")
	require.Contains(t, off["llms"], "sima")
	backends := off["backends"].([]any)
	require.Len(t, backends, 1)
	assert.Equal(t, "sima", backends[0].(map[string]any)["name"])
	assert.Greater(t, backends[0].(map[string]any)["hourly_used"], float64(0), "quota used, from the data directory")
	assert.Equal(t, float64(1), off["recovery"].(map[string]any)["tasks_paused"], "the next start pauses the cut-off task")

	readmeMatches(t, off)

	out, errOut, err = runQuick(t, "status", "--config", cfg)
	require.NoError(t, err, errOut)
	assert.Contains(t, out, "fano is not running (data dir "+dataDir+")")
	assert.Contains(t, out, "1 running")
	assert.Contains(t, out, "sima")
	assert.Contains(t, out, "next start: pauses and resumes 1 RUNNING tasks")

	out, errOut, err = runQuick(t, "tasks", "--config", cfg, "--limit", "2")
	require.NoError(t, err, errOut)
	assert.Contains(t, errOut, "fano is not running: tasks as recorded in "+dataDir)
	assert.Contains(t, errOut, "(1 RUNNING when fano stopped: the next start pauses and resumes it)")
	assert.Contains(t, out, "2 of 5 (use --limit or --state)\n")
	out, _, err = runQuick(t, "tasks", "--config", cfg, "--limit", "0")
	require.NoError(t, err)
	assert.Len(t, strings.Split(strings.TrimSpace(out), "\n"), 6, "all five, no note:\n%s", out)
	_, errOut, err = runQuick(t, "tasks", "--config", cfg, "--limit", "-1")
	require.Error(t, err)
	assert.Contains(t, errOut, "--limit: must be from 0 (all) to 10000 (is -1)")

	// Recovered (the task is PAUSED now): nothing was cut off.
	_, errOut, err = runQuick(t, "recover", "--config", cfg)
	require.NoError(t, err, errOut)
	_, errOut, err = runQuick(t, "tasks", "--config", cfg)
	require.NoError(t, err, errOut)
	assert.Contains(t, errOut, "fano is not running")
	assert.NotContains(t, errOut, "RUNNING")
}

// readmeMatches checks the pages' example of `fano status --json`
// (stopped; in README.md or docs/*.md, marked) against what the command
// printed: the same top-level keys, and every key the example shows
// exists in the output.
func readmeMatches(t *testing.T, got map[string]any) {
	t.Helper()
	const marker = "<!-- README example: fano status --json (stopped) -->\n```json\n"
	var block string
	found := 0
	for _, f := range docFiles(t) {
		text, err := os.ReadFile(f)
		require.NoError(t, err)
		if _, b, ok := strings.Cut(string(text), marker); ok {
			block = b
			found++
		}
	}
	require.Equal(t, 1, found, "README.md and docs/*.md: one %q", marker)
	var ok bool
	block, _, ok = strings.Cut(block, "\n```")
	require.True(t, ok)
	var example map[string]any
	require.NoError(t, json.Unmarshal([]byte(block), &example), "README example")
	assert.Equal(t, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(example)), "README: top-level keys")
	var sub func(path string, ex, out any)
	sub = func(path string, ex, out any) {
		switch e := ex.(type) {
		case map[string]any:
			o, ok := out.(map[string]any)
			if !assert.True(t, ok, "README: %s is an object, the output's is %T", path, out) {
				return
			}
			for k, v := range e {
				if _, in := o[k]; !in && (keyedByData(path) || path+"."+k == ".wal.oldest_checkpoint") {
					continue // names and states, not fields; or a field shown only when there is one
				}
				if assert.Contains(t, o, k, "README: %s.%s is not in the output", path, k) {
					sub(path+"."+k, v, o[k])
				}
			}
		case []any:
			o, ok := out.([]any)
			if assert.True(t, ok, "README: %s is a list, the output's is %T", path, out) && len(e) > 0 && len(o) > 0 {
				sub(path+"[0]", e[0], o[0])
			}
		}
	}
	sub("", example, got)
}

// keyedByData says whether the object at path is keyed by names or
// states (backends, modules, task states) rather than by fields.
func keyedByData(path string) bool {
	for _, p := range []string{".tasks.by_module", ".llms", ".recovery.checkpoints", ".recovery.task_states", ".modules[0].tasks", ".ops.metrics."} {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

func without(keys []string, drop ...string) []string {
	return slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return slices.Contains(drop, k) })
}

// Another fano answering on the panel address for another data directory
// is not a reason to refuse: --data-dir's data is read from disk, and the
// output says why.
func TestStatusAndTasksBesideAnotherFano(t *testing.T) {
	dir := t.TempDir()
	mine := filepath.Join(dir, "mine")
	mineCfg := filepath.Join(dir, "mine.yaml")
	require.NoError(t, os.WriteFile(mineCfg, []byte(probeConfig(mine, "127.0.0.1:0", 1)), 0o600))
	_, errOut, err := runQuick(t, "run", "--until-idle", "--config", mineCfg)
	require.NoError(t, err, errOut)

	other := filepath.Join(dir, "other")
	otherCfg := writeConfig(t, dir, probeConfig(other, "127.0.0.1:0", 60_000))
	startFano(t, otherCfg, other, false)
	addr, err := os.ReadFile(filepath.Join(other, control.AddrFile))
	require.NoError(t, err)
	address := strings.TrimSpace(string(addr))
	// My config names the other fano's address, as two fanos on the
	// default port would.
	require.NoError(t, os.WriteFile(mineCfg, []byte(probeConfig(mine, address, 1)), 0o600))

	out, errOut, err := runQuick(t, "tasks", "--config", mineCfg, "--data-dir", mine)
	require.NoError(t, err, errOut)
	assert.Contains(t, errOut, "tasks read from "+mine+" on disk (the fano answering at "+address+" runs on data dir "+other+", not this one)")
	assert.Contains(t, out, "COMPLETED")

	out, errOut, err = runQuick(t, "status", "--json", "--config", mineCfg, "--data-dir", mine)
	require.NoError(t, err, errOut)
	var st map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &st), out)
	assert.Equal(t, false, st["running"])
	assert.Equal(t, mine, st["data_dir"])
	assert.Equal(t, float64(5), st["tasks"].(map[string]any)["completed"])
	assert.Contains(t, st["message"], "runs on data dir "+other)

	out, errOut, err = runQuick(t, "status", "--config", mineCfg, "--data-dir", mine)
	require.NoError(t, err, errOut)
	assert.Contains(t, out, "status read from "+mine+" on disk")
	assert.Contains(t, out, "5 completed")

	_, errOut, err = runQuick(t, "cancel", "probe/x", "--config", mineCfg, "--data-dir", mine)
	require.Error(t, err)
	assert.Contains(t, errOut, "fano is not running on "+mine+" (the fano answering at "+address+" runs on data dir "+other+")")
}

// The demo twice: the second run says it continues the data directory,
// and a run that ends by itself does not need the panel's port.
func TestRunTwiceAndPanelPortInUse(t *testing.T) {
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	address := busy.Addr().String()
	cfg := writeConfig(t, dir, probeConfig(dataDir, address, 1))

	out, errOut, err := runQuick(t, "run", "--until-idle", "--config", cfg)
	require.NoError(t, err, errOut)
	assert.NotContains(t, out, "continuing", "a fresh data directory")
	assert.Contains(t, out, "fano: "+address+" (control.address) is in use")
	m := regexp.MustCompile(`takes the free port (127\.0\.0\.1:\d+) instead`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	assert.NotEqual(t, address, m[1])
	assert.Contains(t, out, "fano control panel: http://"+m[1]+"/")
	assert.Contains(t, out, "fano: no work left; 5 tasks completed (5 in this run)")
	assert.Contains(t, out, " status --config "+cfg+", ")

	out, errOut, err = runQuick(t, "run", "--until-idle", "--config", cfg)
	require.NoError(t, err, errOut)
	assert.Contains(t, out, "fano: continuing "+dataDir+": 5 tasks from earlier runs (5 completed); to start over, delete it or pass another --data-dir\n")
	assert.Contains(t, out, "fano: no work left; 5 tasks completed (0 in this run)")

	// A run that does not end by itself keeps to its address.
	_, errOut, err = runQuick(t, "run", "--config", cfg)
	require.Error(t, err)
	assert.Contains(t, errOut, address+" (control.address) is in use, by another fano or another program: stop it, or set control.address to a free port")
}

// A second fano on the same data directory names the directory and the
// pid holding it, and says what to do, before anything else: the first
// fano's panel holds control.address too, and that is not the reason.
// With --until-idle the refusal is the same line, ended, and nothing is
// printed before it. Nothing is written.
func TestRunBesideARunningFano(t *testing.T) {
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	address := busy.Addr().String()
	require.NoError(t, busy.Close())
	cfg := writeConfig(t, dir, probeConfig(dataDir, address, 60_000))
	first := startFano(t, cfg, dataDir, true)
	want := fmt.Sprintf("fano: data directory %s is in use by another fano (pid %d): stop it first, or pass another --data-dir\n", dataDir, first.cmd.Process.Pid)
	for _, args := range [][]string{{"run"}, {"run", "--until-idle"}} {
		out, errOut, err := runQuick(t, append(args, "--config", cfg)...)
		require.Error(t, err, "%v", args)
		assert.Equal(t, want, errOut, "%v", args)
		assert.Empty(t, out, "%v: nothing before the refusal (no panel port taken)", args)
	}
	_, err = first.stop(syscall.SIGTERM)
	require.NoError(t, err, first.stderrText())

	// Held by a process that wrote its pid but is no fano run: the same.
	log, err := wal.Open(filepath.Join(dataDir, "fano.db"), wal.Options{PIDFile: filepath.Join(dataDir, "fano.pid")})
	require.NoError(t, err)
	defer log.Close()
	last := log.LastSeq()
	_, errOut, err := runQuick(t, "run", "--until-idle", "--config", cfg)
	require.Error(t, err)
	assert.Equal(t, fmt.Sprintf("fano: data directory %s is in use by another fano (pid %d): stop it first, or pass another --data-dir\n", dataDir, os.Getpid()), errOut)
	assert.Equal(t, last, log.LastSeq(), "nothing written")
}
