package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fanoapp "fano/app"
	"fano/control"
)

// panelConfig runs the probe (five questions, three turns each) on one
// slow sim backend with the panel on a free port.
func panelConfig(dataDir string) string {
	return fmt.Sprintf(`
data_dir: %s
backends:
  sima: {type: sim, hourly_limit: 1000, sim: {seed: 1, latency_ms: 200}}
explorer: {enabled: false}
documenter: {enabled: false}
researcher: {enabled: false}
control: {address: "127.0.0.1:0"}
logging: {level: info, console: json}
`, dataDir)
}

// cli runs one fano command in this process.
func cli(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = execute(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestPanelCommands(t *testing.T) {
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	cfg := writeConfig(t, dir, panelConfig(dataDir))

	// `fano run` in process; its banner names the panel.
	banner, stop := runInProcess(t, cfg)
	select {
	case line := <-banner:
		require.True(t, strings.HasPrefix(line, "fano control panel: http://127.0.0.1:"), line)
		require.NotContains(t, line, "#token=", "the token goes to a terminal only, not to a pipe")
		require.Contains(t, line, control.TokenFile)
	case <-time.After(30 * time.Second):
		t.Fatal("no panel banner")
	}
	require.FileExists(t, filepath.Join(dataDir, control.AddrFile))

	// The panel's event stream tells the test when something happened.
	p, err := findPanel(&globals{configPath: cfg})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	events, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(p.client.BaseURL, "http")+"/api/events", nil)
	require.NoError(t, err)
	defer events.CloseNow()
	next := func() {
		_, _, err := events.Read(ctx)
		require.NoError(t, err)
	}

	// fano tasks, live, once the probe has queued its questions.
	var rep tasksReport
	for {
		code, out, errOut := cli("tasks", "--json", "--config", cfg)
		require.Equal(t, 0, code, errOut)
		rep = tasksReport{}
		require.NoError(t, json.Unmarshal([]byte(out), &rep))
		if len(rep.Tasks) == 5 {
			break
		}
		next()
	}
	assert.True(t, rep.Running)
	assert.Empty(t, rep.Message)
	require.Len(t, rep.Tasks, 5, "the probe's five questions")

	code, out, errOut := cli("tasks", "--config", cfg, "--limit", "2")
	require.Equal(t, 0, code)
	assert.Len(t, strings.Split(strings.TrimSpace(out), "\n"), 4, "a header, two tasks and how many there are:\n%s", out)
	assert.True(t, strings.HasSuffix(out, "\n2 of 5 (use --limit or --state)\n"), out)
	assert.Contains(t, out, "STATE")

	code, _, errOut = cli("tasks", "--config", cfg, "--state", "sleepy")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `--state: unknown task state "sleepy"`)

	// Hold the queue still (pause the backend through the API), then
	// cancel a waiting task from the CLI.
	_, err = p.client.PauseBackend(ctx, "sima", "test", true)
	require.NoError(t, err)
	var waiting string
	for {
		ts, err := p.client.Tasks(ctx, "", "", 0)
		require.NoError(t, err)
		running := slices.ContainsFunc(ts, func(tv control.TaskView) bool { return tv.State == "RUNNING" })
		i := slices.IndexFunc(ts, func(tv control.TaskView) bool { return tv.State == "PENDING" || tv.State == "PAUSED" })
		if !running && i >= 0 {
			waiting = ts[i].ID
			break
		}
		next() // a running task pauses at its next request
	}
	code, out, errOut = cli("cancel", waiting, "--config", cfg)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, waiting+": cancelled\n", out)
	code, _, errOut = cli("cancel", waiting, "--config", cfg)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "already finished")
	assert.Contains(t, errOut, "(HTTP 400)")
	code, _, errOut = cli("cancel", "probe/exploration/none", "--config", cfg)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "(HTTP 404)")

	code, out, errOut = cli("tasks", waiting, "--json", "--config", cfg)
	require.Equal(t, 0, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Len(t, rep.Tasks, 1)
	assert.Equal(t, "CANCELLED", rep.Tasks[0].State)

	// Seeds and comments: this config runs the probe alone, which takes
	// neither: the server's reason reaches the console.
	code, _, errOut = cli("comment", "add", "intro", "Say more.", "--config", cfg)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "no configured module accepts comments")
	assert.Contains(t, errOut, "(HTTP 409)")
	code, _, errOut = cli("seed", "add", "Is there a plane of order 10?", "--config", cfg)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "no configured module accepts seeds")
	assert.Contains(t, errOut, "(HTTP 409)")

	// /metrics carries the panel's figures and the ops service's 24-hour
	// ones in one registry.
	resp, err := http.Get(p.client.BaseURL + "/metrics")
	require.NoError(t, err)
	metricsText, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", metricsText)
	assert.Contains(t, string(metricsText), `fano_tasks{module="probe",state="CANCELLED"} 1`)
	assert.Contains(t, string(metricsText), "fano_llm_requests_24h")

	// The live status, as `fano status` will print it.
	var buf bytes.Buffer
	cmd := &cobra.Command{}
	cmd.SetOut(&buf)
	cmd.SetContext(context.Background())
	live, err := livePanelStatus(cmd, &globals{configPath: cfg}, p)
	require.NoError(t, err)
	assert.True(t, live)
	assert.Contains(t, buf.String(), "fano is running")
	assert.Contains(t, buf.String(), "sima")
	assert.Contains(t, buf.String(), "paused")

	// Stopped: reads come from the data directory and say so; changes
	// say fano must run.
	stop()
	assert.NoFileExists(t, filepath.Join(dataDir, control.AddrFile), "the address file goes with the panel")
	code, out, errOut = cli("tasks", "--json", "--config", cfg)
	require.Equal(t, 0, code, errOut)
	var off tasksReport
	require.NoError(t, json.Unmarshal([]byte(out), &off))
	assert.False(t, off.Running)
	assert.Contains(t, off.Message, "fano is not running")
	require.Len(t, off.Tasks, 5)
	i := slices.IndexFunc(off.Tasks, func(tv control.TaskView) bool { return tv.ID == waiting })
	require.GreaterOrEqual(t, i, 0)
	assert.Equal(t, "CANCELLED", off.Tasks[i].State)

	code, _, errOut = cli("tasks", "--config", cfg, "--state", "cancelled")
	require.Equal(t, 0, code)
	assert.Contains(t, errOut, "fano is not running")

	code, _, errOut = cli("cancel", waiting, "--config", cfg)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "fano is not running")
	assert.Contains(t, errOut, "fano run")
	code, _, errOut = cli("comment", "add", "intro", "x", "--config", cfg)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "fano is not running")
	code, _, errOut = cli("retry", "--failed", "--config", cfg)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "retry needs the running orchestrator")
	code, _, errOut = cli("backend", "pause", "sim", "--config", cfg)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "backend pause needs the running orchestrator")
	// Stopped, seed add goes to the data directory (here refused: this
	// config runs no explorer), not to the panel.
	code, _, errOut = cli("seed", "add", "x", "--config", cfg)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "explorer is disabled")

	live, err = livePanelStatus(cmd, &globals{configPath: cfg}, p)
	require.NoError(t, err)
	assert.False(t, live, "no panel: fano status reads the data directory")

	// No token in the log.
	tok, err := os.ReadFile(filepath.Join(dataDir, control.TokenFile))
	require.NoError(t, err)
	logs, err := os.ReadFile(filepath.Join(dataDir, "logs", "fano.log"))
	require.NoError(t, err)
	assert.NotContains(t, string(logs), strings.TrimSpace(string(tok)))
}

