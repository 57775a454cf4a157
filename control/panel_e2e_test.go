package control

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/pb"
)

// shotDir is where the views' screenshots go (outside the repository).
var shotDir = func() string {
	if d := os.Getenv("FANO_PANEL_SHOTS"); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), "panel-shots")
}()

// livePanel is a panel served on a fixed address that a test can stop
// and start again, as fano stops and starts, with the page left open.
type livePanel struct {
	t    *testing.T
	f    *fixture
	addr string
	srv  *Server
	done chan error
}

func startLivePanel(t *testing.T, f *fixture, addr string) *livePanel {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	srv, err := New(Options{Sys: f.sys, Token: testToken, Logger: testLogger(t), DataDir: f.srv.opts.DataDir,
		Backends: f.srv.opts.Backends, Modules: []string{"probe", "notebook"}, Hosts: f.srv.opts.Hosts})
	require.NoError(t, err)
	p := &livePanel{t: t, f: f, addr: l.Addr().String(), srv: srv, done: make(chan error, 1)}
	go func() { p.done <- srv.Serve(l) }()
	return p
}

func (p *livePanel) stop() {
	p.t.Helper()
	require.NoError(p.t, p.srv.Close())
	require.ErrorIs(p.t, <-p.done, http.ErrServerClosed)
}

