// Package researcher is fano's researcher module (questions → sources →
// evaluation → extraction → synthesis). It reads local sources
// (researcher.sources_dir: .md and .txt files), has an LLM judge each
// source's relevance (evaluate_source), extract what matters from the
// relevant ones (extract_content) and synthesize a finding
// (synthesize_findings); it also asks which questions the living document
// leaves open (generate_questions, from the titles of its sections). Each
// finding carries a question that becomes a new explorer seed: it is sent
// to the explorer as a module message (flows.go) until the explorer's
// acknowledgment is recorded here, so a finding is handed over once.
//
// It follows modules.Module: Decide* read the state and return events,
// Apply alone changes it, idempotently, from the event's time. The
// sources are read by LoadSources (the module does no I/O). A Module is
// not safe for concurrent use: its host actor is its only caller.
package researcher

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"fano/modules"
	"fano/pb"
)

// Name is the module's name and the first part of its task keys.
const Name = "researcher"

// Task types.
const (
	TypeGenerateQuestions  = "generate_questions"
	TypeEvaluateSource     = "evaluate_source"
	TypeExtractContent     = "extract_content"
	TypeSynthesizeFindings = "synthesize_findings"
)

// Source is one local source file.
type Source struct {
	ID   string `json:"id"`   // "src-" + a hash of name and content: a changed file is a new source
	Name string `json:"name"` // the file name
	Text string `json:"-"`
}

// Problem kinds (Verify).
const (
	ProblemSourcesDir       = "sources_dir"         // the directory is missing or unreadable
	ProblemSourceUnreadable = "source_unreadable"   // a file could not be read
	ProblemSourceEmpty      = "source_empty"        // a file without text
	ProblemSourceNotUTF8    = "source_invalid_utf8" // a file that is not text
)

// MaxSourceChars bounds how much of a source goes into a prompt.
const MaxSourceChars = 12000

// LoadSources reads the .md and .txt files of dir (not recursively), in
// name order. A missing or unreadable directory is an error naming it; a
// file that cannot be read, is empty or is not UTF-8 text is a problem
// naming it, and the other files are still loaded. dir "" = no sources.
func LoadSources(dir string) ([]Source, []modules.Problem, error) {
	if dir == "" {
		return nil, nil, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("researcher.sources_dir %s: %w", dir, err)
	}
	var out []Source
	var problems []modules.Problem
	for _, e := range entries {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if e.IsDir() || (ext != ".md" && ext != ".txt") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(path)
		switch {
		case err != nil:
			problems = append(problems, modules.Problem{Kind: ProblemSourceUnreadable, ID: path, Detail: fmt.Sprintf("source %s cannot be read: %v", path, err)})
			continue
		case !utf8.Valid(data):
			problems = append(problems, modules.Problem{Kind: ProblemSourceNotUTF8, ID: path, Detail: "source " + path + " is not UTF-8 text"})
			continue
		case strings.TrimSpace(string(data)) == "":
			problems = append(problems, modules.Problem{Kind: ProblemSourceEmpty, ID: path, Detail: "source " + path + " is empty"})
			continue
		}
		text := strings.TrimSpace(string(data))
		out = append(out, Source{ID: "src-" + shortHash(e.Name(), text), Name: e.Name(), Text: text})
	}
	return out, problems, nil
}

// Config shapes a researcher. Zero fields take defaults.
type Config struct {
	Sources []Source
	// Problems are the problems LoadSources found (reported by Verify).
	Problems []modules.Problem
	// GapRounds is how many generate_questions rounds run: round n runs
	// once the document has n*GapSections sections (default 1; <0 = none).
	GapRounds   int
	GapSections int // 3
	// MaxQuestions bounds the questions kept from one round (default 2).
	MaxQuestions int
	PromptsDir   string
	MaxRequests  func(taskType string) int // nil = 3
}

// GapQuestions is how many questions the default gap rounds raise at
// most, all within the document's first sections (fano simulate counts
// them among the first day's).
func GapQuestions() int {
	var c Config
	c.defaults()
	return c.GapRounds * c.MaxQuestions
}

func (c *Config) defaults() {
	if c.GapRounds == 0 {
		c.GapRounds = 1
	}
	if c.GapSections <= 0 {
		c.GapSections = 3
	}
	if c.MaxQuestions <= 0 {
		c.MaxQuestions = 2
	}
	if c.MaxRequests == nil {
		c.MaxRequests = func(string) int { return 3 }
	}
}

// Module is the researcher. Not safe for concurrent use.
type Module struct {
	cfg     Config
	prompts *prompts
	sources map[string]Source
	st      state
}

var (
	_ modules.Module   = (*Module)(nil)
	_ modules.Verifier = (*Module)(nil)
)

// New returns a researcher with empty state.
func New(cfg Config) (*Module, error) {
	cfg.defaults()
	p, err := loadPrompts(cfg.PromptsDir)
	if err != nil {
		return nil, err
	}
	m := &Module{cfg: cfg, prompts: p, sources: map[string]Source{}}
	for _, s := range cfg.Sources {
		m.sources[s.ID] = s
	}
	m.st = newState()
	return m, nil
}

// Name is "researcher".
func (m *Module) Name() string { return Name }

// TaskTypes lists the researcher's task types.
func (m *Module) TaskTypes() []string {
	return []string{TypeGenerateQuestions, TypeEvaluateSource, TypeExtractContent, TypeSynthesizeFindings}
}

// Verify reports the problems of the sources directory.
func (m *Module) Verify() []modules.Problem { return append([]modules.Problem(nil), m.cfg.Problems...) }

// ErrSourceProblem: source problems are fixed by fixing the files.
var ErrSourceProblem = errors.New("fix or remove the file, then restart fano")

// DecideRepair: a source problem is not repaired by events.
func (m *Module) DecideRepair(p modules.Problem, _ time.Time) ([]*pb.ModuleEvent, error) {
	return nil, fmt.Errorf("researcher: %s: %w", p.Detail, ErrSourceProblem)
}

func shortHash(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:10]
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
