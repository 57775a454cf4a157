// Package metrics keeps fano's operating figures: 24-hour
// rolling counts and averages of tasks, LLM requests, latencies, rate
// limits and quota use, fed by the events the actor system applies, plus
// gauges read at snapshot time (queue depth, memory, disk, WAL size).
//
// Counts are kept in one-minute buckets keyed by the events' own times, so
// the same Metrics fed live (System.Subscribe) or from a replay of the WAL
// (`fano status` while fano is stopped) gives the same figures. Metrics is
// safe for concurrent use.
package metrics

import (
	"sort"
	"strings"
	"sync"
	"time"

	"fano/pb"
)

// DefaultWindow is the rolling window: 24 hours.
const DefaultWindow = 24 * time.Hour

const bucketWidth = time.Minute

// Metrics accumulates figures over a rolling window.
type Metrics struct {
	mu      sync.Mutex
	window  time.Duration
	buckets map[int64]*bucket // unix minute -> figures of that minute
	newest  int64             // newest minute seen (prunes older than window)

	requests  map[string]request   // task id -> request in flight (for latency of failures)
	submitted map[string]time.Time // task id -> submit time, until its first start
	started   map[string]bool      // task ids started at least once (wait counted once)

	gauges  Gauges
	dropped int64

	// Counted since this Metrics was made (the process): never gauges.
	recoveries   int
	lastRecovery time.Time
	checkpoints  int
}

type request struct {
	at      time.Time
	backend string
}

// counter is a count and a sum, for averages.
type avg struct {
	N   int64   `json:"n"`
	Sum float64 `json:"sum"`
}

func (a *avg) add(v float64) { a.N++; a.Sum += v }

// Mean is Sum/N, 0 when empty.
func (a avg) Mean() float64 {
	if a.N == 0 {
		return 0
	}
	return a.Sum / float64(a.N)
}

// bucket holds one minute's figures.
type bucket struct {
	completed, failed, cancelled map[string]int64 // "module/task_type" -> n
	paused                       map[string]int64 // reason -> n
	submitted                    map[string]int64 // module -> n
	moduleEvents                 map[string]int64 // "module/type" -> n
	requests, deep, rateLimits   map[string]int64 // backend -> n
	failures                     map[string]int64 // "backend/kind" -> n
	latency                      map[string]*avg  // backend -> seconds
	promptTokens, answerTokens   map[string]int64 // backend -> tokens
	quota, quotaDeep             map[string]int64 // backend -> QuotaUsed events
	alerts                       map[string]int64 // health alert kind -> n
	wait                         avg              // seconds from submit to first start
}

func newBucket() *bucket {
	return &bucket{
		completed: map[string]int64{}, failed: map[string]int64{}, cancelled: map[string]int64{},
		paused: map[string]int64{}, submitted: map[string]int64{}, moduleEvents: map[string]int64{},
		requests: map[string]int64{}, deep: map[string]int64{}, rateLimits: map[string]int64{},
		failures: map[string]int64{}, latency: map[string]*avg{},
		promptTokens: map[string]int64{}, answerTokens: map[string]int64{},
		quota: map[string]int64{}, quotaDeep: map[string]int64{}, alerts: map[string]int64{},
	}
}

// New returns empty Metrics over window (<= 0: DefaultWindow).
func New(window time.Duration) *Metrics {
	if window <= 0 {
		window = DefaultWindow
	}
	return &Metrics{
		window: window, buckets: map[int64]*bucket{},
		requests: map[string]request{}, submitted: map[string]time.Time{}, started: map[string]bool{},
	}
}

// Window is the rolling window.
func (m *Metrics) Window() time.Duration { return m.window }

func minute(t time.Time) int64 { return t.Unix() / int64(bucketWidth/time.Second) }

// bucketAt returns the bucket of t, nil when t is older than the window
// (relative to the newest event seen).
func (m *Metrics) bucketAt(t time.Time) *bucket {
	k := minute(t)
	if k > m.newest {
		m.newest = k
		m.prune()
	}
	if k <= m.newest-int64(m.window/bucketWidth) {
		return nil
	}
	b := m.buckets[k]
	if b == nil {
		b = newBucket()
		m.buckets[k] = b
	}
	return b
}

func (m *Metrics) prune() {
	oldest := m.newest - int64(m.window/bucketWidth)
	for k := range m.buckets {
		if k <= oldest {
			delete(m.buckets, k)
		}
	}
}

