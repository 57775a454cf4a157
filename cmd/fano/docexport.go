package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"fano/control"
	"fano/modules/documenter"
)

// `fano doc export`: the document as one standalone file. HTML is
// rendered by the panel's own renderer (markdown-it and KaTeX, with
// KaTeX's fonts inlined), so the file opens offline and looks as the panel
// shows it; LaTeX and PDF are pandoc's, where pandoc is installed.

func newDocExportCmd(g *globals) *cobra.Command {
	var format, out string
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write the document as one standalone file (--format html|pdf|tex)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				out = "DOCUMENT." + format
			}
			if err := docExport(g, format, out); err != nil {
				return err
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", out)
			return err
		},
	}
	cmd.Flags().StringVar(&format, "format", "html", "html, pdf or tex")
	cmd.Flags().StringVar(&out, "out", "", "the file to write (default DOCUMENT.<format> in the current directory)")
	return cmd
}

func docExport(g *globals, format, out string) error {
	switch format {
	case "html", "pdf", "tex":
	default:
		return fmt.Errorf("doc export: --format %q: want html, pdf or tex", format)
	}
	doc, md, path, err := readDocument(g)
	if err != nil {
		return err
	}
	if md == "" {
		return fmt.Errorf("doc export: no %s beside %s", documenter.DocumentMD, path)
	}
	if format == "html" {
		page, err := standaloneHTML(doc.Title, md)
		if err != nil {
			return err
		}
		return writeFileAtomic(out, page)
	}
	pandoc, err := exec.LookPath("pandoc")
	if err != nil {
		return fmt.Errorf("doc export: --format %s needs pandoc, which is not installed (--format html needs nothing)", format)
	}
	args := []string{"--from", "markdown+tex_math_dollars", "--standalone", "--metadata", "title=" + doc.Title, "--output", out}
	c := exec.Command(pandoc, args...)
	c.Stdin = strings.NewReader(stripTitle(md))
	if b, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("doc export: pandoc: %w: %s", err, strings.TrimSpace(string(b)))
	}
	return nil
}

// stripTitle drops DOCUMENT.md's first-line title (pandoc sets it from
// the metadata).
func stripTitle(md string) string {
	if strings.HasPrefix(md, "# ") {
		if _, rest, ok := strings.Cut(md, "\n"); ok {
			return rest
		}
	}
	return md
}

// fontURL matches KaTeX's font references; woff and ttf fallbacks are
// dropped, woff2 inlined.
var fontURL = regexp.MustCompile(`,?url\(fonts/([A-Za-z0-9_-]+)\.(woff2|woff|ttf)\) format\("[a-z0-9]+"\)`)

// standaloneHTML is one HTML file holding the document's Markdown, the
// renderer and KaTeX (fonts as data URLs): nothing is fetched when it
// opens.
func standaloneHTML(title, md string) ([]byte, error) {
	asset := func(name string) (string, error) {
		b, err := control.Asset(name)
		if err != nil {
			return "", fmt.Errorf("doc export: embedded asset %s: %w", name, err)
		}
		return string(b), nil
	}
	css, err := asset("vendor/katex.min.css")
	if err != nil {
		return nil, err
	}
	var fontErr error
	css = fontURL.ReplaceAllStringFunc(css, func(m string) string {
		sub := fontURL.FindStringSubmatch(m)
		if sub[2] != "woff2" {
			return ""
		}
		b, err := control.Asset("vendor/fonts/" + sub[1] + ".woff2")
		if err != nil {
			fontErr = err
			return ""
		}
		lead := ""
		if strings.HasPrefix(m, ",") {
			lead = ","
		}
		return lead + `url(data:font/woff2;base64,` + base64.StdEncoding.EncodeToString(b) + `) format("woff2")`
	})
	if fontErr != nil {
		return nil, fmt.Errorf("doc export: KaTeX font: %w", fontErr)
	}
	var scripts []string
	for _, name := range []string{"vendor/markdown-it.min.js", "vendor/katex.min.js", "markdown.js"} {
		s, err := asset(name)
		if err != nil {
			return nil, err
		}
		scripts = append(scripts, strings.ReplaceAll(s, "</script", `<\/script`))
	}
	src, err := json.Marshal(md) // escapes <, > and &: safe inside <script>
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>%s</title>\n", html.EscapeString(title))
	fmt.Fprintf(&b, "<style>\n%s\n%s\n</style>\n</head>\n<body>\n<main id=\"document\"></main>\n", css, exportCSS)
	for _, s := range scripts {
		fmt.Fprintf(&b, "<script>\n%s\n</script>\n", s)
	}
	fmt.Fprintf(&b, "<script type=\"application/json\" id=\"source\">%s</script>\n", src)
	b.WriteString("<script>\ndocument.getElementById(\"document\").innerHTML = window.fanoMarkdown.render(JSON.parse(document.getElementById(\"source\").textContent));\n</script>\n</body>\n</html>\n")
	return b.Bytes(), nil
}

const exportCSS = `body { margin: 0; background: #fff; color: #1b1f24; }
main { max-width: 46rem; margin: 2rem auto; padding: 0 1.5rem; font: 17px/1.6 Georgia, "Times New Roman", serif; }
h1, h2, h3 { font-family: system-ui, sans-serif; line-height: 1.25; }
sub { display: block; color: #6a737d; font-size: 0.8rem; margin-bottom: 2rem; }
code, pre { font-family: ui-monospace, monospace; font-size: 0.9em; }
.katex-display { margin: 1em 0; overflow-x: auto; }`

// writeFileAtomic writes path through a temporary file and a rename, so
// a reader never sees half a document.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("doc export: %w", err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("doc export: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("doc export: write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("doc export: write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("doc export: %w", err)
	}
	return nil
}
