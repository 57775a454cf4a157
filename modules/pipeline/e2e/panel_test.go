package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The control panel of a running pipeline shows its progress per step
// and model, and its failures.
func TestPanelShowsPipelineProgressAndFailures(t *testing.T) {
	fano.Require(t)
	cfg := strings.Replace(simConfig(40, 2), "control: {enabled: false}", "control: {enabled: true, address: \"127.0.0.1:0\"}", 1)
	def := strings.Replace(verdictPipeline, "properties: {verdict", "properties: {verdict", 1) + "      rules: [output.confidence >= 0.5]\n      attempts: 1\n"
	e := newEnv(t, def, cfg, 300)
	var out bytes.Buffer
	run := e.cmd(t.Context(), "pipeline", "run", e.def, "--no-progress")
	run.Stdout, run.Stderr = &out, &out
	require.NoError(t, run.Start())
	exited := make(chan error, 1)
	go func() { exited <- run.Wait() }()

	type report struct {
		Kind    string `json:"kind"`
		Summary struct {
			Pipeline string                               `json:"pipeline"`
			Steps    map[string]map[string]map[string]int `json:"steps"`
		} `json:"summary"`
		Steps []struct {
			Step, Model string
			Done        int
			Rate        float64 `json:"rate_per_s"`
			ETA         float64 `json:"eta_s"`
		} `json:"steps"`
		Failures []struct{ Key, Step, Model, Stage string } `json:"failures"`
		Total    int                                        `json:"failures_total"`
	}
	var got report
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(60 * time.Second)
poll:
	for {
		select {
		case <-tick.C:
			addr, err := os.ReadFile(filepath.Join(e.data, "panel.addr"))
			if err != nil {
				continue
			}
			resp, err := http.Get("http://" + strings.TrimSpace(string(addr)) + "/api/orchestrator/status")
			if err != nil {
				continue
			}
			var st struct {
				Modules []struct {
					Name   string `json:"name"`
					Report report `json:"report"`
				} `json:"modules"`
			}
			err = json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
			require.NoError(t, err)
			for _, m := range st.Modules {
				if m.Name == "pipeline" && m.Report.Total > 0 && len(m.Report.Steps) > 0 && m.Report.Steps[0].Rate > 0 {
					got = m.Report
					break poll
				}
			}
		case err := <-exited:
			t.Fatalf("fano pipeline run ended before the panel showed a failure: %v\n%s", err, out.String())
		case <-deadline:
			t.Fatalf("the panel showed no pipeline failure\n%s", out.String())
		}
	}
	// The panel itself, in Chromium: a row per step and model, in the
	// step's order, with the rate and the time left.
	addr, err := os.ReadFile(filepath.Join(e.data, "panel.addr"))
	require.NoError(t, err)
	rows := panelStepRows(t, "http://"+strings.TrimSpace(string(addr))+"/")
	require.Len(t, rows, 3, "%v", rows)
	for i, r := range rows {
		assert.Equal(t, "verdict", r[0])
		assert.Equal(t, fmt.Sprintf("m%d", i+1), r[1])
	}
	assert.Regexp(t, `^\d+(\.\d+)?$`, rows[0][7], "a rate a second")
	assert.Regexp(t, `^(\d+(\.\d)? s|\d+ min \d+ s|\d+ h \d+ min|—)$`, rows[0][8], "the time left")
	// While it runs, status reads the live count it leaves behind.
	st, err := e.cmd(t.Context(), "pipeline", "status", e.def).CombinedOutput()
	require.NoError(t, err, "%s", st)
	assert.Contains(t, string(st), "pipeline verdicts is running (pid")
	assert.Regexp(t, `verdict +m1 +done +\d+  failed +\d+  pending +\d+ +\d+\.\d+/s  ETA `, string(st))
	// The same per step and model as JSON: every pair counted once.
	js, err := e.cmd(t.Context(), "pipeline", "status", e.def, "--json").Output()
	require.NoError(t, err, "%s", js)
	var live struct {
		Running  bool `json:"running"`
		Progress struct {
			Steps []struct {
				Step, Model           string
				Done, Failed, Pending int
				Rate                  float64 `json:"rate_per_s"`
			} `json:"steps"`
		} `json:"progress"`
	}
	require.NoError(t, json.Unmarshal(js, &live), "%s", js)
	assert.True(t, live.Running)
	require.Len(t, live.Progress.Steps, 3, "one per model")
	for i, s := range live.Progress.Steps {
		assert.Equal(t, "verdict", s.Step)
		assert.Equal(t, fmt.Sprintf("m%d", i+1), s.Model, "models in the step's order")
		assert.Equal(t, 300, s.Done+s.Failed+s.Pending)
	}
	require.NoError(t, run.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 6, exitCode(t, <-exited), "stopped by a signal: %s", out.String())

	assert.Equal(t, "pipeline", got.Kind)
	require.Len(t, got.Steps, 3, "the report's steps, a row per model")
	assert.Equal(t, "verdict", got.Steps[0].Step)
	assert.Positive(t, got.Steps[0].Rate)
	assert.Equal(t, "verdicts", got.Summary.Pipeline)
	assert.Len(t, got.Summary.Steps["verdict"], 3, "one row per model")
	for model, c := range got.Summary.Steps["verdict"] {
		assert.Equal(t, 300, c["ok"]+c["failed"]+c["pending"], model)
	}
	require.NotEmpty(t, got.Failures)
	assert.Equal(t, "rules", got.Failures[0].Stage)
	// A stop by signal still leaves the partial results on disk.
	assert.FileExists(t, filepath.Join(e.data, "output", "results.jsonl"))
}

