// Package explorer is fano's explorer module: from
// seed questions it grows exploration threads (multi-turn conversations),
// has a different LLM critique each thread, synthesizes it in deep mode
// into a chunk, extracts atomic insights from the chunk, deduplicates them
// with the shared checker (modules/dedup), and has a panel of different
// LLMs review each insight; blessed insights form the blessed store and
// are exported as output/blessed/<id>.json.
//
// It follows modules.Module: Decide* read the state and return events,
// Apply alone changes it (live and on replay, from the event's time, never
// a clock). Facts are logged (an answer, a verdict, a decision); what
// follows from facts and the config (the review panel, which task comes
// next) is derived. Apply ignores an event it has already applied, so a
// decision made twice (two reviewers finishing at once) takes effect once.
//
// A Module is not safe for concurrent use: its host actor is its only
// caller. The dedup checker it shares with other modules is.
package explorer

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"time"

	"fano/modules"
	"fano/modules/dedup"
	"fano/pb"
)

// Name is the module's name, the first part of its task keys and its WAL
// owner "module/explorer".
const Name = "explorer"

// Task types.
const (
	TypeExploration  = "exploration"
	TypeCritique     = "critique"
	TypeSynthesis    = "synthesis"
	TypeExtraction   = "insight_extraction"
	TypeReview       = "insight_review"
	TypeDedupConfirm = "dedup_confirm"
)

// Kinds of the explorer's items in the shared dedup checker.
const (
	KindBlessed = "explorer/blessed"
	KindPending = "explorer/pending" // pending review or awaiting dedup confirmation
)

// Thread statuses.
const (
	ThreadExploring  = "exploring"
	ThreadCritique   = "critique"
	ThreadSynthesis  = "synthesis"
	ThreadExtraction = "extraction"
	ThreadDone       = "done"
	ThreadFailed     = "failed"
)

// Insight statuses.
const (
	StatusPending    = "pending"     // under review
	StatusDedupCheck = "dedup_check" // borderline duplicate, awaiting LLM confirmation
	StatusBlessed    = "blessed"
	StatusRejected   = "rejected"
	StatusDuplicate  = "duplicate"
)

// Verdicts of a reviewer. Abstain is ours: a reviewer whose task failed.
const (
	VerdictBless   = "bless"
	VerdictRevise  = "revise"
	VerdictReject  = "reject"
	VerdictAbstain = "abstain"
)

// SeedSpec is a seed question as given (config seeds file, `fano seed add`).
type SeedSpec struct {
	Text     string `yaml:"text" json:"text"`
	Priority int    `yaml:"priority" json:"priority"`
}

// MaxSeedPriority bounds a seed's priority: a spawn task gets base
// priority 50 + 10*priority.
const MaxSeedPriority = 5

// DedupConfig is the part of deduplication.* the explorer acts on.
type DedupConfig struct {
	Enabled     bool
	UseBatchLLM bool // borderline pairs go to a dedup_confirm task
	BatchSize   int  // pairs per dedup_confirm task (default 20)
	// Threshold and BorderlineLow build the checker when Config.Checker is nil.
	Threshold, BorderlineLow float64
}

// Config shapes an explorer. Zero fields take defaults.
type Config struct {
	// Seeds are the seed questions of the config (seeds file or built in);
	// seeds added later (`fano seed add`) are state.
	Seeds []SeedSpec
	// Backends are the enabled backend names: review panels and critics
	// are chosen from them.
	Backends []string
	// DeepBackends are the enabled backends with a deep mode; without
	// any, synthesis runs in normal mode.
	DeepBackends []string
	// PreferDeep is the backend synthesis requires (the one whose deep
	// mode it is written for), "" for any backend with deep mode.
	PreferDeep string

	MaxActiveThreads int // 4
	ExplorationTurns int // requests per exploration thread (default MaxRequests("exploration"))
	ReviewPanelSize  int // 3, at most len(Backends)
	MinBless         int // 2, at most the panel size
	MaxReject        int // 0
	ReviewRounds     int // 2: a revised insight is reviewed once more
	InsightMinChars  int // 20
	InsightMaxChars  int // 600
	MaxInsights      int // per chunk, 12

	Dedup DedupConfig
	// Checker is the shared duplicate checker; nil = a private one.
	Checker *dedup.Checker
	// DedupFlushAfter: a partial batch of borderline pairs is confirmed
	// after this wait (or at once when no thread is active). Default 5m.
	DedupFlushAfter time.Duration

	// PromptsDir overrides the embedded prompt templates ("" = none).
	PromptsDir string
	// MaxRequests is the request budget of a task type (config
	// orchestrator.tasks.max_requests_per_task); nil = the defaults
	// (config.DefaultMaxRequestsPerTask).
	MaxRequests func(taskType string) int
}

