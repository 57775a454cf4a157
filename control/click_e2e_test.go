package control

import (
	"fmt"
	"testing"

	"github.com/playwright-community/playwright-go"
	"github.com/stretchr/testify/require"

	"fano/pb"
)

// Events re-render the backend cards and the tasks table several times a
// second. A click whose mousedown and mouseup fall on either side of a
// re-render still pauses the backend or cancels the task: the page keeps
// its buttons in place (a rebuilt button lost the click, and the
// end-to-end test waited for a pause that never came).
func TestClicksSurviveRerenders(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Chromium; run without -short")
	}
	f := newFixture(t, fixtureOpts{modules: []string{"probe", "notebook"}})
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
	page, err := browser.NewPage()
	require.NoError(t, err)
	expect := playwright.NewPlaywrightAssertions(20000)

	_, err = page.Goto(f.ts.URL + "/#token=" + testToken)
	require.NoError(t, err)
	require.NoError(t, expect.Locator(page.Locator("#conn-state")).ToHaveAttribute("data-state", "live"))
	_, err = page.Goto(f.ts.URL + "/#/backends")
	require.NoError(t, err)
	card := `[data-backend="simA"]`
	btn := page.Locator(card + ` button[data-action="pause"]`)
	require.NoError(t, expect.Locator(btn).ToBeVisible())
	require.NoError(t, btn.ScrollIntoViewIfNeeded())
	box, err := btn.BoundingBox()
	require.NoError(t, err)
	require.NoError(t, page.Mouse().Move(box.X+box.Width/2, box.Y+box.Height/2))
	require.NoError(t, page.Mouse().Down())

	// An event re-renders the cards between mousedown and mouseup.
	_, err = page.Evaluate(`sel => document.querySelector(sel).setAttribute("data-before", "")`, card+" .backend-head")
	require.NoError(t, err)
	f.sys.Publish(&pb.StateUpdate{Component: "health", UpdateType: "disk_ok"})
	require.NoError(t, expect.Locator(page.Locator(card+" .backend-head[data-before]")).ToHaveCount(0), "the card was re-rendered")
	require.NoError(t, expect.Locator(page.Locator(card+" .backend-head")).ToHaveCount(1))
	require.NoError(t, page.Mouse().Up())

	require.NoError(t, expect.Locator(page.Locator(card)).ToHaveAttribute("data-state", "paused"), "the click paused the backend")
	for _, q := range f.sys.Quotas() {
		require.Equal(t, "paused", q.State, q.Name)
	}

	// The same for a task's cancel button while the tasks table re-renders.
	_, err = page.Goto(f.ts.URL + "/#/tasks")
	require.NoError(t, err)
	row := fmt.Sprintf(`#tasks-body tr[data-task-id=%q]`, q1)
	cancel := page.Locator(row + " button.cancel-btn")
	require.NoError(t, expect.Locator(cancel).ToBeVisible())
	require.NoError(t, cancel.ScrollIntoViewIfNeeded())
	box, err = cancel.BoundingBox()
	require.NoError(t, err)
	require.NoError(t, page.Mouse().Move(box.X+box.Width/2, box.Y+box.Height/2))
	require.NoError(t, page.Mouse().Down())
	_, err = page.Evaluate(`sel => document.querySelector(sel).setAttribute("data-before", "")`, row+" .badge")
	require.NoError(t, err)
	f.sys.Publish(&pb.StateUpdate{Component: "health", UpdateType: "disk_ok"})
	require.NoError(t, expect.Locator(page.Locator(row+" .badge[data-before]")).ToHaveCount(0), "the table was re-rendered")
	require.NoError(t, expect.Locator(page.Locator(row+" .badge")).ToHaveCount(1))
	require.NoError(t, page.Mouse().Up())
	require.NoError(t, expect.Locator(page.Locator("#confirm")).ToBeVisible(), "the click asks to confirm")
	require.NoError(t, page.Locator("#confirm-yes").Click())
	require.NoError(t, expect.Locator(page.Locator(row)).ToHaveAttribute("data-state", "CANCELLED"), "the click cancelled %s", q1)
}
