package control

import (
	"strings"
	"time"

	"fano/actors/allocator"
	"fano/actors/scheduler"
	"fano/pb"
)

// The JSON shapes of the API. They are plain structs (not protojson) so
// that field names stay stable and readable, and so the CLI can decode
// them with the same types.

// Status is GET /api/orchestrator/status: the specification's shape (state,
// uptime, tasks, llms) plus what an operator needs to see at a glance.
type Status struct {
	// State is "running", or "not_accepting" while no new work starts
	// (the health monitor stopped intake for low disk).
	State         string               `json:"state"`
	Uptime        string               `json:"uptime"`
	UptimeSeconds float64              `json:"uptime_seconds"`
	StartedAt     time.Time            `json:"started_at"`
	DataDir       string               `json:"data_dir,omitempty"`
	Tasks         TaskSummary          `json:"tasks"`
	LLMs          map[string]LLMStatus `json:"llms"`
	Backends      []BackendView        `json:"backends"`
	// Hosts are the gateway hosts on other machines (none without any).
	Hosts   []HostView    `json:"hosts"`
	Modules []ModuleView  `json:"modules"`
	Running []RunningTask `json:"running"`
	WAL     *WALView      `json:"wal,omitempty"`
	Health  any           `json:"health,omitempty"`
}

// TaskSummary counts tasks in memory (finished tasks leave memory after
// their retention period).
type TaskSummary struct {
	Pending      int                       `json:"pending"`
	Ready        int                       `json:"ready"`
	Running      int                       `json:"running"`
	Paused       int                       `json:"paused"`
	Completed    int                       `json:"completed"`
	Failed       int                       `json:"failed"`
	Cancelled    int                       `json:"cancelled"`
	Completed24h int                       `json:"completed_24h"`
	ByModule     map[string]map[string]int `json:"by_module"` // module -> state -> n
}

// LLMStatus is one entry of the status's "llms".
type LLMStatus struct {
	Available     bool `json:"available"`
	HourlyUsed    int  `json:"hourly_used"`
	HourlyLimit   int  `json:"hourly_limit"`
	DeepModeUsed  int  `json:"deep_mode_used"`
	DeepModeLimit int  `json:"deep_mode_limit"`
}

// BackendView is one backend: quota, deep mode, pause, rate limit, circuit.
type BackendView struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Host is the gateway host that holds the backend, if it runs on
	// another machine.
	Host string `json:"host,omitempty"`
	// State is the backend's one state (allocator.BackendStatus): ready,
	// busy, or why it takes no work (rate_limited, capped, credentials,
	// credits, login, challenge, circuit_open, paused, exhausted...);
	// Class its row of the condition table and Action what a person must
	// do, when it is theirs to end.
	State            string     `json:"state"`
	Class            string     `json:"class,omitempty"`
	Action           string     `json:"action,omitempty"`
	Available        bool       `json:"available"`
	HourlyUsed       int        `json:"hourly_used"`
	HourlyLimit      int        `json:"hourly_limit"`
	LimitEstimate    int        `json:"limit_estimate"`
	Usable           int        `json:"usable"`
	DeepModeUsed     int        `json:"deep_mode_used"`
	DeepModeLimit    int        `json:"deep_mode_limit"`
	Paused           bool       `json:"paused"`
	PauseReason      string     `json:"pause_reason,omitempty"`
	RateLimitedUntil *time.Time `json:"rate_limited_until,omitempty"`
	InUse            int        `json:"in_use"`
	MaxConcurrency   int        `json:"max_concurrency"`
	Circuit          string     `json:"circuit,omitempty"` // from the backend's State(), if it has one
	RunningTasks     []string   `json:"running_tasks"`
	// Why it takes no work and until when (credentials, login, capped,
	// rate limited, circuit open); the provider's learned rate and the
	// rate limiter's pace and queue (API backends).
	Reason         string     `json:"reason,omitempty"`
	Until          *time.Time `json:"until,omitempty"`
	LearnedLimit   int        `json:"learned_limit,omitempty"`
	LearnedWindow  string     `json:"learned_window,omitempty"`
	PacedPerWindow float64    `json:"paced_per_window,omitempty"`
	LimiterWaiting int        `json:"limiter_waiting"`
	// MemoryBytes is the backend's local process (a browser backend's
	// Chromium with its children), 0 when it runs none.
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
}

// ModuleView is a configured module, what it accepts, and its tasks.
type ModuleView struct {
	Name         string         `json:"name"`
	Capabilities []string       `json:"capabilities"`
	Tasks        map[string]int `json:"tasks"` // state -> n
	// Report is the module's own progress (modules.Reporter), if it has one.
	Report any `json:"report,omitempty"`
}