// A pipeline run whose panel port another program holds takes a free
// port (as an until-idle run does) and says where, on stderr: stdout
// holds the --json summary alone.
func TestPipelineRunTakesAFreePanelPort(t *testing.T) {
	fano.Require(t)
	held, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer held.Close()
	cfg := strings.Replace(simConfig(0, 2), "control: {enabled: false}", "control: {enabled: true, address: \""+held.Addr().String()+"\"}", 1)
	e := newEnv(t, verdictPipeline, cfg, 3)
	run := e.cmd(t.Context(), "pipeline", "run", e.def, "--no-progress", "--json")
	var stderr strings.Builder
	run.Stderr = &stderr
	out, err := run.Output()
	require.NoError(t, err, "%s", stderr.String())
	var sum struct {
		ItemsDone int `json:"items_done"`
	}
	require.NoError(t, json.Unmarshal(out, &sum), "stdout is one JSON document: %s", out)
	assert.Equal(t, 3, sum.ItemsDone)
	assert.Contains(t, stderr.String(), "is in use")
}

// panelStepRows opens the panel in Chromium and returns the cells of its
// pipeline table's rows once one shows a rate.
func panelStepRows(t *testing.T, url string) [][]string {
	t.Helper()
	driver := os.Getenv("PLAYWRIGHT_DRIVER_PATH")
	if driver == "" {
		home, _ := os.UserHomeDir()
		driver = filepath.Join(home, ".cache", "fano", "playwright-driver")
	}
	chromium, err := exec.LookPath("chromium")
	require.NoError(t, err, "the panel test needs Chromium: run `make deps`")
	pw, err := playwright.Run(&playwright.RunOptions{DriverDirectory: driver, SkipInstallBrowsers: true})
	require.NoError(t, err, "the panel test needs the Playwright driver: run `make deps`")
	defer pw.Stop()
	browser, err := pw.Chromium.Launch(playwright.BrowserTypeLaunchOptions{ExecutablePath: playwright.String(chromium), Headless: playwright.Bool(true),
		Args: []string{"--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"}})
	require.NoError(t, err)
	defer browser.Close()
	page, err := browser.NewPage()
	require.NoError(t, err)
	_, err = page.Goto(url)
	require.NoError(t, err)
	rate := page.Locator(`table.pipeline-steps tr[data-step] td.rate`).First()
	require.NoError(t, playwright.NewPlaywrightAssertions(15000).Locator(rate).ToHaveText(regexp.MustCompile(`^\d`)))
	cells, err := page.Locator(`table.pipeline-steps tr[data-step]`).EvaluateAll(
		`rows => rows.map(r => Array.from(r.querySelectorAll("td")).map(td => td.textContent))`)
	require.NoError(t, err)
	var out [][]string
	for _, r := range cells.([]any) {
		var row []string
		for _, c := range r.([]any) {
			row = append(row, c.(string))
		}
		out = append(out, row)
	}
	return out
}