// browserPage starts Chromium with a page of the given size.
func browserPage(t *testing.T, width, height int) (playwright.Browser, playwright.BrowserContext, playwright.Page, *[]string) {
	t.Helper()
	driverDir, chromium := browserDeps(t)
	pw, err := playwright.Run(&playwright.RunOptions{DriverDirectory: driverDir, SkipInstallBrowsers: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pw.Stop() })
	browser, err := pw.Chromium.Launch(playwright.BrowserTypeLaunchOptions{
		ExecutablePath: playwright.String(chromium), Headless: playwright.Bool(true),
		Args: []string{"--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
			"--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = browser.Close() })
	ctx, err := browser.NewContext(playwright.BrowserNewContextOptions{Viewport: &playwright.Size{Width: width, Height: height},
		ColorScheme: playwright.ColorSchemeLight, TimezoneId: playwright.String("Europe/Berlin")})
	require.NoError(t, err)
	page, err := ctx.NewPage()
	require.NoError(t, err)
	var mu sync.Mutex
	errs := &[]string{}
	page.OnConsole(func(m playwright.ConsoleMessage) {
		// The browser's own lines about refused connections (fano
		// stopped on purpose) are not script errors.
		if m.Type() == "error" && !strings.HasPrefix(m.Text(), "Failed to load resource") && !strings.Contains(m.Text(), "WebSocket connection") {
			mu.Lock()
			*errs = append(*errs, m.Text())
			mu.Unlock()
		}
	})
	page.OnPageError(func(err error) {
		mu.Lock()
		*errs = append(*errs, "uncaught: "+err.Error())
		mu.Unlock()
	})
	return browser, ctx, page, errs
}

// The panel as a person uses it, in real Chromium: every view at its own
// address with the back button, tasks paged with the filters in the
// address, a failed task retried and a waiting one cancelled with a
// reason, an alert raised and resolved (with a browser notification), a
// comment on a section in place, the history charts, 800 px and a phone,
// dark mode, and fano stopped and started again with the page open.
func TestPanelViewsInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Chromium; run without -short")
	}
	// simA is held by the gateway host desk, which is lost; tower was
	// refused for its version.
	hosts := &hostBook{}
	lostAt := time.Date(2026, 3, 1, 9, 5, 20, 0, time.UTC)
	deskLost := HostView{Name: "desk", Address: "192.0.2.7:8091", Version: "1.0.0", Backends: []string{"simA"}, State: "lost",
		Reason: "not heard for 15s (link cut off?)", Since: lostAt, LastHeard: lostAt.Add(-20 * time.Second), RTTMillis: 1.25}
	tower := HostView{Name: "tower", Version: "0.9.0", Backends: []string{"gpt"}, State: "refused", Since: lostAt,
		Reason: "host tower runs fano 0.9.0, the orchestrator fano 1.0.0: run the same version on both"}
	hosts.set(deskLost, tower)
	f := newFixture(t, fixtureOpts{modules: []string{"probe", "notebook"}, hosts: hosts})
	panel := startLivePanel(t, f, "127.0.0.1:0")
	t.Cleanup(func() { _ = panel.srv.Close() })
	base := "http://" + panel.addr
	_, _, page, errs := browserPage(t, 1280, 900)
	expect := playwright.NewPlaywrightAssertions(15000)
	require.NoError(t, os.MkdirAll(shotDir, 0o755))
	shot := func(name string) {
		t.Helper()
		path := filepath.Join(shotDir, name)
		_, err := page.Screenshot(playwright.PageScreenshotOptions{Path: playwright.String(path), FullPage: playwright.Bool(true)})
		require.NoError(t, err)
		t.Logf("screenshot: %s", path)
	}
	// Browser notifications, recorded: the page asks for them only when
	// the person opts in.
	require.NoError(t, page.AddInitScript(playwright.Script{Content: playwright.String(`
		window.__notes = [];
		window.Notification = class { constructor(title, o) { window.__notes.push(title + " | " + (o && o.body)); }
			static get permission() { return window.__perm || "default"; }
			static requestPermission() { window.__perm = "granted"; return Promise.resolve("granted"); } };`)}))
	visible := func(sel string, msg ...any) {
		t.Helper()
		require.NoError(t, expect.Locator(page.Locator(sel).First()).ToBeVisible(), msg...)
	}

	// Overview.
	_, err := page.Goto(base + "/#token=" + testToken)
	require.NoError(t, err)
	require.NoError(t, expect.Locator(page.Locator("#conn-state")).ToHaveAttribute("data-state", "live"))
	require.NoError(t, expect.Locator(page.Locator("#token-state")).ToHaveText("token set"))
	assert.NotContains(t, page.URL(), "token=")
	visible("#view-overview #running li[data-task-id]")
	visible(`#backend-summary [data-backend-summary="simA"]`)

	// A running task's view follows it live, from its running request to
	// its end, with no reload.
	require.NoError(t, page.Locator(fmt.Sprintf(`#running li[data-task-id=%q] a`, q0)).Click())
	require.NoError(t, expect.Locator(page.Locator("#task-state")).ToHaveAttribute("data-state", "RUNNING"))
	require.NoError(t, expect.Locator(page.Locator(`.timeline tr[data-step="request"]`)).ToHaveCount(1))
	_, err = page.Evaluate(`() => { window.__sameDocument = true; }`)
	require.NoError(t, err)
	f.drive("q0 completed", f.is(q0, pb.TaskState_TASK_STATE_COMPLETED))
	require.NoError(t, expect.Locator(page.Locator("#task-state")).ToHaveAttribute("data-state", "COMPLETED"))
	require.NoError(t, expect.Locator(page.Locator(`.timeline tr[data-step="completed"]`)).ToHaveCount(1))
	same, err := page.Evaluate(`() => window.__sameDocument === true`)
	require.NoError(t, err)
	assert.Equal(t, true, same, "updated in place, not reloaded")
	_, err = page.GoBack()
	require.NoError(t, err)
	require.NoError(t, expect.Locator(page.Locator(`[data-total="completed (24 h)"] b`)).ToHaveText("1"))
	visible("#feed li.ev-llm")
	feed, err := page.Locator("#feed").TextContent()
	require.NoError(t, err)
	assert.NotContains(t, feed, "undefined")
	assert.Contains(t, feed, "turn 1")
	shot("overview.png")
	checkContrast(t, page, "overview")

	// Dates: ISO 8601 in the person's zone (Berlin: +01:00 in March),
	// UTC on hover.
	created := page.Locator(`#running time`).First()
	if n, _ := created.Count(); n > 0 {
		txt, _ := created.TextContent()
		title, _ := created.GetAttribute("title")
		assert.Regexp(t, `^2026-03-01 11:00:0\d\+01:00$`, txt)
		assert.Regexp(t, `^2026-03-01T10:00:0\dZ \(UTC\)$`, title)
	}

	// Tasks: filters and page in the address; a deep link opens the same.
	require.NoError(t, page.Locator(`#nav a[data-nav="tasks"]`).Click())
	require.NoError(t, expect.Locator(page.Locator("#tasks-count")).ToHaveAttribute("data-total", "3"))
	_, err = page.Goto(base + "/#/tasks?limit=1&page=2")
	require.NoError(t, err)
	require.NoError(t, expect.Locator(page.Locator("#page-info")).ToHaveText("2–2 of 3"))
	require.NoError(t, expect.Locator(page.Locator("#tasks-body tr")).ToHaveCount(1))
	require.NoError(t, page.Locator("#page-next").Click())
	require.NoError(t, expect.Page(page).ToHaveURL(base+"/#/tasks?limit=1&page=3"))
	require.NoError(t, expect.Locator(page.Locator("#page-info")).ToHaveText("3–3 of 3"))
	_, err = page.GoBack()
	require.NoError(t, err)
	require.NoError(t, expect.Locator(page.Locator("#page-info")).ToHaveText("2–2 of 3"), "the back button goes to the page before")
	_, err = page.Goto(base + "/#/tasks")
	require.NoError(t, err)
	_, err = page.Locator("#filter-state").SelectOption(playwright.SelectOptionValues{Values: &[]string{"COMPLETED"}})
	require.NoError(t, err)
	require.NoError(t, expect.Page(page).ToHaveURL(base+"/#/tasks?state=COMPLETED"))
	require.NoError(t, expect.Locator(page.Locator("#tasks-body tr")).ToHaveCount(1))
	shot("tasks.png")
	checkContrast(t, page, "tasks")

	// Task: its timeline and its conversation rendered as the document.
	require.NoError(t, page.Locator(fmt.Sprintf(`#tasks-body tr[data-task-id=%q] td.id a`, q0)).Click())
	require.NoError(t, expect.Page(page).ToHaveURL(base+"/#/task/"+strings.ReplaceAll(q0, "/", "%2F")))
	require.NoError(t, expect.Locator(page.Locator(`.timeline tr[data-step="answer"]`)).ToHaveCount(2))
	answer, err := page.Locator(`.timeline tr[data-step="answer"]`).First().TextContent()
	require.NoError(t, err)
	assert.Contains(t, answer, "simA")
	assert.Contains(t, answer, "1.0 s", "its duration")
	visible("#task-detail .msg.assistant .msg-body")
	shot("task.png")
	checkContrast(t, page, "task")
	_, err = page.GoBack()
	require.NoError(t, err)
	require.NoError(t, expect.Page(page).ToHaveURL(base+"/#/tasks?state=COMPLETED"), "back to the list as it was")

	// A failed task: its error in the list, retried from the panel.
	_, err = f.sys.Submit(doomedTask("d1"))
	require.NoError(t, err)
	doomed := "notebook/doomed/d1"
	f.drive("the doomed task failed", f.is(doomed, pb.TaskState_TASK_STATE_FAILED))
	_, err = page.Goto(base + "/#/tasks?state=FAILED")
	require.NoError(t, err)
	row := page.Locator(fmt.Sprintf(`#tasks-body tr[data-task-id=%q]`, doomed))
	require.NoError(t, expect.Locator(row.Locator(".task-error")).ToContainText("the order-10 check found no plane yet"))
	shot("tasks-failed.png")
	checkContrast(t, page, "tasks-failed")
	f.notebook.healed.Store(true)
	require.NoError(t, row.Locator("button.retry-btn").Click())
	require.NoError(t, expect.Locator(page.Locator("#tasks-result")).ToHaveText(doomed+": back in the queue"))
	f.drive("the retried task completed", f.is(doomed, pb.TaskState_TASK_STATE_COMPLETED))

	// Cancel asks for a confirmation and a reason (the backend paused, so
	// the task waits).
	require.NoError(t, f.sys.PauseBackend("simA", "test", true))
	_, err = f.sys.Submit(doomedTask("d2"))
	require.NoError(t, err)
	waiting := "notebook/doomed/d2"
	_, err = page.Goto(base + "/#/task/" + waiting)
	require.NoError(t, err)
	require.NoError(t, page.Locator("#task-detail button.cancel-btn").Click())
	require.NoError(t, expect.Locator(page.Locator("#confirm")).ToBeVisible())
	require.NoError(t, page.Locator("#confirm-no").Click())
	require.NoError(t, expect.Locator(page.Locator("#confirm")).Not().ToBeVisible())
	assert.Equal(t, pb.TaskState_TASK_STATE_PENDING, f.state(waiting), "going back cancels nothing")
	require.NoError(t, page.Locator("#task-detail button.cancel-btn").Click())
	require.NoError(t, page.Locator("#confirm-reason").Fill("a duplicate of q1"))
	require.NoError(t, page.Locator("#confirm-yes").Click())
	require.NoError(t, expect.Locator(page.Locator("#task-state")).ToHaveAttribute("data-state", "CANCELLED"))
	require.NoError(t, expect.Locator(page.Locator(`.timeline tr[data-step="cancelled"]`)).ToContainText("a duplicate of q1"))
	require.NoError(t, f.sys.PauseBackend("simA", "", false))

	// Alerts: raised, notified (opted in), resolved.
	_, err = page.Goto(base + "/#/alerts")
	require.NoError(t, err)
	visible("#alerts-empty")
	require.NoError(t, page.Locator("#notify-btn").Click())
	require.NoError(t, expect.Locator(page.Locator("#notify-state")).ToHaveText("notifications on while this page is open"))
	f.publishAlert("low_disk", "free disk space 1.00 GB is below the minimum 5.00 GB", false)
	alertRow := page.Locator(`#alerts-body tr[data-alert="low_disk"]`)
	require.NoError(t, expect.Locator(alertRow).ToHaveAttribute("data-open", "true"))
	require.NoError(t, expect.Locator(alertRow).ToContainText("needs you"))
	require.NoError(t, expect.Locator(page.Locator("#alert-count")).ToHaveText("1"))
	notes, err := page.Evaluate("() => window.__notes")
	require.NoError(t, err)
	assert.Equal(t, []any{"fano: low disk | free disk space 1.00 GB is below the minimum 5.00 GB\nTo do: " + healthActions["low_disk"]}, notes)
	shot("alerts-open.png")
	checkContrast(t, page, "alerts-open")
	f.clock.Advance(time.Minute)
	f.publishAlert("low_disk", "free disk space 6.00 GB is back above the minimum 5.00 GB", true)
	require.NoError(t, expect.Locator(alertRow).ToHaveAttribute("data-open", "false"))
	require.NoError(t, expect.Locator(alertRow).ToContainText("back above the minimum"))
	require.NoError(t, expect.Locator(page.Locator("#alert-count")).Not().ToBeVisible())
	shot("alerts.png")
	checkContrast(t, page, "alerts")

	// Backends.
	require.NoError(t, page.Locator(`#nav a[data-nav="backends"]`).Click())
	visible(`[data-backend="simA"] .bar`)
	desk := page.Locator(`#hosts-body tr[data-host="desk"]`)
	require.NoError(t, expect.Locator(desk).ToHaveAttribute("data-state", "lost"))
	require.NoError(t, expect.Locator(desk).ToContainText("192.0.2.7:8091"))
	require.NoError(t, expect.Locator(desk).ToContainText("1.0.0"))
	require.NoError(t, expect.Locator(desk).ToContainText("simA"))
	require.NoError(t, expect.Locator(desk).ToContainText("1.3 ms"))
	require.NoError(t, expect.Locator(desk).ToContainText("not heard for 15s"))
	// Last heard and since: ISO 8601 in the page's zone, UTC on hover.
	heard := desk.Locator(`time[datetime="2026-03-01T09:05:00Z"]`)
	require.NoError(t, expect.Locator(heard).ToHaveText("2026-03-01 10:05:00+01:00"))
	require.NoError(t, expect.Locator(heard).ToHaveAttribute("title", "2026-03-01T09:05:00Z (UTC)"))
	require.NoError(t, expect.Locator(desk.Locator(`time[datetime="2026-03-01T09:05:20Z"]`)).ToBeVisible())
	require.NoError(t, expect.Locator(page.Locator(`#hosts-body tr[data-host="tower"]`)).ToHaveAttribute("data-state", "refused"))
	onHost := page.Locator(`[data-backend="simA"] .on-host`)
	require.NoError(t, expect.Locator(onHost).ToHaveText("on gateway host desk (lost)"))
	shot("backends.png")
	checkContrast(t, page, "backends")
	// desk comes back: the view shows it without an event or a reload.
	deskBack := deskLost
	deskBack.State, deskBack.Reason, deskBack.Since, deskBack.LastHeard = "connected", "", lostAt.Add(time.Minute), lostAt.Add(time.Minute)
	hosts.set(deskBack, tower)
	require.NoError(t, expect.Locator(desk).ToHaveAttribute("data-state", "connected"))
	require.NoError(t, expect.Locator(onHost).ToHaveText("on gateway host desk"))

	// Document: math rendered, a comment on a section where it stands.
	require.NoError(t, page.Locator(`#nav a[data-nav="document"]`).Click())
	require.NoError(t, expect.Locator(page.Locator("#document .katex").First()).ToBeVisible())
	require.NoError(t, page.Locator(`#document button.comment-here[data-section="planes"]`).Click())
	form := page.Locator(`#document form.inline-comment[data-section="planes"]`)
	require.NoError(t, form.Locator("textarea").Fill("Say why there is no plane of order 6."))
	require.NoError(t, form.Locator("button[type=submit]").Click())
	require.NoError(t, expect.Locator(form.Locator(".result")).ToHaveText("Comment added: notebook addresses it first."))
	shot("document.png")
	checkContrast(t, page, "document")
	require.NoError(t, page.Locator(`#document form.inline-comment button.secondary`).Click())
	require.NoError(t, expect.Locator(page.Locator("#document")).ToContainText("comment: Say why there is no plane of order 6.",
		playwright.LocatorAssertionsToContainTextOptions{Timeout: playwright.Float(15000)}))

	// A change without the token says so as a sentence, and the message
	// goes once the token is saved.
	_, err = page.Evaluate(`() => localStorage.removeItem("fano.panel.token")`)
	require.NoError(t, err)
	require.NoError(t, page.Locator("#comment-section").Fill("intro"))
	require.NoError(t, page.Locator("#comment-text").Fill("Another remark."))
	require.NoError(t, page.Locator("#comment-form button[type=submit]").Click())
	require.NoError(t, expect.Locator(page.Locator("#comment-result")).ToHaveText(
		"This change needs the panel token: open “Token” at the top and paste it (it is in the file panel.token in the data directory)."))
	require.NoError(t, page.Locator("#token-box summary").Click())
	require.NoError(t, page.Locator("#token-input").Fill(testToken))
	require.NoError(t, page.Locator("#token-form button").Click())
	require.NoError(t, expect.Locator(page.Locator("#comment-result")).ToHaveText(""))

	// History: four charts, drawn by uPlot, with the backend in the legend.
	require.NoError(t, page.Locator(`#nav a[data-nav="history"]`).Click())
	require.NoError(t, expect.Locator(page.Locator("#view-history .uplot")).ToHaveCount(4))
	require.NoError(t, expect.Locator(page.Locator("#chart-requests .u-legend")).ToContainText("simA"))
	_, err = page.Locator("#history-hours").SelectOption(playwright.SelectOptionValues{Values: &[]string{"24"}})
	require.NoError(t, err)
	require.NoError(t, expect.Page(page).ToHaveURL(base+"/#/history?hours=24"))
	require.NoError(t, expect.Locator(page.Locator("#view-history .uplot")).ToHaveCount(4))
	shot("history.png")
	checkContrast(t, page, "history")

	// 800 px: nothing wider than the window, rows one line high.
	require.NoError(t, page.SetViewportSize(800, 900))
	_, err = page.Goto(base + "/#/tasks")
	require.NoError(t, err)
	require.NoError(t, expect.Locator(page.Locator("#tasks-body tr")).ToHaveCount(5))
	wide, err := page.Evaluate(`() => document.documentElement.scrollWidth`)
	require.NoError(t, err)
	assert.LessOrEqual(t, wide, 800, "no horizontal scroll at 800 px")
	fits, err := page.Evaluate(`() => { const t = document.getElementById("tasks"); return t.scrollWidth <= t.parentElement.clientWidth; }`)
	require.NoError(t, err)
	assert.Equal(t, true, fits, "the tasks table fits at 800 px, its buttons in view")
	tallest, err := page.Evaluate(`() => Math.max(...[...document.querySelectorAll("#tasks-body tr")].map(r => r.getBoundingClientRect().height))`)
	require.NoError(t, err)
	assert.Less(t, toFloat(tallest), 80.0, "task rows stay short at 800 px")
	shot("tasks-800.png")
	require.NoError(t, page.SetViewportSize(390, 844))
	for _, v := range []string{"", "tasks", "alerts", "history", "task/" + q0} {
		_, err = page.Goto(base + "/#/" + v)
		require.NoError(t, err)
		require.NoError(t, expect.Locator(page.Locator("#conn-state")).ToHaveAttribute("data-state", "live"))
		wide, err = page.Evaluate(`() => document.documentElement.scrollWidth`)
		require.NoError(t, err)
		assert.LessOrEqual(t, wide, 390, "no horizontal scroll on a phone (%q)", v)
		shot("phone-" + map[string]string{"": "overview", "tasks": "tasks", "alerts": "alerts", "history": "history", "task/" + q0: "task"}[v] + ".png")
	}

	// Dark mode follows the system.
	require.NoError(t, page.SetViewportSize(1280, 900))
	require.NoError(t, page.EmulateMedia(playwright.PageEmulateMediaOptions{ColorScheme: playwright.ColorSchemeDark}))
	_, err = page.Goto(base + "/#/")
	require.NoError(t, err)
	bg, err := page.Evaluate(`() => getComputedStyle(document.body).backgroundColor`)
	require.NoError(t, err)
	assert.Equal(t, "rgb(17, 20, 24)", bg)
	shot("overview-dark.png")
	checkContrast(t, page, "overview-dark")
	for _, v := range []string{"task/" + q0, "alerts", "backends", "document", "tasks?state=FAILED"} {
		_, err = page.Goto(base + "/#/" + v)
		require.NoError(t, err)
		require.NoError(t, expect.Locator(page.Locator("#conn-state")).ToHaveAttribute("data-state", "live"))
		require.NoError(t, page.WaitForLoadState(playwright.PageWaitForLoadStateOptions{State: playwright.LoadStateNetworkidle}))
		checkContrast(t, page, "dark "+v)
	}
	shot("tasks-dark.png")
	require.NoError(t, page.EmulateMedia(playwright.PageEmulateMediaOptions{ColorScheme: playwright.ColorSchemeLight}))

	// The simulation report: linked from the panel, styled like it, with
	// charts across the fortnight.
	sim := filepath.Join(f.srv.opts.DataDir, "simulation")
	require.NoError(t, os.MkdirAll(sim, 0o755))
	var days []string
	for d := 1; d <= 14; d++ {
		days = append(days, fmt.Sprintf(`{"day":%d,"insights_blessed":%d,"sections_written":%d,"sections_revised":%d,"tasks_completed":%d,"tasks_failed":%d,"quota_used":{"gpt":%d,"claude":%d}}`,
			d, d%5, d%3, d%2, 40+d, d%4, 300+10*d, 200+5*d))
	}
	require.NoError(t, os.WriteFile(filepath.Join(sim, "report.json"), []byte(`{"config":"fortnight.yaml","schedule":"faults.yaml","seed":7,
		"goals":[{"name":"no task lost","ok":true,"detail":"all 600 tasks ended"},{"name":"quota used","ok":false,"detail":"day 4: 71% of the usable budget"}],
		"days":[`+strings.Join(days, ",")+`]}`), 0o644))
	require.NoError(t, page.Locator(`#nav a[href="/simulation"]`).Click())
	require.NoError(t, expect.Page(page).ToHaveURL(base+"/simulation"))
	require.NoError(t, expect.Locator(page.Locator(".uplot")).ToHaveCount(3))
	require.NoError(t, expect.Locator(page.Locator("#sim-quota .u-legend")).ToContainText("claude"))
	shot("simulation.png")
	checkContrast(t, page, "simulation")
	require.NoError(t, page.Locator(`#nav a[href="/#/history"]`).Click())
	require.NoError(t, expect.Locator(page.Locator("#view-history .uplot")).ToHaveCount(4), "back to the panel from the simulation page")

	// fano stops with the page open: the page greys and says since when;
	// fano starts again on the same address and the page comes back.
	_, err = page.Goto(base + "/#/")
	require.NoError(t, err)
	require.NoError(t, expect.Locator(page.Locator("#conn-state")).ToHaveAttribute("data-state", "live"))
	_, err = page.WaitForFunction(`() => navigator.serviceWorker && navigator.serviceWorker.controller != null`, nil)
	require.NoError(t, err, "the service worker keeps a copy of the page")
	panel.stop()
	require.NoError(t, expect.Locator(page.Locator("#conn-state")).ToHaveAttribute("data-state", "offline"))
	require.NoError(t, expect.Locator(page.Locator("#conn-banner")).ToContainText("fano is not reachable since"))
	require.NoError(t, expect.Locator(page.Locator("body")).ToHaveClass("offline"))
	require.NoError(t, expect.Locator(page.Locator("#orch-state")).ToHaveText("unknown"))
	shot("offline.png")
	// A reload while fano is down shows the panel from its copy, saying
	// since when fano has not answered, not the browser's error page.
	_, err = page.Reload()
	require.NoError(t, err)
	require.NoError(t, expect.Locator(page.Locator("#conn-banner")).ToContainText("fano is not reachable since"))
	require.NoError(t, expect.Locator(page.Locator(`#nav a[data-nav="alerts"]`)).ToBeVisible())
	shot("offline-reloaded.png")
	panel = startLivePanel(t, f, panel.addr)
	t.Cleanup(func() { _ = panel.srv.Close() })
	require.NoError(t, expect.Locator(page.Locator("#conn-state")).ToHaveAttribute("data-state", "live",
		playwright.LocatorAssertionsToHaveAttributeOptions{Timeout: playwright.Float(20000)}), "the page reconnects by itself")
	require.NoError(t, expect.Locator(page.Locator("#conn-banner")).Not().ToBeVisible())
	require.NoError(t, expect.Locator(page.Locator("body")).Not().ToHaveClass("offline"))
	require.NoError(t, expect.Locator(page.Locator("#orch-state")).ToHaveText("running"))

	assert.Empty(t, *errs, "no script errors in the page")
}

// contrastFailures lists the visible texts of the page whose colour
// contrast with their background is below WCAG AA (4.5:1; 3:1 for large
// text), computed in the page from the styles as drawn.
const contrastFailures = `() => {
  const rgb = (s) => { const m = s.match(/[\d.]+/g); return m ? m.map(Number) : [0, 0, 0, 0]; };
  const lum = (c) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
  const blend = (top, under) => { const a = top.length > 3 ? top[3] : 1; return [0, 1, 2].map((i) => top[i] * a + under[i] * (1 - a)); };
  const background = (el) => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = rgb(getComputedStyle(e).backgroundColor);
      if ((c.length > 3 ? c[3] : 1) > 0) layers.push(c);
      if ((c.length > 3 ? c[3] : 1) >= 1) break;
    }
    let under = [255, 255, 255];
    for (let i = layers.length - 1; i >= 0; i--) under = blend(layers[i], under);
    return under;
  };
  const out = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (!n.textContent.trim()) continue;
    const el = n.parentElement;
    if (!el || el.closest(".katex, .u-legend .u-marker, canvas") || !el.getClientRects().length) continue;
    const st = getComputedStyle(el);
    if (st.visibility === "hidden" || parseFloat(st.opacity) === 0) continue;
    let faded = false;
    for (let e = el; e; e = e.parentElement) if (parseFloat(getComputedStyle(e).opacity) < 1 || e.closest("body.offline main")) { faded = true; break; }
    if (faded) continue; // greyed on purpose: fano is unreachable, or a disabled button
    const bg = background(el);
    const fg = blend(rgb(st.color), bg);
    const l1 = lum(fg), l2 = lum(bg);
    const ratio = (Math.max(l1, l2) + 0.05) / (Math.min(l1, l2) + 0.05);
    const size = parseFloat(st.fontSize), bold = parseInt(st.fontWeight, 10) >= 700;
    const need = size >= 24 || (bold && size >= 18.66) ? 3 : 4.5;
    if (ratio < need) out.push(n.textContent.trim().slice(0, 40) + " — " + ratio.toFixed(2) + ":1 (" + st.color + " on rgb(" + bg.map(Math.round).join(", ") + "))");
  }
  return [...new Set(out)];
}`

// checkContrast fails the test for every text below AA on the page.
func checkContrast(t *testing.T, page playwright.Page, where string) {
	t.Helper()
	got, err := page.Evaluate(contrastFailures)
	require.NoError(t, err)
	assert.Empty(t, got, "texts below WCAG AA contrast (%s)", where)
}

func toFloat(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case int:
		return float64(x)
	}
	panic(errors.New("not a number"))
}