// RunningTask is a task an executor runs.
type RunningTask struct {
	ID           string    `json:"id"`
	Module       string    `json:"module"`
	TaskType     string    `json:"task_type"`
	LLM          string    `json:"llm"`
	RequestCount int32     `json:"request_count"`
	MaxRequests  int32     `json:"max_requests"`
	DeepMode     bool      `json:"deep_mode"`
	StartedAt    time.Time `json:"started_at"`
}

// WALView is the WAL's figures (refreshed at most every WALStatsEvery).
type WALView struct {
	Bytes            int64           `json:"bytes"`
	Entries          int             `json:"entries"`
	LastSeq          uint64          `json:"last_seq"`
	Uncommitted      int             `json:"uncommitted"`
	Checkpoints      int             `json:"checkpoints"`
	OldestCheckpoint *CheckpointView `json:"oldest_checkpoint,omitempty"`
}

// CheckpointView is the checkpoint that holds back compaction.
type CheckpointView struct {
	Owner string    `json:"owner"`
	Seq   uint64    `json:"seq"`
	At    time.Time `json:"at"`
}

// TaskView is a task as the API shows it.
type TaskView struct {
	ID               string            `json:"id"`
	Module           string            `json:"module"`
	TaskType         string            `json:"task_type"`
	Subject          string            `json:"subject,omitempty"`
	State            string            `json:"state"`
	Priority         int32             `json:"priority"`
	Overdue          bool              `json:"overdue,omitempty"` // waited past max_wait_hours: ordered before every other task
	LLMAssigned      string            `json:"llm_assigned,omitempty"`
	LLMPreference    string            `json:"llm_preference,omitempty"`
	RequiresDeepMode bool              `json:"requires_deep_mode,omitempty"`
	RequestCount     int32             `json:"request_count"`
	MaxRequests      int32             `json:"max_requests"`
	Attempts         int32             `json:"attempts,omitempty"`
	Error            string            `json:"error,omitempty"`
	PauseReason      string            `json:"pause_reason,omitempty"`
	CreatedAt        *time.Time        `json:"created_at,omitempty"`
	UpdatedAt        *time.Time        `json:"updated_at,omitempty"`
	StartedAt        *time.Time        `json:"started_at,omitempty"`
	CompletedAt      *time.Time        `json:"completed_at,omitempty"`
	NotBefore        *time.Time        `json:"not_before,omitempty"`
	Context          map[string]string `json:"context,omitempty"`
	Conversation     *ConversationView `json:"conversation,omitempty"`
}

// ConversationView is a task's conversation; Messages only in the
// single-task view.
type ConversationView struct {
	LLM              string        `json:"llm,omitempty"`
	TurnCount        int32         `json:"turn_count"`
	URL              string        `json:"url,omitempty"`
	AwaitingResponse bool          `json:"awaiting_response,omitempty"`
	Messages         []MessageView `json:"messages,omitempty"`
}

// MessageView is one turn of a conversation.
type MessageView struct {
	Role    string     `json:"role"`
	Content string     `json:"content"`
	At      *time.Time `json:"at,omitempty"`
	LLM     string     `json:"llm,omitempty"`
}

// CancelResult is the answer to a cancel.
type CancelResult struct {
	Status string `json:"status"` // "cancelled" | "cancelling" (a running task: its executor stops it)
	TaskID string `json:"task_id"`
}

// CommandResult is the answer to an added seed or comment.
type CommandResult struct {
	Status string   `json:"status"` // "added", or "duplicate" (the same comment within a minute)
	Module string   `json:"module"`
	Events []string `json:"events"` // types of the module events it logged
}

// BackendResult is the answer to a pause or resume.
type BackendResult struct {
	Backend string `json:"backend"`
	Paused  bool   `json:"paused"`
}

// Document is GET /api/document as JSON (?format=json).
type Document struct {
	Module   string   `json:"module"`
	Markdown string   `json:"markdown"`
	Sections []string `json:"sections"`
}

// Healthz is GET /healthz.
type Healthz struct {
	Status  string `json:"status"` // "ok" or "unhealthy" (HTTP 503)
	Service string `json:"service"`
	DataDir string `json:"data_dir,omitempty"`
	Reason  string `json:"reason,omitempty"` // why it is unhealthy
}

// StateName is a task state without its prefix: "PENDING".
func StateName(st pb.TaskState) string { return strings.TrimPrefix(st.String(), "TASK_STATE_") }

