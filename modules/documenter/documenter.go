// Package documenter is fano's documenter module: it grows a living Markdown document from the explorer's blessed
// insights. Each insight it learns of is an opportunity; incorporating it
// takes a mathematical evaluation by a consensus panel of different LLMs
// (math_evaluation), a draft (draft_section), an exposition evaluation
// (exposition_evaluation) and then the incorporation itself — a new
// section, or an extension of the section it is closest to. Human
// comments on sections (address_comment) come before everything else, and
// a share of the work (work_allocation.review_existing) goes to reviewing
// existing sections in deep mode (review_section).
//
// The document is exported as output/DOCUMENT.md and output/document.json
// (modules.Exporter: the host writes them atomically under a WAL intent
// and commit after every change).
//
// It follows modules.Module: Decide* read the state and return events,
// Apply alone changes it, idempotently, from the event's time. That an
// insight is incorporated is an event ("incorporated"), so it can never
// be lost or done twice.
//
// A Module is not safe for concurrent use: its host actor is its only
// caller. The dedup checker it shares with the explorer is.
package documenter

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"time"

	"github.com/rs/zerolog"

	"fano/modules"
	"fano/modules/clean"
	"fano/modules/dedup"
	"fano/pb"
)

// Name is the module's name and the first part of its task keys.
const Name = "documenter"

// Task types. "incorporate_insight" is the pipeline the first three make up.
const (
	TypeMathEvaluation       = "math_evaluation"
	TypeDraft                = "draft_section"
	TypeExpositionEvaluation = "exposition_evaluation"
	TypeAddressComment       = "address_comment"
	TypeReviewSection        = "review_section"
	// TypeReviseSection turns a section's review into a proposed
	// revision, which an exposition evaluation accepts or refuses.
	TypeReviseSection = "revise_section"
)

// KindSection is the kind of the documenter's items in the shared dedup
// checker: one item per incorporated insight, id "<section>/<insight>".
const KindSection = "documenter/section"

// Opportunity statuses.
const (
	StatusEvaluating   = "evaluating" // the math panel is at work
	StatusDrafting     = "drafting"
	StatusExposition   = "exposition" // the draft awaits its exposition evaluation
	StatusIncorporated = "incorporated"
	StatusRejected     = "rejected"
	StatusDuplicate    = "duplicate"
	StatusFailed       = "failed"
)

// Verdicts.
const (
	VerdictBless   = "bless"
	VerdictRevise  = "revise"
	VerdictReject  = "reject"
	VerdictAbstain = "abstain"
)

// Base priorities (docs/architecture.md, Priority): the evaluation stages
// of incorporate_insight run at its priority.
const (
	priorityIncorporate = 55
	priorityDraft       = 50
	priorityReview      = 40
	priorityComment     = 80
)

// Config shapes a documenter. Zero fields take defaults.
type Config struct {
	Title        string   // the document's title
	Backends     []string // enabled backends: the math panel is chosen from them
	DeepBackends []string // backends with a deep mode (section reviews use it)
	PanelSize    int      // 3, at most len(Backends)
	MinBless     int      // 2: seats that must find the insight correct (bless or revise)
	MaxDrafts    int      // 3: drafts per insight (one refused by the exposition evaluation, or repeating the document, is redrafted)
	// ReviewShare is work_allocation.review_existing: the percentage of
	// recent documenter work that may be section reviews (30).
	ReviewShare int
	// Window is how far back "recent work" reaches (24h).
	Window time.Duration
	// Checker is the shared duplicate checker; nil = a private one.
	Checker *dedup.Checker
	// PromptsDir overrides the embedded prompt templates, and its
	// filler.txt the embedded filler patterns (see modules/clean).
	PromptsDir string
	// Logger receives debug records of the filler removed; nil = none.
	Logger *zerolog.Logger
	// MaxRequests is a task type's request budget; nil = 5.
	MaxRequests func(taskType string) int
}