// split turns a task id (module/task_type/subject) into "module/task_type".
// Both are parts of id: nothing is allocated for each finished task.
func split(id string) (module, kind string) {
	module, rest, ok := strings.Cut(id, "/")
	if !ok {
		return id, id
	}
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		return module, id[:len(module)+1+i]
	}
	return module, id
}

// Observe records one applied event of owner (as System.Subscribe gives it).
func (m *Metrics) Observe(owner string, e *pb.Event) {
	if e == nil || e.Body == nil {
		return
	}
	at := time.Unix(0, e.At).UTC()
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.bucketAt(at)
	switch x := e.Body.(type) {
	case *pb.Event_TaskSubmitted:
		t := x.TaskSubmitted.GetTask()
		m.submitted[t.GetId()] = at
		if b != nil {
			b.submitted[t.GetModule()]++
		}
	case *pb.Event_TaskStarted:
		id := x.TaskStarted.TaskId
		if sub, ok := m.submitted[id]; ok && !m.started[id] {
			if b != nil {
				b.wait.add(at.Sub(sub).Seconds())
			}
			delete(m.submitted, id)
		}
		m.started[id] = true
	case *pb.Event_LlmRequestStarted:
		r := x.LlmRequestStarted
		m.requests[r.TaskId] = request{at: at, backend: r.Llm}
		if b != nil {
			b.requests[r.Llm]++
			if r.DeepMode {
				b.deep[r.Llm]++
			}
		}
	case *pb.Event_LlmResponseReceived:
		r := x.LlmResponseReceived
		delete(m.requests, r.TaskId)
		if b != nil {
			l := b.latency[r.Llm]
			if l == nil {
				l = &avg{}
				b.latency[r.Llm] = l
			}
			l.add(time.Duration(r.DurationNs).Seconds())
			b.promptTokens[r.Llm] += r.PromptTokens
			b.answerTokens[r.Llm] += r.CompletionTokens
		}
	case *pb.Event_LlmRequestFailed:
		r := x.LlmRequestFailed
		delete(m.requests, r.TaskId)
		if b != nil {
			b.failures[r.Llm+"/"+r.Kind]++
			if r.Kind == "rate_limited" {
				b.rateLimits[r.Llm]++
			}
		}
	case *pb.Event_TaskCompleted:
		m.finished(x.TaskCompleted.TaskId)
		if b != nil {
			_, k := split(x.TaskCompleted.TaskId)
			b.completed[k]++
		}
	case *pb.Event_TaskFailed:
		m.finished(x.TaskFailed.TaskId)
		if b != nil {
			_, k := split(x.TaskFailed.TaskId)
			b.failed[k]++
		}
	case *pb.Event_TaskCancelled:
		m.finished(x.TaskCancelled.TaskId)
		if b != nil {
			_, k := split(x.TaskCancelled.TaskId)
			b.cancelled[k]++
		}
	case *pb.Event_TaskForgotten:
		for _, id := range x.TaskForgotten.IDs() {
			m.finished(id)
		}
	case *pb.Event_TaskPaused:
		if b != nil {
			b.paused[x.TaskPaused.Reason]++
		}
	case *pb.Event_QuotaUsed:
		if b != nil {
			b.quota[x.QuotaUsed.Backend]++
			if x.QuotaUsed.DeepMode {
				b.quotaDeep[x.QuotaUsed.Backend]++
			}
		}
	case *pb.Event_QuotaReleased:
		// A use given back: the request never left.
		if b != nil {
			b.quota[x.QuotaReleased.Backend]--
			if x.QuotaReleased.DeepMode {
				b.quotaDeep[x.QuotaReleased.Backend]--
			}
		}
	case *pb.Event_ModuleEvent:
		if b != nil {
			me := x.ModuleEvent
			mod := me.Module
			if mod == "" {
				mod = strings.TrimPrefix(owner, "module/")
			}
			b.moduleEvents[mod+"/"+me.Type]++
		}
	}
}

func (m *Metrics) finished(id string) {
	delete(m.submitted, id)
	delete(m.started, id)
	delete(m.requests, id)
}

