package control_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/app"
	"fano/config"
	"fano/control"
)

// The end-to-end test: `fano run` in process (app.Main) on a simulated
// LLM, its panel opened in real Chromium through playwright-go.

// runningFano is a fano run in this process.
type runningFano struct {
	url     string // panel URL with #token=
	base    string // http://127.0.0.1:port
	dataDir string
}

func startFano(t *testing.T) *runningFano {
	t.Helper()
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	// One simulated LLM answering in 400 ms, one request at a time: tasks
	// move at a pace a person (and the test) can watch.
	cfg, err := config.Parse([]byte(fmt.Sprintf(`data_dir: %s
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
`, dataDir)), "e2e config")
	require.NoError(t, err)

	// The console (the panel's banner) is read line by line, from before
	// Open: the banner is written while it starts the panel.
	pr, pw := io.Pipe()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // nobody listens any more
			}
		}
	}()
	m := app.NewMain(app.Options{Config: cfg, Stdout: pw, Console: "off"})
	require.NoError(t, m.Open(context.Background()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err, "fano run ends when its context does")
		case <-time.After(15 * time.Second):
			t.Error("fano run did not stop within 15 s of its context's end")
		}
		assert.NoError(t, m.Close(), "fano run stops cleanly")
		pw.Close()
	})

	f := &runningFano{dataDir: dataDir}
	deadline := time.After(30 * time.Second)
	for f.url == "" {
		select {
		case l := <-lines:
			if u, ok := strings.CutPrefix(l, "fano control panel: "); ok {
				f.url = u
			}
		case err := <-done:
			t.Fatalf("fano run ended before its panel started: %v", err)
		case <-deadline:
			t.Fatal("fano run printed no panel URL within 30 s")
		}
	}
	// Not a terminal: the banner names the token file, never the token.
	base, _, ok := strings.Cut(f.url, "/  (changes need the token in ")
	require.True(t, ok, "the banner names the token file: %s", f.url)
	tok, err := os.ReadFile(filepath.Join(dataDir, control.TokenFile))
	require.NoError(t, err)
	f.url = base + "/#token=" + strings.TrimSpace(string(tok))
	f.base = base
	return f
}

func TestEndToEndBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts fano and Chromium; run without -short")
	}
	driverDir, chromium := control.BrowserDeps(t)
	fano := startFano(t)

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
		require.NoError(t, os.MkdirAll(control.ArtifactDir(), 0o755))
		path := filepath.Join(control.ArtifactDir(), name)
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
	require.NoError(t, expect.Locator(page.Locator(`#running li[data-task-id]`).First()).ToContainText("sima"))
	require.NoError(t, expect.Locator(page.Locator("#feed li.ev-llm").First()).ToBeVisible(), "LLM calls in the live feed")
	require.NoError(t, page.Locator(`#nav a[data-nav="tasks"]`).Click())
	require.NoError(t, expect.Locator(page.Locator(`#tasks-body tr[data-state="COMPLETED"]`).First()).ToBeVisible(
		playwright.LocatorAssertionsToBeVisibleOptions{Timeout: playwright.Float(60000)}), "a task completes")
	require.NoError(t, page.Locator(`#nav a[data-nav="backends"]`).Click())
	require.NoError(t, expect.Locator(page.Locator(`[data-backend="sima"] .bar`).First()).ToBeVisible(), "quota bars")

	// A comment through the form: addressed if a module takes comments,
	// else the server's reason is shown.
	st := getStatus(t, fano.base)
	commenter := ""
	for _, m := range st.Modules {
		if slices.Contains(m.Capabilities, "comments") {
			commenter = m.Name
		}
	}
	require.NoError(t, page.Locator(`#nav a[data-nav="document"]`).Click())
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
		require.NoError(t, page.Locator(`#nav a[data-nav="tasks"]`).Click())
		addressed := page.Locator(`#tasks-body tr[data-task-type="address_comment"][data-state="COMPLETED"]`)
		require.NoError(t, expect.Locator(addressed.First()).ToBeVisible(
			playwright.LocatorAssertionsToBeVisibleOptions{Timeout: playwright.Float(90000)}), "the comment is addressed by %s", commenter)
	}

	// Pause the backend from its card: running work stops at its next
	// request and the queue holds still, so the cancel below has a task
	// that waits.
	require.NoError(t, page.Locator(`#nav a[data-nav="backends"]`).Click())
	require.NoError(t, page.Locator(`[data-backend="sima"] button[data-action="pause"]`).Click())
	require.NoError(t, expect.Locator(page.Locator(`[data-backend="sima"]`)).ToHaveAttribute("data-state", "paused"))
	require.NoError(t, page.Locator(`#nav a[data-nav="tasks"]`).Click())
	require.NoError(t, expect.Locator(page.Locator(`#tasks-body tr[data-state="RUNNING"]`)).ToHaveCount(0,
		playwright.LocatorAssertionsToHaveCountOptions{Timeout: playwright.Float(30000)}))
	waiting := page.Locator(`#tasks-body tr[data-state="PENDING"], #tasks-body tr[data-state="PAUSED"]`).First()
	require.NoError(t, expect.Locator(waiting).ToBeVisible(), "a task waits")
	id, err := waiting.GetAttribute("data-task-id")
	require.NoError(t, err)
	row := page.Locator(fmt.Sprintf(`#tasks-body tr[data-task-id=%q]`, id))
	require.NoError(t, row.Locator("button.cancel-btn").Click())
	require.NoError(t, page.Locator("#confirm-reason").Fill("not needed any more"))
	require.NoError(t, page.Locator("#confirm-yes").Click())
	require.NoError(t, expect.Locator(row).ToHaveAttribute("data-state", "CANCELLED"), "task %s cancelled from the page", id)
	require.NoError(t, expect.Locator(page.Locator("#tasks-result")).ToContainText(id+": cancelled"))
	require.NoError(t, page.Locator(`#nav a[data-nav="overview"]`).Click())
	require.NoError(t, expect.Locator(page.Locator("#feed li").Filter(playwright.LocatorFilterOptions{HasText: "cancelled " + id}).First()).ToBeVisible())

	// The conversation of a finished task opens from its id.
	require.NoError(t, page.Locator(`#nav a[data-nav="tasks"]`).Click())
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
	tok, err := os.ReadFile(filepath.Join(fano.dataDir, control.TokenFile))
	require.NoError(t, err)
	logs, err := os.ReadFile(filepath.Join(fano.dataDir, "logs", "fano.log"))
	require.NoError(t, err)
	assert.NotContains(t, string(logs), strings.TrimSpace(string(tok)))
}

func getStatus(t *testing.T, base string) control.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/api/orchestrator/status", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var st control.Status
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	return st
}

func moduleNames(st control.Status) []string {
	var out []string
	for _, m := range st.Modules {
		out = append(out, m.Name)
	}
	return out
}
