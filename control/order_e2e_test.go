package control

import (
	"strings"
	"testing"

	"github.com/playwright-community/playwright-go"
	"github.com/stretchr/testify/require"
)

// Answers reach the page in any order. When the tasks list asked for
// every task and then, before that answer came, for the running ones, the
// late answer for every task must not be drawn over the running ones:
// the filter says RUNNING and the table must show the one running task.
// (CI saw the three tasks of the older answer under a filter that
// matched one.)
func TestOlderAnswerDoesNotOverwriteNewerFilter(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Chromium; run without -short")
	}
	f := newFixture(t, fixtureOpts{modules: []string{"probe", "notebook"}})
	_, _, page, errs := browserPage(t, 1280, 900)
	expect := playwright.NewPlaywrightAssertions(15000)

	_, err := page.Goto(f.ts.URL + "/#token=" + testToken)
	require.NoError(t, err)
	require.NoError(t, expect.Locator(page.Locator("#conn-state")).ToHaveAttribute("data-state", "live"))

	// Every unfiltered list answer is held until the test lets it go.
	held := make(chan struct{}, 64)
	release := make(chan struct{})
	require.NoError(t, page.Route("**/api/tasks?*", func(r playwright.Route) {
		if strings.Contains(r.Request().URL(), "state=") {
			go func() { _ = r.Continue() }()
			return
		}
		held <- struct{}{}
		go func() {
			<-release
			_ = r.Continue()
		}()
	}))

	_, err = page.Goto(f.ts.URL + "/#/tasks")
	require.NoError(t, err)
	<-held
	_, err = page.Locator("#filter-state").SelectOption(playwright.SelectOptionValues{Values: &[]string{"RUNNING"}})
	require.NoError(t, err)
	require.NoError(t, expect.Page(page).ToHaveURL(f.ts.URL+"/#/tasks?state=RUNNING"))
	require.NoError(t, expect.Locator(page.Locator("#tasks-body tr")).ToHaveCount(1))
	require.NoError(t, expect.Locator(page.Locator("#tasks-count")).ToHaveAttribute("data-total", "1"))

	// The older answer arrives; once no refresh is in flight, the table
	// still shows what the filter asks for.
	close(release)
	require.NoError(t, expect.Locator(page.Locator("#view-tasks")).ToHaveAttribute("aria-busy", "false"))
	require.NoError(t, expect.Locator(page.Locator("#tasks-body tr")).ToHaveCount(1))
	require.NoError(t, expect.Locator(page.Locator("#tasks-count")).ToHaveAttribute("data-total", "1"))
	require.NoError(t, expect.Locator(page.Locator(`#tasks-body tr[data-state="RUNNING"]`)).ToHaveCount(1))
	require.Empty(t, *errs)
}
