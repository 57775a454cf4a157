package control

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/playwright-community/playwright-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// renderSample is a document as the documenter writes it: anchors,
// footers, a contents list, emphasis, inline and display LaTeX (with
// underscores and stars that must not turn into emphasis), and HTML that
// must stay text.
const renderSample = "# Finite Projective Planes\n\n## Contents\n\n1. [Planes of order n](#sec-1)\n\n" +
	"<a id=\"sec-1\"></a>\n\n## 1. Planes of order n\n\n" +
	"A projective plane of order $n$ has $n^2+n+1$ points, with $n+1$ points on each line; for **the Fano plane** $n=2$ and $a_1 * a_2$ stays math.\n\n" +
	"$$\\sum_{i=1}^{7} |L_i| = 21$$\n\n" +
	"It costs \\$5 and <img src=x onerror=alert(1)> stays text.\n\n" +
	"<sub>Section sec-1 · from insights in-1 · version 2 · comments: 1 resolved, 0 open</sub>\n"

// The panel renders the document with the vendored Markdown library and
// KaTeX, served from the binary (no network beyond 127.0.0.1): formulas
// become KaTeX with its own fonts loaded, the document's anchors and
// footers survive and nothing else of its HTML does. Checked in real
// Chromium, with a screenshot.
func TestDocumentRendersMathInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Chromium; run without -short")
	}
	driverDir, chromium := browserDeps(t)
	srv := httptest.NewServer((&Server{}).webHandler())
	defer srv.Close()

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
	page, err := browser.NewPage(playwright.BrowserNewPageOptions{Viewport: &playwright.Size{Width: 1000, Height: 900}})
	require.NoError(t, err)
	var cspErrs []string
	page.OnConsole(func(m playwright.ConsoleMessage) {
		if strings.Contains(m.Text(), "Content Security Policy") {
			cspErrs = append(cspErrs, m.Text())
		}
	})
	_, err = page.Goto(srv.URL + "/#/document")
	require.NoError(t, err)
	_, err = page.WaitForFunction("() => window.fanoMarkdown && window.katex", nil)
	require.NoError(t, err)

	html, err := page.Evaluate(`md => { const box = document.getElementById("document"); box.className = "document";
		box.innerHTML = window.fanoMarkdown.render(md); box.scrollIntoView(); return box.innerHTML; }`, renderSample)
	require.NoError(t, err)
	out := html.(string)
	assert.Contains(t, out, `<a id="sec-1"></a>`)
	assert.Contains(t, out, `<a href="#sec-1">Planes of order n</a>`)
	assert.Contains(t, out, "<sub>Section sec-1 · from insights in-1 · version 2 · comments: 1 resolved, 0 open</sub>")
	assert.Contains(t, out, "<strong>the Fano plane</strong>")
	assert.Contains(t, out, "&lt;img src=x onerror=alert(1)&gt;", "the document's HTML stays text")
	assert.NotContains(t, out, "<img")
	assert.Contains(t, out, "$5", "an escaped dollar is text")
	assert.NotContains(t, out, "<em>", "a star inside math is no emphasis")

	katex := page.Locator("#document .katex")
	n, err := katex.Count()
	require.NoError(t, err)
	assert.Equal(t, 6, n, "five inline formulas and one display formula")
	require.NoError(t, playwright.NewPlaywrightAssertions(20000).Locator(page.Locator("#document .katex-display")).ToHaveCount(1))
	text, err := page.Locator("#document .katex-mathml annotation").First().TextContent()
	require.NoError(t, err)
	assert.Equal(t, "n", text)
	fonts, err := page.Evaluate(`async () => { await document.fonts.ready; return document.fonts.check("16px KaTeX_Main") && document.fonts.check("italic 16px KaTeX_Math"); }`)
	require.NoError(t, err)
	assert.Equal(t, true, fonts, "KaTeX's fonts load from the binary")
	assert.Empty(t, cspErrs, "the page's security policy allows the renderer")

	require.NoError(t, os.MkdirAll(artifactDir, 0o755))
	path := filepath.Join(artifactDir, "document-katex.png")
	_, err = page.Locator("#document").Screenshot(playwright.LocatorScreenshotOptions{Path: playwright.String(path)})
	require.NoError(t, err)
	t.Logf("screenshot: %s", path)
}