func TestPanelOfAnotherDataDir(t *testing.T) {
	// A panel that answers for another data directory is named, not used:
	// the data directory asked for is read from disk.
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	cfg := writeConfig(t, dir, panelConfig(dataDir))
	banner, _ := runInProcess(t, cfg)
	<-banner
	addr, err := os.ReadFile(filepath.Join(dataDir, control.AddrFile))
	require.NoError(t, err)

	other := filepath.Join(dir, "other")
	otherCfg := filepath.Join(dir, "other.yaml")
	require.NoError(t, os.WriteFile(otherCfg, []byte(strings.Replace(panelConfig(other), `"127.0.0.1:0"`, `"`+strings.TrimSpace(string(addr))+`"`, 1)), 0o600))
	code, _, errOut := cli("tasks", "--config", otherCfg)
	assert.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "tasks read from "+other+" on disk")
	assert.Contains(t, errOut, "runs on data dir "+dataDir)
}

// runInProcess runs `fano run --config cfg` in this process (app.Main):
// the lines it prints to the console come on the channel (those nobody
// reads are dropped), and stop (also run at the test's end) ends the run
// as Ctrl-C would and checks that it stopped cleanly.
func runInProcess(t *testing.T, cfgPath string) (lines <-chan string, stop func()) {
	t.Helper()
	cfg, err := loadConfig(&globals{configPath: cfgPath})
	require.NoError(t, err)
	pr, pw := io.Pipe()
	out := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			select {
			case out <- sc.Text():
			default:
			}
		}
	}()
	m := fanoapp.NewMain(fanoapp.Options{Config: cfg, Stdout: pw, Console: "off"})
	require.NoError(t, m.Open(context.Background()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(15 * time.Second):
			t.Fatal("fano run did not stop when asked")
		}
		require.NoError(t, m.Close())
		pw.Close()
	}
	t.Cleanup(stop)
	return out, stop
}

// `fano seed "question"` (add forgotten) adds nothing and exits non-zero,
// naming the command that does it.
func TestSeedWithoutAddIsAnError(t *testing.T) {
	code, out, errOut := cli("seed", "Is there a plane of order 10?")
	assert.Equal(t, exitUsage, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, `fano seed add "Is there a plane of order 10?"`)
	code, out, _ = cli("seed")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "add")
}
