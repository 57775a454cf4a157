package documenter

import (
	"embed"

	promptset "fano/modules/prompts"
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
	promptRevise     = "revise_section"
)

var promptNames = []string{promptMath, promptDraft, promptExposition, promptComment, promptReview, promptRevise}

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
		// The rest of the document, within a budget: its contents
		// (Omitted older sections left out) and the passages of other
		// sections that overlap the statement or the previous draft.
		Contents []tocEntry
		Omitted  int
		Passages []passageNote
	}

	commentData struct {
		Title   string // the section's title
		Section string // its Markdown
		Comment string
	}

	reviseData struct {
		Title      string // the section's title
		Section    string // its Markdown
		Review     string // the review to answer
		Statements string // the statements the section presents
	}
)

// samples render each template once at load, so a template that names a
// field that does not exist fails at start, naming its file.
var samples = map[string]any{
	promptMath: oppData{Title: "t", Insight: "i", Tags: []string{"x"}, Seed: "q"},
	promptDraft: oppData{Title: "t", Insight: "i", Tags: []string{"x"}, Seed: "q", Section: "s", SectionTitle: "st", Critique: "c",
		Contents: []tocEntry{{ID: "sec-1", Title: "T", Summary: "S"}}, Omitted: 1, Passages: []passageNote{{Section: "sec-1", Title: "T", Text: "P"}}},
	promptExposition: oppData{Title: "t", Insight: "i", Draft: "d", Contents: []tocEntry{{ID: "sec-1", Title: "T", Summary: "S"}}, Omitted: 1,
		Passages: []passageNote{{Section: "sec-1", Title: "T", Text: "P"}}},
	promptComment: commentData{Title: "t", Section: "s", Comment: "c"},
	promptReview:  commentData{Title: "t", Section: "s"},
	promptRevise:  reviseData{Title: "t", Section: "s", Review: "r", Statements: "x"},
}

// clip shortens s to at most n characters, at a word boundary.
func clip(n int, s string) string { return promptset.Clip(n, s) }

// prompts are the documenter's templates (see modules/prompts).
type prompts struct{ set *promptset.Set }

// loadPrompts parses the embedded templates and the overrides of dir.
func loadPrompts(dir string) (*prompts, error) {
	set, err := promptset.Load("documenter", promptFS, "prompts", promptNames, samples, dir)
	if err != nil {
		return nil, err
	}
	return &prompts{set: set}, nil
}

func (p *prompts) render(name string, data any) (string, error) { return p.set.Render(name, data) }