// ObserveUpdate records a published notification (health alerts).
func (m *Metrics) ObserveUpdate(u *pb.StateUpdate) {
	if u == nil {
		return
	}
	switch {
	case u.Component == UpdateRecovery && u.UpdateType == UpdateRecovered:
		m.Recovered(time.Unix(0, u.At).UTC())
	case u.Component == UpdateWAL && u.UpdateType == UpdateCheckpoint:
		m.mu.Lock()
		m.checkpoints++
		m.mu.Unlock()
	case u.Component == "health" && u.UpdateType == "alert" && u.Data["resolved"] != "true":
		m.mu.Lock()
		defer m.mu.Unlock()
		if b := m.bucketAt(time.Unix(0, u.At).UTC()); b != nil {
			b.alerts[u.Data["kind"]]++
		}
	}
}

// The updates (pb.StateUpdate component and type) the actors publish for
// the counts below.
const (
	UpdateRecovery   = "recovery"
	UpdateRecovered  = "recovered" // an owner's state rebuilt from the WAL; data "owner"
	UpdateWAL        = "wal"
	UpdateCheckpoint = "checkpoint" // an owner's checkpoint written; data "owner"
)

// Recovered counts a recovery: state rebuilt from the WAL, at start and
// each time a restarted actor rebuilds its own.
func (m *Metrics) Recovered(at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recoveries++
	if at.After(m.lastRecovery) {
		m.lastRecovery = at
	}
}

// Dropped counts notices a feeder could not deliver (its buffer was full);
// the figures undercount by that much.
func (m *Metrics) Dropped(n int64) {
	m.mu.Lock()
	m.dropped += n
	m.mu.Unlock()
}

// Gauges are figures read at a moment rather than counted.
type Gauges struct {
	QueueDepth           map[string]int `json:"queue_depth"` // module -> PENDING+READY
	Running              map[string]int `json:"running"`     // module -> RUNNING
	Paused               map[string]int `json:"paused"`      // module -> PAUSED
	OldestPendingSeconds float64        `json:"oldest_pending_task_age_seconds"`
	Quotas               []Quota        `json:"quotas,omitempty"`

	MemoryMB         float64   `json:"memory_usage_mb"`
	HeapMB           float64   `json:"heap_mb"`
	Goroutines       int       `json:"goroutines"`
	DiskUsagePercent float64   `json:"disk_usage_percent"`
	DiskFreeBytes    uint64    `json:"disk_free_bytes"`
	WALSizeMB        float64   `json:"wal_size_mb"`
	WALEntries       int       `json:"wal_entries"`
	UptimeSeconds    float64   `json:"uptime_seconds"`
	StartedAt        time.Time `json:"started_at,omitempty"`
}

// Quota is one backend's quota figures at the moment.
type Quota struct {
	Backend     string `json:"backend"`
	HourlyUsed  int    `json:"hourly_used"`
	HourlyLimit int    `json:"hourly_limit"`
	Usable      int    `json:"usable"`
	DeepUsed    int    `json:"deep_used"`
	DeepLimit   int    `json:"deep_limit"`
	Available   bool   `json:"available"`
	Paused      bool   `json:"paused"`
}

// SetGauges replaces the gauges (the collector reads them from the
// running system at each collection).
func (m *Metrics) SetGauges(g Gauges) {
	m.mu.Lock()
	m.gauges = g
	m.mu.Unlock()
}

// Snapshot is the figures of the window ending at At: what `fano status
// --json` and the control panel show. Count maps are keyed by module, by
// "module/task_type", or by backend, as named.
type Snapshot struct {
	At     time.Time `json:"at"`
	Window string    `json:"window"`

	TasksSubmitted       map[string]int64 `json:"tasks_submitted"`         // by module
	TasksCompleted       map[string]int64 `json:"tasks_completed"`         // by module
	TasksFailed          map[string]int64 `json:"tasks_failed"`            // by module
	TasksCancelled       map[string]int64 `json:"tasks_cancelled"`         // by module
	TasksCompletedByType map[string]int64 `json:"tasks_completed_by_type"` // by module/task_type
	TasksFailedByType    map[string]int64 `json:"tasks_failed_by_type"`    // by module/task_type
	TasksPaused          map[string]int64 `json:"tasks_paused"`            // by reason
	ModuleEvents         map[string]int64 `json:"module_events"`           // by module/event type (insights blessed, sections documented)
	AvgTaskWaitSeconds   float64          `json:"avg_task_wait_seconds"`   // submit -> first start

	LLMRequests           map[string]int64   `json:"llm_requests"`             // by backend
	LLMDeepModeUses       map[string]int64   `json:"llm_deep_mode_uses"`       // by backend
	LLMRateLimitsHit      map[string]int64   `json:"llm_rate_limits_hit"`      // by backend
	LLMFailures           map[string]int64   `json:"llm_failures"`             // by backend/kind
	LLMAvgResponseSeconds map[string]float64 `json:"llm_avg_response_seconds"` // by backend
	LLMResponses          map[string]int64   `json:"llm_responses"`            // by backend
	LLMPromptTokens       map[string]int64   `json:"llm_prompt_tokens"`        // by backend
	LLMCompletionTokens   map[string]int64   `json:"llm_completion_tokens"`    // by backend
	QuotaUsed             map[string]int64   `json:"quota_used"`               // by backend
	QuotaDeepUsed         map[string]int64   `json:"quota_deep_used"`          // by backend
	HealthAlerts          map[string]int64   `json:"health_alerts"`            // by kind

	Gauges
	InFlight       int   `json:"requests_in_flight"`
	DroppedNotices int64 `json:"dropped_notices,omitempty"`

	// Counted by this process (Recovered, ObserveUpdate).
	CheckpointCount int       `json:"checkpoint_count"` // checkpoints written
	RecoveryCount   int       `json:"recovery_count"`   // recoveries from the WAL
	LastRecovery    time.Time `json:"last_recovery,omitzero"`
}

