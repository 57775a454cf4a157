package control

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The end-to-end test: a real `fano run` subprocess on a simulated LLM,
// its panel opened in real Chromium through playwright-go.

// artifactDir keeps the screenshot (gitignored: /testdata/artifacts/).
var artifactDir = filepath.Join("..", "testdata", "artifacts")

var (
	buildOnce sync.Once
	fanoBin   string
	buildErr  error
)

// TestMain removes the fano binary the end-to-end test built (lazily: a
// run of the API tests alone builds nothing).
func TestMain(m *testing.M) {
	code := m.Run()
	if fanoBin != "" {
		_ = os.RemoveAll(filepath.Dir(fanoBin))
	}
	os.Exit(code)
}

// buildFano builds cmd/fano once per test run.
func buildFano(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fano-e2e-bin-")
		if err != nil {
			buildErr = err
			return
		}
		fanoBin = filepath.Join(dir, "fano")
		goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(goBin); err != nil {
			goBin = "go"
		}
		cmd := exec.Command(goBin, "build", "-o", fanoBin, "./cmd/fano")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/fano: %v\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return fanoBin
}

// browserDeps finds the Playwright driver and Chromium, or fails the test
// saying how to install them: a missing browser must not pass as a skip.
func browserDeps(t *testing.T) (driverDir, chromium string) {
	t.Helper()
	driverDir = os.Getenv("PLAYWRIGHT_DRIVER_PATH")
	if driverDir == "" {
		home, _ := os.UserHomeDir()
		driverDir = filepath.Join(home, ".cache", "fano", "playwright-driver")
	}
	var missing []string
	for _, p := range []string{filepath.Join(driverDir, "node"), filepath.Join(driverDir, "package", "cli.js")} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, "the Playwright driver ("+p+")")
			break
		}
	}
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		missing = append(missing, "Chromium (no chromium on $PATH)")
	}
	if len(missing) > 0 {
		t.Fatalf("the control panel's browser test needs %s: run `make deps` (scripts/install-test-deps.sh)", strings.Join(missing, " and "))
	}
	return driverDir, chromium
}

// runningFano is a `fano run` subprocess.
type runningFano struct {
	cmd     *exec.Cmd
	url     string // panel URL with #token=
	base    string // http://127.0.0.1:port
	dataDir string
	done    chan error
}

func startFano(t *testing.T, bin string) *runningFano {
	t.Helper()
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	// One simulated LLM answering in 400 ms, one request at a time: tasks
	// move at a pace a person (and the test) can watch.
	cfg := fmt.Sprintf(`data_dir: %s
backends:
  sima:
    type: sim
    hourly_limit: 500
    deep_mode_daily_limit: 10
    sim:
      seed: 1
      style: chatgpt
      latency_ms: 400
control:
  address: 127.0.0.1:0
logging:
  level: info
  console: json
`, dataDir)
	cfgPath := filepath.Join(dir, "fano.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(cfg), 0o600))

	f := &runningFano{dataDir: dataDir, done: make(chan error, 1)}
	f.cmd = exec.Command(bin, "run", "--config", cfgPath)
	stdout, err := f.cmd.StdoutPipe()
	require.NoError(t, err)
	stderr, err := os.Create(filepath.Join(dir, "stderr.log"))
	require.NoError(t, err)
	f.cmd.Stderr = stderr
	require.NoError(t, f.cmd.Start())
	go func() { f.done <- f.cmd.Wait(); stderr.Close() }()
	t.Cleanup(func() {
		_ = f.cmd.Process.Signal(syscall.SIGINT)
		select {
		case err := <-f.done:
			assert.NoError(t, err, "fano run exits cleanly on SIGINT")
		case <-time.After(15 * time.Second):
			_ = f.cmd.Process.Kill()
			<-f.done
			t.Error("fano run did not stop within 15 s of SIGINT")
		}
		if t.Failed() {
			data, _ := os.ReadFile(filepath.Join(dir, "stderr.log"))
			t.Logf("fano stderr (tail):\n%s", tail(string(data), 4000))
		}
	})

	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // nobody listens any more
			}
		}
	}()
	deadline := time.After(30 * time.Second)
	for f.url == "" {
		select {
		case l := <-lines:
			if u, ok := strings.CutPrefix(l, "fano control panel: "); ok {
				f.url = u
			}
		case err := <-f.done:
			t.Fatalf("fano run exited before its panel started: %v", err)
		case <-deadline:
			t.Fatal("fano run printed no panel URL within 30 s")
		}
	}
	base, _, ok := strings.Cut(f.url, "/#token=")
	require.True(t, ok, "the banner carries the token in the URL fragment: %s", f.url)
	f.base = base
	return f
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

func TestEndToEndBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts fano and Chromium; run without -short")
	}
	driverDir, chromium := browserDeps(t)
	fano := startFano(t, buildFano(t))

	pw, err := playwright.Run(&playwright.RunOptions{DriverDirectory: driverDir, SkipInstallBrowsers: true, Verbose: false})
	require.NoError(t, err, "start the Playwright driver (run `make deps` if it is broken)")
	t.Cleanup(func() { _ = pw.Stop() })
	browser, err := pw.Chromium.Launch(playwright.BrowserTypeLaunchOptions{
		ExecutablePath: playwright.String(chromium),
		Headless:       playwright.Bool(true),
		Args: []string{"--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
			"--disable-background-networking", "--disable-component-update", "--disable-sync",
			"--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"},
	})
	require.NoError(t, err, "launch Chromium")
	t.Cleanup(func() { _ = browser.Close() })
	page, err := browser.NewPage(playwright.BrowserNewPageOptions{Viewport: &playwright.Size{Width: 1400, Height: 1600}})
	require.NoError(t, err)
	var consoleErrs []string
	var consoleMu sync.Mutex
	// Script errors fail the test; the browser's own notes about HTTP
	// errors (the API's 404 for a missing document) do not.
	page.OnConsole(func(m playwright.ConsoleMessage) {
		if m.Type() == "error" && !strings.HasPrefix(m.Text(), "Failed to load resource") {
			consoleMu.Lock()
			consoleErrs = append(consoleErrs, m.Text())
			consoleMu.Unlock()
		}
	})
	page.OnPageError(func(err error) {
		consoleMu.Lock()
		consoleErrs = append(consoleErrs, "uncaught: "+err.Error())
		consoleMu.Unlock()
	})
	shot := func(name string) {
		require.NoError(t, os.MkdirAll(artifactDir, 0o755))
		path := filepath.Join(artifactDir, name)
		_, err := page.Screenshot(playwright.PageScreenshotOptions{Path: playwright.String(path), FullPage: playwright.Bool(true)})
		if err == nil {
			t.Logf("screenshot: %s", path)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			shot("control-panel-e2e-failed.png")
		}
	})
	expect := playwright.NewPlaywrightAssertions(20000)

	_, err = page.Goto(fano.url)
	require.NoError(t, err)
	require.NoError(t, expect.Locator(page.Locator("#conn-state")).ToHaveAttribute("data-state", "live"), "the websocket connects")
	require.NoError(t, expect.Locator(page.Locator("#token-state")).ToHaveText("token set"), "the token came from the URL fragment")
	assert.NotContains(t, page.URL(), "token=", "the page drops the token from its address")

	// Tasks move: one runs on the sim, then one completes — the page
	// follows over the websocket, without reloads.
	running := page.Locator(`#tasks-body tr[data-state="RUNNING"]`).First()
	require.NoError(t, expect.Locator(running).ToBeVisible(), "a task runs")
	require.NoError(t, expect.Locator(page.Locator(`#running li[data-task-id]`).First()).ToContainText("sima"))
	require.NoError(t, expect.Locator(page.Locator(`#tasks-body tr[data-state="COMPLETED"]`).First()).ToBeVisible(
		playwright.LocatorAssertionsToBeVisibleOptions{Timeout: playwright.Float(60000)}), "a task completes")
	require.NoError(t, expect.Locator(page.Locator("#feed li.ev-llm").First()).ToBeVisible(), "LLM calls in the live feed")
	require.NoError(t, expect.Locator(page.Locator(`[data-backend="sima"] .bar`).First()).ToBeVisible(), "quota bars")

	// A comment through the form: addressed if a module takes comments,
	// else the server's reason is shown.
	st := getStatus(t, fano.base)
	commenter := ""
	for _, m := range st.Modules {
		if slices.Contains(m.Capabilities, capComments) {
			commenter = m.Name
		}
	}
	if commenter == "" {
		require.NoError(t, page.Locator("#comment-section").Fill("intro"))
		require.NoError(t, page.Locator("#comment-text").Fill("Please explain why there is no plane of order 6."))
		require.NoError(t, page.Locator("#comment-form button[type=submit]").Click())
		require.NoError(t, expect.Locator(page.Locator("#comment-result")).ToHaveClass("result err"))
		require.NoError(t, expect.Locator(page.Locator("#comment-result")).ToContainText("no configured module accepts comments"))
		t.Logf("no module of this build takes comments (modules: %v): the form shows the server's refusal", moduleNames(st))
	} else {
		section := page.Locator("#section-ids option").First()
		require.NoError(t, expect.Locator(section).ToHaveCount(1,
			playwright.LocatorAssertionsToHaveCountOptions{Timeout: playwright.Float(60000)}), "the document lists a section to comment on")
		id, err := section.GetAttribute("value")
		require.NoError(t, err)
		require.NoError(t, page.Locator("#comment-section").Fill(id))
		require.NoError(t, page.Locator("#comment-text").Fill("Please explain why there is no plane of order 6."))
		require.NoError(t, page.Locator("#comment-form button[type=submit]").Click())
		require.NoError(t, expect.Locator(page.Locator("#comment-result")).ToHaveClass("result ok"))
		addressed := page.Locator(`#tasks-body tr[data-task-type="address_comment"][data-state="COMPLETED"]`)
		require.NoError(t, expect.Locator(addressed.First()).ToBeVisible(
			playwright.LocatorAssertionsToBeVisibleOptions{Timeout: playwright.Float(90000)}), "the comment is addressed by %s", commenter)
	}

	// Pause the backend from its card: running work stops at its next
	// request and the queue holds still, so the cancel below has a task
	// that waits.
	require.NoError(t, page.Locator(`[data-backend="sima"] button[data-action="pause"]`).Click())
	require.NoError(t, expect.Locator(page.Locator(`[data-backend="sima"]`)).ToHaveAttribute("data-state", "paused"))
	require.NoError(t, expect.Locator(page.Locator(`#tasks-body tr[data-state="RUNNING"]`)).ToHaveCount(0,
		playwright.LocatorAssertionsToHaveCountOptions{Timeout: playwright.Float(30000)}))
	waiting := page.Locator(`#tasks-body tr[data-state="PENDING"], #tasks-body tr[data-state="PAUSED"]`).First()
	require.NoError(t, expect.Locator(waiting).ToBeVisible(), "a task waits")
	id, err := waiting.GetAttribute("data-task-id")
	require.NoError(t, err)
	row := page.Locator(fmt.Sprintf(`#tasks-body tr[data-task-id=%q]`, id))
	require.NoError(t, row.Locator("button.cancel-btn").Click())
	require.NoError(t, expect.Locator(row).ToHaveAttribute("data-state", "CANCELLED"), "task %s cancelled from the page", id)
	require.NoError(t, expect.Locator(page.Locator("#tasks-result")).ToContainText(id+": cancelled"))
	require.NoError(t, expect.Locator(page.Locator("#feed li").Filter(playwright.LocatorFilterOptions{HasText: "cancelled " + id}).First()).ToBeVisible())

	// The conversation of a finished task opens from its id.
	require.NoError(t, page.Locator(`#tasks-body tr[data-state="COMPLETED"] td.id a`).First().Click())
	require.NoError(t, expect.Locator(page.Locator("#task-detail .msg.assistant").First()).ToBeVisible())

	// The document renderer: headings, lists, code, emphasis, and no HTML
	// from the document gets through.
	html, err := page.Evaluate("md => window.fanoMarkdown.render(md)",
		"# Planes\n\nSome **bold** and *soft* text with `x<y`.\n\n- one\n- two\n\n1. first\n\n```\n<script>alert(1)</script>\n```\n\n<img src=x onerror=alert(1)>")
	require.NoError(t, err)
	assert.Equal(t, "<h1>Planes</h1>\n<p>Some <strong>bold</strong> and <em>soft</em> text with <code>x&lt;y</code>.</p>\n"+
		"<ul>\n<li>one</li>\n<li>two</li>\n</ul>\n<ol>\n<li>first</li>\n</ol>\n<pre><code>&lt;script&gt;alert(1)&lt;/script&gt;\n</code></pre>\n"+
		"<p>&lt;img src=x onerror=alert(1)&gt;</p>\n", html)

	shot("control-panel.png")
	consoleMu.Lock()
	assert.Empty(t, consoleErrs, "no script errors in the page")
	consoleMu.Unlock()

	// The token was printed on the console only, never logged.
	tok, err := os.ReadFile(filepath.Join(fano.dataDir, TokenFile))
	require.NoError(t, err)
	logs, err := os.ReadFile(filepath.Join(fano.dataDir, "logs", "fano.log"))
	require.NoError(t, err)
	assert.NotContains(t, string(logs), strings.TrimSpace(string(tok)))
}

func getStatus(t *testing.T, base string) Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/api/orchestrator/status", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var st Status
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	return st
}

func moduleNames(st Status) []string {
	var out []string
	for _, m := range st.Modules {
		out = append(out, m.Name)
	}
	return out
}