func (c *Config) defaults() {
	if c.MaxRequests == nil {
		c.MaxRequests = func(t string) int {
			switch t {
			case TypeExploration:
				return 20
			case TypeCritique:
				return 5
			}
			return 10
		}
	}
	if c.MaxActiveThreads <= 0 {
		c.MaxActiveThreads = 4
	}
	if c.ExplorationTurns <= 0 {
		c.ExplorationTurns = c.MaxRequests(TypeExploration)
	}
	if c.ExplorationTurns <= 0 {
		c.ExplorationTurns = 1
	}
	if c.ReviewPanelSize <= 0 {
		c.ReviewPanelSize = 3
	}
	if n := len(c.Backends); n > 0 && c.ReviewPanelSize > n {
		c.ReviewPanelSize = n
	}
	if c.MinBless <= 0 {
		c.MinBless = 2
	}
	c.MinBless = min(c.MinBless, c.ReviewPanelSize)
	if c.MaxReject < 0 {
		c.MaxReject = 0
	}
	if c.ReviewRounds <= 0 {
		c.ReviewRounds = 2
	}
	if c.InsightMinChars <= 0 {
		c.InsightMinChars = 20
	}
	if c.InsightMaxChars <= 0 {
		c.InsightMaxChars = 600
	}
	if c.MaxInsights <= 0 {
		c.MaxInsights = 12
	}
	if c.Dedup.BatchSize <= 0 {
		c.Dedup.BatchSize = 20
	}
	if c.DedupFlushAfter <= 0 {
		c.DedupFlushAfter = 5 * time.Minute
	}
	c.Backends = sortedCopy(c.Backends)
	c.DeepBackends = sortedCopy(c.DeepBackends)
}

// Module is the explorer. Not safe for concurrent use.
type Module struct {
	cfg     Config
	prompts *prompts
	checker *dedup.Checker
	seeds   []Seed // config seeds, in config order

	st state

	// Derived from st (rebuilt by Restore, kept by Apply; never logged).
	active map[string]bool // threads in an active status
	open   map[string]bool // insights pending or awaiting dedup confirmation

	// Transient: decisions not yet applied. Spawn tasks proposed and not
	// yet started (so a new seed does not overshoot max_active_threads),
	// and texts decided pending or blessed whose events are being
	// persisted (so two decisions in quick succession see each other).
	spawning  map[string]bool
	tentative map[string]tentative
}

type tentative struct {
	text, kind string
	group      string // the decision it came from (a chunk, or the insight blessed)
	at         time.Time
}

// tentativeTTL bounds how long a decided, unapplied text counts: a
// persist that failed must not shadow later texts for long.
const tentativeTTL = 2 * time.Minute

var (
	_ modules.Module     = (*Module)(nil)
	_ modules.Exporter   = (*Module)(nil)
	_ modules.SeedTaker  = (*Module)(nil)
	_ modules.Verifier   = (*Module)(nil)
	_ modules.Backlogger = (*Module)(nil)
)

// New returns an explorer with empty state. A prompt template that does
// not parse or render is an error naming its file.
func New(cfg Config) (*Module, error) {
	cfg.defaults()
	p, err := loadPrompts(cfg.PromptsDir)
	if err != nil {
		return nil, err
	}
	checker := cfg.Checker
	if checker == nil {
		checker = dedup.New(dedup.Config{Threshold: cfg.Dedup.Threshold, BorderlineLow: cfg.Dedup.BorderlineLow})
	}
	m := &Module{cfg: cfg, prompts: p, checker: checker}
	seen := map[string]bool{}
	for i, s := range cfg.Seeds {
		sd, err := checkSeed(s.Text, s.Priority)
		if err != nil {
			return nil, fmt.Errorf("explorer: seed %d: %w", i+1, err)
		}
		if seen[sd.ID] {
			continue // the same question twice in the config
		}
		seen[sd.ID] = true
		sd.Order = int64(i) - int64(len(cfg.Seeds)) // config seeds sort before added ones
		m.seeds = append(m.seeds, sd)
	}
	m.reset(newState())
	return m, nil
}

// Name is "explorer".
func (m *Module) Name() string { return Name }

// TaskTypes lists the explorer's task types.
func (m *Module) TaskTypes() []string {
	return []string{TypeExploration, TypeCritique, TypeSynthesis, TypeExtraction, TypeReview, TypeDedupConfirm}
}

// Checker returns the duplicate checker the explorer uses.
func (m *Module) Checker() *dedup.Checker { return m.checker }

// Ids are short content hashes: deterministic, so a decision made twice
// names the same thing.
func shortHash(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:10]
}

func seedID(text string) string { return "s-" + shortHash(dedup.Normalize(text)) }

func threadID(seed string) string { return "th-" + seed[len("s-"):] }

func chunkID(thread string) string { return "ch-" + thread[len("th-"):] }

func insightID(chunk string, i int) string { return "in-" + shortHash(chunk, fmt.Sprint(i)) }

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

// Backlog is the number of insights waiting for a decision: the
// scheduler's backlog pressure (docs/architecture.md, Priority).
func (m *Module) Backlog() int { return len(m.open) }

// maxRequests is the task's request budget: at least need.
func (m *Module) maxRequests(taskType string, need int) int32 {
	return int32(max(m.cfg.MaxRequests(taskType), need))
}

// event builds a module event with JSON data.
func event(typ, taskID string, data any) *pb.ModuleEvent {
	return &pb.ModuleEvent{Module: Name, Type: typ, TaskId: taskID, Data: mustJSON(data)}
}
