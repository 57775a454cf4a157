// Package allocator holds fano's quota book: every backend's hourly and
// daily deep-mode quota, rate limits, learned limit estimates, pauses and
// concurrency slots, and the choice of a backend for a task. It is the single source of
// truth for quota: nothing else charges or releases it.
//
// The Book is a plain type in decide/apply form (docs/architecture.md): Decide*
// methods read the state and return events, Apply is the only code that
// changes persistent state and uses the event's time, never a clock. Two
// pieces of state are transient and never logged: the in-flight counter of
// uses decided but not yet applied, and the concurrency slots (running
// calls are rebuilt by the executors after a restart).
//
// A Book is not safe for concurrent use: the allocator actor is its only
// caller.
package allocator

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"fano/pb"
)

// Backend kinds.
const (
	KindBrowser = "browser"
	KindAPI     = "api"
	KindSim     = "sim"
)

// BackendConfig is one backend as the allocator sees it.
type BackendConfig struct {
	Name           string
	Kind           string // "browser" | "api" | "sim"
	HourlyLimit    int    // believed hourly request quota; 0 = never usable
	DeepDailyLimit int    // daily deep-mode quota; 0 = no deep mode
	MaxConcurrency int    // requests at once; 0 = 1; a browser always 1
}

// Config configures a Book.
type Config struct {
	Backends            []BackendConfig
	HourlyResetMinute   int            // 0..59: the hour window starts at this minute
	DailyResetHour      int            // 0..23: the deep-mode day starts at this hour
	BufferPercent       int            // 0..99: share of the hourly limit kept unused (spec: 10)
	RecoveryCleanHours  int            // clean hour windows per recovery step; 0 = 1
	RecoveryStepPercent int            // each step raises the estimate by this % of the configured limit; 0 = 10
	Location            *time.Location // windows are local to it; nil = UTC
}

// Validate reports the first problem of c, naming the field.
func (c Config) Validate() error {
	if c.HourlyResetMinute < 0 || c.HourlyResetMinute > 59 {
		return fmt.Errorf("allocator: HourlyResetMinute %d out of 0..59", c.HourlyResetMinute)
	}
	if c.DailyResetHour < 0 || c.DailyResetHour > 23 {
		return fmt.Errorf("allocator: DailyResetHour %d out of 0..23", c.DailyResetHour)
	}
	if c.BufferPercent < 0 || c.BufferPercent > 99 {
		return fmt.Errorf("allocator: BufferPercent %d out of 0..99", c.BufferPercent)
	}
	if c.RecoveryCleanHours < 0 {
		return fmt.Errorf("allocator: RecoveryCleanHours %d is negative", c.RecoveryCleanHours)
	}
	if c.RecoveryStepPercent < 0 || c.RecoveryStepPercent > 100 {
		return fmt.Errorf("allocator: RecoveryStepPercent %d out of 0..100", c.RecoveryStepPercent)
	}
	seen := make(map[string]bool, len(c.Backends))
	for i, bc := range c.Backends {
		switch {
		case bc.Name == "":
			return fmt.Errorf("allocator: backend #%d has no name", i)
		case seen[bc.Name]:
			return fmt.Errorf("allocator: backend %q configured twice", bc.Name)
		case bc.Kind != KindBrowser && bc.Kind != KindAPI && bc.Kind != KindSim:
			return fmt.Errorf("allocator: backend %q: kind %q is not browser, api or sim", bc.Name, bc.Kind)
		case bc.HourlyLimit < 0:
			return fmt.Errorf("allocator: backend %q: HourlyLimit %d is negative", bc.Name, bc.HourlyLimit)
		case bc.DeepDailyLimit < 0:
			return fmt.Errorf("allocator: backend %q: DeepDailyLimit %d is negative", bc.Name, bc.DeepDailyLimit)
		case bc.MaxConcurrency < 0:
			return fmt.Errorf("allocator: backend %q: MaxConcurrency %d is negative", bc.Name, bc.MaxConcurrency)
		}
		seen[bc.Name] = true
	}
	return nil
}

// NoQuotaError says a backend may not be used now.
type NoQuotaError struct {
	Backend string
	Deep    bool
	// Until is when it may be used again; zero when no time will do: the
	// backend is paused (only an operator resumes it) or has no deep mode.
	Until  time.Time
	Reason string
}

func (e *NoQuotaError) Error() string {
	mode := ""
	if e.Deep {
		mode = " (deep mode)"
	}
	if e.Until.IsZero() {
		return fmt.Sprintf("allocator: %s%s: no quota: %s", e.Backend, mode, e.Reason)
	}
	return fmt.Sprintf("allocator: %s%s: no quota until %s: %s",
		e.Backend, mode, e.Until.UTC().Format(time.RFC3339), e.Reason)
}