// Snapshot sums the buckets of the window ending at now.
func (m *Metrics) Snapshot(now time.Time) Snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := Snapshot{
		At: now.UTC(), Window: m.window.String(),
		TasksSubmitted: map[string]int64{}, TasksCompleted: map[string]int64{}, TasksFailed: map[string]int64{},
		TasksCancelled: map[string]int64{}, TasksCompletedByType: map[string]int64{}, TasksFailedByType: map[string]int64{},
		TasksPaused: map[string]int64{}, ModuleEvents: map[string]int64{},
		LLMRequests: map[string]int64{}, LLMDeepModeUses: map[string]int64{}, LLMRateLimitsHit: map[string]int64{},
		LLMFailures: map[string]int64{}, LLMAvgResponseSeconds: map[string]float64{}, LLMResponses: map[string]int64{},
		LLMPromptTokens: map[string]int64{}, LLMCompletionTokens: map[string]int64{},
		QuotaUsed: map[string]int64{}, QuotaDeepUsed: map[string]int64{}, HealthAlerts: map[string]int64{},
		Gauges: m.gauges, InFlight: len(m.requests), DroppedNotices: m.dropped,
		CheckpointCount: m.checkpoints, RecoveryCount: m.recoveries, LastRecovery: m.lastRecovery,
	}
	hi := minute(now)
	lo := hi - int64(m.window/bucketWidth)
	lat := map[string]*avg{}
	var wait avg
	keys := make([]int64, 0, len(m.buckets))
	for k := range m.buckets {
		if k > lo && k <= hi {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	for _, k := range keys {
		b := m.buckets[k]
		for key, n := range b.completed {
			mod, _ := split(key)
			s.TasksCompleted[mod] += n
			s.TasksCompletedByType[key] += n
		}
		for key, n := range b.failed {
			mod, _ := split(key)
			s.TasksFailed[mod] += n
			s.TasksFailedByType[key] += n
		}
		for key, n := range b.cancelled {
			mod, _ := split(key)
			s.TasksCancelled[mod] += n
		}
		add(s.TasksSubmitted, b.submitted)
		add(s.TasksPaused, b.paused)
		add(s.ModuleEvents, b.moduleEvents)
		add(s.LLMRequests, b.requests)
		add(s.LLMDeepModeUses, b.deep)
		add(s.LLMRateLimitsHit, b.rateLimits)
		add(s.LLMFailures, b.failures)
		add(s.LLMPromptTokens, b.promptTokens)
		add(s.LLMCompletionTokens, b.answerTokens)
		add(s.QuotaUsed, b.quota)
		add(s.QuotaDeepUsed, b.quotaDeep)
		add(s.HealthAlerts, b.alerts)
		for be, a := range b.latency {
			t := lat[be]
			if t == nil {
				t = &avg{}
				lat[be] = t
			}
			t.N += a.N
			t.Sum += a.Sum
		}
		wait.N += b.wait.N
		wait.Sum += b.wait.Sum
	}
	for be, a := range lat {
		s.LLMAvgResponseSeconds[be] = a.Mean()
		s.LLMResponses[be] = a.N
	}
	s.AvgTaskWaitSeconds = wait.Mean()
	return s
}

func add(dst, src map[string]int64) {
	for k, n := range src {
		dst[k] += n
	}
}

// Total sums a count map.
func Total(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}
