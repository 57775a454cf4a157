package explorer

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
// the same name in Config.PromptsDir (explorer.prompts_dir) replaces one.
//
//go:embed prompts/*.tmpl
var promptFS embed.FS

// Prompt names (files <name>.tmpl).
const (
	promptStart     = "exploration_start"
	promptFollowup  = "exploration_followup"
	promptCritique  = "critique"
	promptSynthesis = "synthesis"
	promptExtract   = "insight_extraction"
	promptReview    = "insight_review"
	promptDedup     = "dedup_confirm"
)

var promptNames = []string{promptStart, promptFollowup, promptCritique, promptSynthesis, promptExtract, promptReview, promptDedup}

// Data of each template.
type (
	startData struct{ Seed string }

	followupData struct {
		Seed         string
		Turn, Turns  int      // this request's step, 1-based, of Turns
		Recent       []string // the first sentences of the latest answers
		OpenQuestion string   // the question the last answer ended with, if any
		Exchanges    []Exchange
	}

	threadData struct {
		Seed      string
		Exchanges []Exchange // exploration exchanges
		Critique  string
	}

	extractData struct {
		Seed                            string
		Chunk                           string
		MinChars, MaxChars, MaxInsights int
		Retry                           string // why the previous answer was refused
	}

	reviewPromptData struct {
		Seed               string
		Insight            string
		Round              int
		Previous           string // the text before the revision (round > 1)
		PriorReviews       []Review
		MinChars, MaxChars int
	}

	dedupPair struct {
		A, B          int
		New, Existing string
	}

	dedupData struct{ Pairs []dedupPair }
)

// samples render each template once at load, so a template that names a
// field that does not exist fails at start, naming its file.
var samples = map[string]any{
	promptStart:     startData{Seed: "q"},
	promptFollowup:  followupData{Seed: "q", Turn: 2, Turns: 3, Recent: []string{"a"}, OpenQuestion: "why?", Exchanges: []Exchange{{Answer: "a"}}},
	promptCritique:  threadData{Seed: "q", Exchanges: []Exchange{{Answer: "a"}}, Critique: "c"},
	promptSynthesis: threadData{Seed: "q", Exchanges: []Exchange{{Answer: "a"}}, Critique: "c"},
	promptExtract:   extractData{Seed: "q", Chunk: "c", MinChars: 1, MaxChars: 2, MaxInsights: 3, Retry: "r"},
	promptReview:    reviewPromptData{Seed: "q", Insight: "i", Round: 2, Previous: "p", PriorReviews: []Review{{Verdict: "revise"}}, MinChars: 1, MaxChars: 2},
	promptDedup:     dedupData{Pairs: []dedupPair{{A: 1, B: 2, New: "a", Existing: "b"}}},
}

var promptFuncs = template.FuncMap{
	"inc": func(i int) int { return i + 1 },
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
			return nil, fmt.Errorf("explorer: built-in prompt %s: %w", name, err)
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
		return nil, fmt.Errorf("explorer: prompts_dir: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".tmpl") {
			continue
		}
		name := strings.TrimSuffix(e.Name(), ".tmpl")
		path := filepath.Join(dir, e.Name())
		if !slices.Contains(promptNames, name) {
			return nil, fmt.Errorf("explorer: prompts_dir: %s is not a prompt of the explorer (known: %s)", path, strings.Join(promptNames, ", "))
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("explorer: prompts_dir: %w", err)
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
		return fmt.Errorf("explorer: prompt %s: %w", file, err)
	}
	if err := t.Execute(&bytes.Buffer{}, samples[name]); err != nil {
		return fmt.Errorf("explorer: prompt %s: %w", file, err)
	}
	p.t[name] = t
	return nil
}

func (p *prompts) render(name string, data any) (string, error) {
	var b bytes.Buffer
	if err := p.t[name].Execute(&b, data); err != nil {
		return "", fmt.Errorf("explorer: render prompt %s: %w", name, err)
	}
	return strings.TrimSpace(b.String()) + "\n", nil
}