// ErrUnknownBackend is wrapped by the errors that name a backend the book
// does not know.
var ErrUnknownBackend = errors.New("unknown backend")

// BackendStatus is one backend's figures for people and metrics.
type BackendStatus struct {
	Name             string
	Kind             string
	HourlyUsed       int
	HourlyLimit      int // configured
	LimitEstimate    int // effective: lowered by rate limits, recovering
	Usable           int // LimitEstimate less the buffer
	DeepUsed         int
	DeepLimit        int
	RateLimitedUntil time.Time // zero: not rate limited
	Capped           bool      // RateLimitedUntil is a usage cap, not a per-minute limit
	// State is why the backend cannot take work now ("ready" when it
	// can), with the reason and, when known, the time it ends: "paused",
	// "credentials", "login", "circuit_open", "capped", "rate_limited",
	// "paced" (spreading a learned estimate over the hour), "exhausted".
	State  string
	Reason string
	Until  time.Time
	// Class is the condition table's row of State (rate, quota,
	// transient, person; "" when ready) and Action what a person must
	// do when it is theirs to end: the one backend state that status,
	// health, the panel, /metrics and alerts all read.
	Class  string
	Action string
	// LearnedLimit requests per LearnedWindow: the provider's rate as its
	// headers told it (0: not learned).
	LearnedLimit  int
	LearnedWindow time.Duration
	// The backend's rate limiter, if it has one (filled by the system,
	// not the book): the rate it paces to per its window and how many
	// requests wait in its queue.
	PacedPerWindow float64
	LimiterWaiting int
	Paused         bool
	PauseReason    string
	InUse          int
	MaxConcurrency int
	Available      bool // CanUse (non-deep) now and a slot is free
}

// quota is one backend's state. The persistent part mirrors
// pb.BackendQuota; inflight*, inUse are transient.
type quota struct {
	cfg BackendConfig

	hourlyUsed       int
	deepUsed         int
	rateLimitedUntil int64 // unix ns; 0 = none
	limitEstimate    int   // learned limit; 0 = the configured one
	cleanHours       int
	limitedThisHour  bool
	lastRequestAt    int64
	paused           bool
	pauseReason      string
	capped           bool // rateLimitedUntil is a usage cap
	condState        string
	condReason       string
	condUntil        int64 // unix ns; 0 = until cleared
	// condDecided is the condition last decided and not yet applied: the
	// same fault reported again in that gap (several tasks meeting one
	// open circuit at one instant) is recorded once, whatever the order
	// of the reports and the journal's apply.
	condDecided   *condition
	learnedLimit  int
	learnedWindow int64 // ns

	// held: the backend's own pace is booked (its rate limiter already
	// queues a request): it takes no new task, so no task waits behind
	// it while another backend could serve it (see Hold).
	held         bool
	inflight     int // QuotaUsed decided, not yet applied
	inflightDeep int
	inUse        int              // concurrency slots taken
	grants       map[string]grant // task -> its reservation (see Grant)
}

// Book is the allocator's state.
type Book struct {
	cfg      Config
	loc      *time.Location
	names    []string // sorted
	backends map[string]*quota

	hourWindowStart int64 // unix ns; 0 = not started yet
	dayWindowStart  int64

	dropped []string // in a restored snapshot or an applied event, not in the config
}

// New returns an empty book for cfg. It panics if cfg is invalid: check it
// with Config.Validate first (the config package does).
func New(cfg Config) *Book {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	return newBook(cfg)
}

func newBook(cfg Config) *Book {
	if cfg.RecoveryCleanHours == 0 {
		cfg.RecoveryCleanHours = 1
	}
	if cfg.RecoveryStepPercent == 0 {
		cfg.RecoveryStepPercent = 10
	}
	b := &Book{cfg: cfg, loc: cfg.Location, backends: make(map[string]*quota, len(cfg.Backends))}
	if b.loc == nil {
		b.loc = time.UTC
	}
	for _, bc := range cfg.Backends {
		if bc.Kind == KindBrowser || bc.MaxConcurrency == 0 {
			bc.MaxConcurrency = 1
		}
		b.backends[bc.Name] = &quota{cfg: bc}
		b.names = append(b.names, bc.Name)
	}
	slices.Sort(b.names)
	return b
}

