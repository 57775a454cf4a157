package explorer

import (
	"embed"

	promptset "fano/modules/prompts"
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

// clip shortens s to at most n characters, at a word boundary.
func clip(n int, s string) string { return promptset.Clip(n, s) }

// prompts are the explorer's templates (see modules/prompts).
type prompts struct{ set *promptset.Set }

// loadPrompts parses the embedded templates and the overrides of dir.
func loadPrompts(dir string) (*prompts, error) {
	set, err := promptset.Load("explorer", promptFS, "prompts", promptNames, samples, dir)
	if err != nil {
		return nil, err
	}
	return &prompts{set: set}, nil
}

func (p *prompts) render(name string, data any) (string, error) { return p.set.Render(name, data) }