// ParseState reads "pending", "PENDING" or "TASK_STATE_PENDING".
func ParseState(s string) (pb.TaskState, bool) {
	u := strings.ToUpper(strings.TrimSpace(s))
	if !strings.HasPrefix(u, "TASK_STATE_") {
		u = "TASK_STATE_" + u
	}
	v, ok := pb.TaskState_value[u]
	if !ok || v == 0 {
		return 0, false
	}
	return pb.TaskState(v), true
}

func timePtr(ns int64) *time.Time {
	if ns == 0 {
		return nil
	}
	t := time.Unix(0, ns).UTC()
	return &t
}

// taskView converts a task; withMessages includes the conversation's turns.
func taskView(t *pb.Task, withMessages bool) TaskView {
	v := TaskView{
		ID: t.GetId(), Module: t.GetModule(), TaskType: t.GetTaskType(), Subject: t.GetSubject(),
		State:       StateName(t.GetState()),
		LLMAssigned: t.GetLlmAssigned(), LLMPreference: t.GetLlmPreference(), RequiresDeepMode: t.GetRequiresDeepMode(),
		RequestCount: t.GetRequestCount(), MaxRequests: t.GetMaxRequests(), Attempts: t.GetAttempts(),
		Error: t.GetError(), PauseReason: t.GetPauseReason(),
		CreatedAt: timePtr(t.GetCreatedAt()), UpdatedAt: timePtr(t.GetUpdatedAt()),
		StartedAt: timePtr(t.GetStartedAt()), CompletedAt: timePtr(t.GetCompletedAt()),
		NotBefore: timePtr(t.GetNotBefore()), Context: t.GetContext(),
	}
	v.Priority, v.Overdue = scheduler.ShownPriority(t.GetPriority())
	if c := t.GetConversation(); c != nil {
		cv := &ConversationView{LLM: c.GetLlm(), TurnCount: c.GetTurnCount(), URL: c.GetUrl(), AwaitingResponse: c.GetAwaitingResponse()}
		if withMessages {
			cv.Messages = make([]MessageView, 0, len(c.GetMessages()))
			for _, m := range c.GetMessages() {
				cv.Messages = append(cv.Messages, MessageView{Role: m.GetRole(), Content: m.GetContent(), At: timePtr(m.GetAt()), LLM: m.GetLlm()})
			}
		}
		v.Conversation = cv
	}
	return v
}

// backendState is the allocator's one state of a backend (the book's
// and the backend's own condition), read as it is; "busy" only adds that
// a ready backend has no free slot.
func backendState(b allocator.BackendStatus) string {
	if b.State != "" && b.State != allocator.StateReady {
		return b.State
	}
	if b.MaxConcurrency > 0 && b.InUse >= b.MaxConcurrency {
		return "busy"
	}
	return allocator.StateReady
}

// TaskViewOf converts a task for the API (and for the CLI, which reads the
// data directory when fano is not running); withMessages includes its
// conversation's turns.
func TaskViewOf(t *pb.Task, withMessages bool) TaskView { return taskView(t, withMessages) }

// BackendViewOf converts a backend's figures for the CLI, which reads
// them from the data directory when fano is not running (no circuit
// state or running tasks then).
func BackendViewOf(b allocator.BackendStatus, now time.Time) BackendView {
	bv := BackendView{
		Name: b.Name, Kind: b.Kind, State: backendState(b), Class: b.Class, Action: b.Action, Available: b.Available,
		HourlyUsed: b.HourlyUsed, HourlyLimit: b.HourlyLimit, LimitEstimate: b.LimitEstimate, Usable: b.Usable,
		DeepModeUsed: b.DeepUsed, DeepModeLimit: b.DeepLimit, Paused: b.Paused, PauseReason: b.PauseReason,
		InUse: b.InUse, MaxConcurrency: b.MaxConcurrency, RunningTasks: []string{},
	}
	if !b.RateLimitedUntil.IsZero() {
		t := b.RateLimitedUntil.UTC()
		bv.RateLimitedUntil = &t
	}
	bv.Reason, bv.LearnedLimit, bv.PacedPerWindow, bv.LimiterWaiting = b.Reason, b.LearnedLimit, b.PacedPerWindow, b.LimiterWaiting
	if b.LearnedWindow > 0 {
		bv.LearnedWindow = b.LearnedWindow.String()
	}
	if !b.Until.IsZero() {
		t := b.Until.UTC()
		bv.Until = &t
	}
	return bv
}