// Restore rebuilds a book from a checkpoint taken by Snapshot; replay the
// later events with Apply. Backends of the snapshot that cfg no longer has
// are left out and reported by DroppedBackends; backends new in cfg start
// at zero. A nil snapshot gives a fresh book.
func Restore(cfg Config, snap *pb.AllocatorSnapshot) (*Book, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b := newBook(cfg)
	if snap == nil {
		return b, nil
	}
	b.hourWindowStart = snap.GetHourWindowStart()
	b.dayWindowStart = snap.GetDayWindowStart()
	seen := make(map[string]bool, len(snap.GetBackends()))
	for _, s := range snap.GetBackends() {
		name := s.GetName()
		if seen[name] {
			return nil, fmt.Errorf("allocator: restore: backend %q twice in the snapshot", name)
		}
		seen[name] = true
		if s.GetHourlyUsed() < 0 || s.GetDeepUsed() < 0 || s.GetLimitEstimate() < 0 || s.GetCleanHours() < 0 {
			return nil, fmt.Errorf("allocator: restore: backend %q has a negative count", name)
		}
		q, ok := b.backends[name]
		if !ok {
			b.drop(name)
			continue
		}
		q.hourlyUsed = int(s.GetHourlyUsed())
		q.deepUsed = int(s.GetDeepUsed())
		q.rateLimitedUntil = s.GetRateLimitedUntil()
		q.limitEstimate = int(s.GetLimitEstimate())
		if q.limitEstimate >= q.cfg.HourlyLimit {
			q.limitEstimate = 0 // the configured limit was lowered below the estimate
		}
		q.cleanHours = int(s.GetCleanHours())
		q.limitedThisHour = s.GetLimitedThisHour()
		q.lastRequestAt = s.GetLastRequestAt()
		q.paused = s.GetPaused()
		q.pauseReason = s.GetPauseReason()
		q.capped = s.GetCapped()
		q.condState, q.condReason, q.condUntil = s.GetConditionState(), s.GetConditionReason(), s.GetConditionUntil()
		q.learnedLimit, q.learnedWindow = int(s.GetLearnedLimit()), s.GetLearnedWindow()
	}
	return b, nil
}

// DroppedBackends names, sorted, the backends met in a restored snapshot or
// a replayed event that the config no longer has; their state is ignored.
func (b *Book) DroppedBackends() []string {
	return slices.Clone(b.dropped)
}

func (b *Book) drop(name string) {
	if i, found := slices.BinarySearch(b.dropped, name); !found {
		b.dropped = slices.Insert(b.dropped, i, name)
	}
}

// Snapshot returns the persistent state, backends sorted by name.
func (b *Book) Snapshot() *pb.AllocatorSnapshot {
	s := &pb.AllocatorSnapshot{
		HourWindowStart: b.hourWindowStart,
		DayWindowStart:  b.dayWindowStart,
		Backends:        make([]*pb.BackendQuota, 0, len(b.names)),
	}
	for _, name := range b.names {
		q := b.backends[name]
		s.Backends = append(s.Backends, &pb.BackendQuota{
			Name:             name,
			HourlyUsed:       int32(q.hourlyUsed),
			DeepUsed:         int32(q.deepUsed),
			RateLimitedUntil: q.rateLimitedUntil,
			LimitEstimate:    int32(q.limitEstimate),
			CleanHours:       int32(q.cleanHours),
			LimitedThisHour:  q.limitedThisHour,
			LastRequestAt:    q.lastRequestAt,
			Paused:           q.paused,
			PauseReason:      q.pauseReason,
			Capped:           q.capped,
			ConditionState:   q.condState,
			ConditionReason:  q.condReason,
			ConditionUntil:   q.condUntil,
			LearnedLimit:     int32(q.learnedLimit),
			LearnedWindow:    q.learnedWindow,
		})
	}
	return s
}

func (b *Book) get(name string) (*quota, error) {
	q, ok := b.backends[name]
	if !ok {
		return nil, fmt.Errorf("allocator: backend %q: %w", name, ErrUnknownBackend)
	}
	return q, nil
}

// effectiveLimit is the hourly limit believed now.
func (q *quota) effectiveLimit() int {
	if q.limitEstimate > 0 && q.limitEstimate < q.cfg.HourlyLimit {
		return q.limitEstimate
	}
	return q.cfg.HourlyLimit
}

// usable is the effective limit less the buffer, at least 1 when the
// limit is at least 1.
func (q *quota) usable(bufferPercent int) int {
	limit := q.effectiveLimit()
	if limit <= 0 {
		return 0
	}
	return max(1, limit*(100-bufferPercent)/100)
}

// condition is a backend's recorded condition (state "" is ready).
type condition struct {
	state, reason string
	until         int64 // unix ns; 0 = until cleared
}
