package documenter

import (
	"bytes"
	"embed"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/template"
	"unicode/utf8"
)

// The prompts are text/template files embedded in the module; a file of
// the same name in Config.PromptsDir (documenter.prompts_dir) replaces one.
//
//go:embed prompts/*.tmpl
var promptFS embed.FS

// Prompt names (files <name>.tmpl).
const (
	promptMath       = "math_evaluation"
	promptDraft      = "draft_section"
	promptExposition = "exposition_evaluation"
	promptComment    = "address_comment"
	promptReview     = "review_section"
)

var promptNames = []string{promptMath, promptDraft, promptExposition, promptComment, promptReview}

// Data of the templates.
type (
	oppData struct {
		Title        string // the document's title
		Insight      string
		Tags         []string
		Seed         string
		Section      string // the section a draft extends (Markdown), if any
		SectionTitle string
		Critique     string // why the previous draft was refused
		Draft        string // the draft under exposition evaluation
	}

	commentData struct {
		Title   string // the section's title
		Section string // its Markdown
		Comment string
	}
)

// samples render each template once at load, so a template that names a
// field that does not exist fails at start, naming its file.
var samples = map[string]any{
	promptMath:       oppData{Title: "t", Insight: "i", Tags: []string{"x"}, Seed: "q"},
	promptDraft:      oppData{Title: "t", Insight: "i", Tags: []string{"x"}, Seed: "q", Section: "s", SectionTitle: "st", Critique: "c"},
	promptExposition: oppData{Title: "t", Insight: "i", Draft: "d"},
	promptComment:    commentData{Title: "t", Section: "s", Comment: "c"},
	promptReview:     commentData{Title: "t", Section: "s"},
}

var promptFuncs = template.FuncMap{
	// clip shortens s to at most n characters, at a word boundary.
	"clip": clip,
}

func clip(n int, s string) string {
	s = strings.TrimSpace(s)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)[:n]
	cut := string(r)
	if i := strings.LastIndexAny(cut, " \n"); i > n/2 {
		cut = cut[:i]
	}
	return strings.TrimSpace(cut) + " …"
}

type prompts struct {
	t map[string]*template.Template
}

// loadPrompts parses the embedded templates and the overrides of dir.
func loadPrompts(dir string) (*prompts, error) {
	p := &prompts{t: map[string]*template.Template{}}
	for _, name := range promptNames {
		src, err := promptFS.ReadFile("prompts/" + name + ".tmpl")
		if err != nil {
			return nil, fmt.Errorf("documenter: built-in prompt %s: %w", name, err)
		}
		if err := p.parse(name, "built-in prompts/"+name+".tmpl", string(src)); err != nil {
			return nil, err
		}
	}
	if dir == "" {
		return p, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("documenter: prompts_dir: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".tmpl") {
			continue
		}
		name := strings.TrimSuffix(e.Name(), ".tmpl")
		path := filepath.Join(dir, e.Name())
		if !slices.Contains(promptNames, name) {
			return nil, fmt.Errorf("documenter: prompts_dir: %s is not a prompt of the documenter (known: %s)", path, strings.Join(promptNames, ", "))
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("documenter: prompts_dir: %w", err)
		}
		if err := p.parse(name, path, string(src)); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (p *prompts) parse(name, file, src string) error {
	t, err := template.New(name).Funcs(promptFuncs).Option("missingkey=error").Parse(src)
	if err != nil {
		return fmt.Errorf("documenter: prompt %s: %w", file, err)
	}
	if err := t.Execute(&bytes.Buffer{}, samples[name]); err != nil {
		return fmt.Errorf("documenter: prompt %s: %w", file, err)
	}
	p.t[name] = t
	return nil
}

func (p *prompts) render(name string, data any) (string, error) {
	var b bytes.Buffer
	if err := p.t[name].Execute(&b, data); err != nil {
		return "", fmt.Errorf("documenter: render prompt %s: %w", name, err)
	}
	return strings.TrimSpace(b.String()) + "\n", nil
}
