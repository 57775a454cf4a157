package researcher

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
// the same name in Config.PromptsDir (researcher.prompts_dir) replaces one.
//
//go:embed prompts/*.tmpl
var promptFS embed.FS

// Prompt names (files <name>.tmpl).
const (
	promptQuestions  = "generate_questions"
	promptEvaluate   = "evaluate_source"
	promptExtract    = "extract_content"
	promptSynthesize = "synthesize_findings"
)

var promptNames = []string{promptQuestions, promptEvaluate, promptExtract, promptSynthesize}

// promptData is the data of every template.
type promptData struct {
	Name     string   // the source's file name
	Source   string   // its text
	Extract  string   // what extract_content kept
	Sections []string // the document's section titles
	Max      int      // questions wanted
}

// samples render each template once at load, so a template that names a
// field that does not exist fails at start, naming its file.
var samples = map[string]any{
	promptQuestions:  promptData{Sections: []string{"s"}, Max: 2},
	promptEvaluate:   promptData{Name: "n", Source: "s"},
	promptExtract:    promptData{Name: "n", Source: "s"},
	promptSynthesize: promptData{Name: "n", Source: "s", Extract: "e"},
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
			return nil, fmt.Errorf("researcher: built-in prompt %s: %w", name, err)
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
		return nil, fmt.Errorf("researcher: prompts_dir: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".tmpl") {
			continue
		}
		name := strings.TrimSuffix(e.Name(), ".tmpl")
		path := filepath.Join(dir, e.Name())
		if !slices.Contains(promptNames, name) {
			return nil, fmt.Errorf("researcher: prompts_dir: %s is not a prompt of the researcher (known: %s)", path, strings.Join(promptNames, ", "))
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("researcher: prompts_dir: %w", err)
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
		return fmt.Errorf("researcher: prompt %s: %w", file, err)
	}
	if err := t.Execute(&bytes.Buffer{}, samples[name]); err != nil {
		return fmt.Errorf("researcher: prompt %s: %w", file, err)
	}
	p.t[name] = t
	return nil
}

func (p *prompts) render(name string, data any) (string, error) {
	var b bytes.Buffer
	if err := p.t[name].Execute(&b, data); err != nil {
		return "", fmt.Errorf("researcher: render prompt %s: %w", name, err)
	}
	return strings.TrimSpace(b.String()) + "\n", nil
}
