package researcher

import (
	"embed"

	promptset "fano/modules/prompts"
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

// clip shortens s to at most n characters, at a word boundary.
func clip(n int, s string) string { return promptset.Clip(n, s) }

// prompts are the researcher's templates (see modules/prompts).
type prompts struct{ set *promptset.Set }

// loadPrompts parses the embedded templates and the overrides of dir.
func loadPrompts(dir string) (*prompts, error) {
	set, err := promptset.Load("researcher", promptFS, "prompts", promptNames, samples, dir)
	if err != nil {
		return nil, err
	}
	return &prompts{set: set}, nil
}

func (p *prompts) render(name string, data any) (string, error) { return p.set.Render(name, data) }