func (c *Config) defaults() {
	if c.Title == "" {
		c.Title = "Document"
	}
	if c.PanelSize <= 0 {
		c.PanelSize = 3
	}
	if n := len(c.Backends); n > 0 && c.PanelSize > n {
		c.PanelSize = n
	}
	if c.MinBless <= 0 {
		c.MinBless = 2
	}
	c.MinBless = min(c.MinBless, c.PanelSize)
	if c.MaxDrafts <= 0 {
		c.MaxDrafts = 3
	}
	if c.ReviewShare < 0 {
		c.ReviewShare = 0
	}
	if c.Window <= 0 {
		c.Window = 24 * time.Hour
	}
	if c.MaxRequests == nil {
		c.MaxRequests = func(string) int { return 5 }
	}
	c.Backends = sortedCopy(c.Backends)
	c.DeepBackends = sortedCopy(c.DeepBackends)
}

// Module is the documenter. Not safe for concurrent use.
type Module struct {
	cfg     Config
	prompts *prompts
	checker *dedup.Checker
	// passages indexes the sections' text sentence by sentence (derived
	// from the state, rebuilt on restore).
	passages *dedup.Passages
	cleaner  *clean.Cleaner
	log      zerolog.Logger
	st       state
	// tentative: insights decided available whose events are still being
	// persisted, so two commands in quick succession see each other.
	tentative map[string]tentativeItem
}

type tentativeItem struct {
	text string
	at   time.Time
}

const tentativeTTL = 2 * time.Minute

var (
	_ modules.Module         = (*Module)(nil)
	_ modules.Exporter       = (*Module)(nil)
	_ modules.Commenter      = (*Module)(nil)
	_ modules.SectionLister  = (*Module)(nil)
	_ modules.DocumentReader = (*Module)(nil)
	_ modules.Verifier       = (*Module)(nil)
	_ modules.Backlogger     = (*Module)(nil)
)

// New returns a documenter with an empty document. A prompt template
// that does not parse or render is an error naming its file.
func New(cfg Config) (*Module, error) {
	cfg.defaults()
	p, err := loadPrompts(cfg.PromptsDir)
	if err != nil {
		return nil, err
	}
	checker := cfg.Checker
	if checker == nil {
		checker = dedup.New(dedup.Config{})
	}
	cl, err := clean.Load(cfg.PromptsDir)
	if err != nil {
		return nil, fmt.Errorf("documenter: filler patterns: %w", err)
	}
	log := zerolog.Nop()
	if cfg.Logger != nil {
		log = *cfg.Logger
	}
	m := &Module{cfg: cfg, prompts: p, checker: checker, passages: dedup.NewPassages(checker.Config()), cleaner: cl, log: log}
	m.reset(newState())
	return m, nil
}

// Name is "documenter".
func (m *Module) Name() string { return Name }

// TaskTypes lists the documenter's task types.
func (m *Module) TaskTypes() []string {
	return []string{TypeMathEvaluation, TypeDraft, TypeExpositionEvaluation, TypeAddressComment, TypeReviewSection, TypeReviseSection}
}

// Backlog is the number of opportunities not yet decided: blessed
// insights waiting raise the documenter's priority (backlog pressure).
func (m *Module) Backlog() int {
	n := 0
	for _, o := range m.st.Opportunities {
		if isOpen(o.Status) {
			n++
		}
	}
	return n
}

func isOpen(status string) bool {
	return status == StatusEvaluating || status == StatusDrafting || status == StatusExposition
}

func shortHash(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:10]
}

// sectionID is the stable id (and anchor) of the section an insight founds.
func sectionID(insight string) string { return "sec-" + shortHash(insight) }

func commentID(section, text string, at time.Time) string {
	return "c-" + shortHash(section, text, fmt.Sprint(at.UnixNano()))
}

func sortedCopy(in []string) []string {
	out := append([]string(nil), in...)
	sort.Strings(out)
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func event(typ, taskID string, data any) *pb.ModuleEvent {
	return &pb.ModuleEvent{Module: Name, Type: typ, TaskId: taskID, Data: mustJSON(data)}
}
