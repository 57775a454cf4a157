package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/playwright-community/playwright-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/modules/documenter"
)

// writeDoc puts a document's output files into dataDir/output.
func writeDoc(t *testing.T, dataDir string, doc documenter.DocumentFile, md string) {
	t.Helper()
	out := filepath.Join(dataDir, "output")
	require.NoError(t, os.MkdirAll(out, 0o755))
	b, err := json.Marshal(doc)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(out, documenter.DocumentJSON), b, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(out, documenter.DocumentMD), []byte(md), 0o644))
}

// `fano doc check` reports each flaw with its kind and exits 1; --json
// counts them by kind; a missing document is one clear error.
func TestDocCheckCommand(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := execute([]string{"doc", "check", "--data-dir", dir}, &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), "no document at "+filepath.Join(dir, "output", documenter.DocumentJSON))

	writeDoc(t, dir, documenter.DocumentFile{Title: "T", Sections: []documenter.SectionFile{
		{ID: "sec-a", Anchor: "sec-a", Title: "Size", Markdown: "The Fano plane has exactly 7 points and 7 lines."},
		{ID: "sec-b", Anchor: "sec-b", Title: "Size", Markdown: "The Fano plane has exactly seven points and seven lines. Let me know if you want more."},
	}}, "# T\n\n1. [Size](#sec-a)\n")
	stdout.Reset()
	stderr.Reset()
	code = execute([]string{"doc", "check", "--json", "--data-dir", dir}, &stdout, &stderr)
	assert.Equal(t, 1, code, stderr.String())
	var rep docCheckReport
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &rep), stdout.String())
	assert.Equal(t, map[string]int{"repeated_sentence": 1, "repeated_title": 1, "filler": 1, "broken_anchor": 0, "empty_section": 0}, rep.Counts)
	assert.False(t, rep.Clean)
}

// `fano doc export --format html` writes one file that needs nothing
// else: opened in Chromium with every request refused, its formulas are
// KaTeX; pdf and tex without pandoc are one clear error.
func TestDocExportHTMLStandalone(t *testing.T) {
	dir := t.TempDir()
	md := "# Planes\n\n## Contents\n\n1. [Order](#sec-a)\n\n<a id=\"sec-a\"></a>\n\n## 1. Order\n\nA plane of order $n$ has $n^2+n+1$ points.\n\n$$\\sum_{i=1}^{7} |L_i| = 21$$\n"
	writeDoc(t, dir, documenter.DocumentFile{Title: "Planes", Sections: []documenter.SectionFile{{ID: "sec-a", Anchor: "sec-a", Title: "Order", Markdown: "A plane of order $n$ has $n^2+n+1$ points."}}}, md)
	out := filepath.Join(dir, "doc.html")
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, execute([]string{"doc", "export", "--data-dir", dir, "--out", out}, &stdout, &stderr), stderr.String())
	page, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.NotContains(t, string(page), `src="http`)
	assert.NotContains(t, string(page), `url(fonts/`, "fonts are inlined")
	assert.Contains(t, string(page), "data:font/woff2;base64,")

	if _, err := exec.LookPath("pandoc"); err != nil {
		stderr.Reset()
		assert.Equal(t, 1, execute([]string{"doc", "export", "--data-dir", dir, "--format", "pdf"}, &stdout, &stderr))
		assert.Contains(t, stderr.String(), "needs pandoc")
	}

	if testing.Short() {
		return
	}
	chromium, err := exec.LookPath("chromium")
	require.NoError(t, err, "Chromium is needed: run `make deps`")
	home, _ := os.UserHomeDir()
	driver := os.Getenv("PLAYWRIGHT_DRIVER_PATH")
	if driver == "" {
		driver = filepath.Join(home, ".cache", "fano", "playwright-driver")
	}
	pw, err := playwright.Run(&playwright.RunOptions{DriverDirectory: driver, SkipInstallBrowsers: true})
	require.NoError(t, err)
	defer pw.Stop()
	browser, err := pw.Chromium.Launch(playwright.BrowserTypeLaunchOptions{ExecutablePath: playwright.String(chromium), Headless: playwright.Bool(true),
		Args: []string{"--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"}})
	require.NoError(t, err)
	defer browser.Close()
	p, err := browser.NewPage()
	require.NoError(t, err)
	var fetched []string
	require.NoError(t, p.Route("**/*", func(r playwright.Route) {
		if u := r.Request().URL(); !strings.HasPrefix(u, "file://") {
			fetched = append(fetched, u)
			_ = r.Abort()
			return
		}
		_ = r.Continue()
	}))
	_, err = p.Goto("file://" + out)
	require.NoError(t, err)
	n, err := p.Locator("#document .katex").Count()
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	fonts, err := p.Evaluate(`async () => { await document.fonts.ready; return document.fonts.check("16px KaTeX_Main"); }`)
	require.NoError(t, err)
	assert.Equal(t, true, fonts)
	assert.Empty(t, fetched, "the file fetches nothing")
	art := filepath.Join("..", "..", "testdata", "artifacts")
	require.NoError(t, os.MkdirAll(art, 0o755))
	_, err = p.Screenshot(playwright.PageScreenshotOptions{Path: playwright.String(filepath.Join(art, "document-export.png"))})
	require.NoError(t, err)
}
