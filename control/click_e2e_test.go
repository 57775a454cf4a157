package control

import (
	"testing"

	"github.com/playwright-community/playwright-go"
	"github.com/stretchr/testify/require"

	"fano/pb"
)

// Events re-render the backend cards several times a second. A click
// whose mousedown and mouseup fall on either side of a re-render still
// pauses the backend: the button is kept, not rebuilt (a rebuilt one lost
// the click, and the end-to-end test waited for a pause that never came).
func TestPauseClickSurvivesRerender(t *testing.T) {
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
	card := `[data-backend="simA"]`
	btn := page.Locator(card + ` button[data-action="pause"]`)
	require.NoError(t, expect.Locator(btn).ToBeVisible())
	require.NoError(t, btn.ScrollIntoViewIfNeeded())
	box, err := btn.BoundingBox()
	require.NoError(t, err)
	require.NoError(t, page.Mouse().Move(box.X+box.Width/2, box.Y+box.Height/2))
	require.NoError(t, page.Mouse().Down())

	// An event re-renders the cards between mousedown and mouseup.
	_, err = page.Evaluate(`sel => document.querySelector(sel).setAttribute("data-before", "")`, card+" header")
	require.NoError(t, err)
	f.sys.Publish(&pb.StateUpdate{Component: "health", UpdateType: "disk_ok"})
	require.NoError(t, expect.Locator(page.Locator(card+" header[data-before]")).ToHaveCount(0), "the card was re-rendered")
	require.NoError(t, expect.Locator(page.Locator(card+" header")).ToHaveCount(1))
	require.NoError(t, page.Mouse().Up())

	require.NoError(t, expect.Locator(page.Locator(card)).ToHaveAttribute("data-state", "paused"), "the click paused the backend")
	for _, q := range f.sys.Quotas() {
		require.Equal(t, "paused", q.State, q.Name)
	}
}
