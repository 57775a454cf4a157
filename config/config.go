// Package config is fano's configuration: the YAML schema, its defaults,
// strict loading and validation (docs/architecture.md, Configuration).
//
// Durations are plain integers whose unit is part of the field name
// (timeout_seconds, tick_interval_ms). Relative paths are kept as written;
// callers resolve them against the working directory.
package config

import (
	"net"
	"sort"
	"strings"
)

// Backend types.
const (
	TypeBrowser = "browser" // a real browser driving a chat web UI
	TypeAPI     = "api"     // an OpenAI-compatible HTTP API
	TypeSim     = "sim"     // the built-in simulated LLM
)

// Recovery stuck actions.
const (
	StuckPause = "pause"
	StuckFail  = "fail"
)

// Console log formats.
const (
	ConsoleAuto   = "auto"
	ConsolePretty = "pretty"
	ConsoleJSON   = "json"
)

// SimStyles are the answer styles the simulator knows. A sim backend's
// style defaults to its own name when that is a known style, else "api".
var SimStyles = []string{"chatgpt", "gemini", "claude", "api"}

// LogLevels are the accepted logging.level values.
var LogLevels = []string{"trace", "debug", "info", "warn", "error"}

// Config is the whole configuration file.
type Config struct {
	// DataDir holds the database, logs, output and browser profiles.
	// The CLI's --data-dir overrides it.
	DataDir      string       `yaml:"data_dir"`
	Orchestrator Orchestrator `yaml:"orchestrator"`
	LLM          LLM          `yaml:"llm"`
	// Backends maps a backend name (used in logs, metrics, the WAL and
	// directory names) to its settings.
	Backends map[string]*Backend `yaml:"backends"`
	// SiteProfilesFile optionally names a YAML file of user browser site
	// profiles that add to or override the built-in ones.
	SiteProfilesFile string         `yaml:"site_profiles_file"`
	Control          Control        `yaml:"control"`
	Deduplication    Deduplication  `yaml:"deduplication"`
	WorkAllocation   WorkAllocation `yaml:"work_allocation"`
	Explorer         Explorer       `yaml:"explorer"`
	Documenter       Documenter     `yaml:"documenter"`
	Researcher       Researcher     `yaml:"researcher"`
	Logging          Logging        `yaml:"logging"`
	// Hosts are the gateway hosts on other machines that backends may name
	// in their host field; each registers itself (`fano gateway serve`).
	Hosts map[string]*Host `yaml:"hosts,omitempty"`
	// Remote is where the orchestrator listens for its gateway hosts.
	Remote Remote `yaml:"remote"`
	// Gateway makes this config a gateway host's (`fano gateway serve`).
	Gateway Gateway `yaml:"gateway"`

	src *source // where the config came from; nil when built in code
}

// Orchestrator holds the core settings.
type Orchestrator struct {
	State         State         `yaml:"state"`
	Scheduler     Scheduler     `yaml:"scheduler"`
	ModuleWeights ModuleWeights `yaml:"module_weights"`
	Consultation  Consultation  `yaml:"consultation"`
	Tasks         Tasks         `yaml:"tasks"`
	Recovery      Recovery      `yaml:"recovery"`
	Health        Health        `yaml:"health"`
}

// State configures checkpoints and the WAL.
type State struct {
	CheckpointIntervalSeconds int `yaml:"checkpoint_interval_seconds"`
	WALCompactThresholdMB     int `yaml:"wal_compact_threshold_mb"`
	// FinishedTaskRetentionHours is how long finished tasks stay in memory
	// (they stay on disk).
	FinishedTaskRetentionHours int `yaml:"finished_task_retention_hours"`
	// MaxFinishedTasksInMemory bounds the finished tasks kept in memory:
	// past it the oldest leave it sooner than their retention (they stay
	// on disk, their keys stay taken). 0: no bound.
	MaxFinishedTasksInMemory int `yaml:"max_finished_tasks_in_memory"`
	// MemoryLimitMB is the soft memory limit of `fano run` (Go's
	// GOMEMLIMIT): past it the garbage collector runs more often instead of
	// letting the heap double. 0: no limit. A GOMEMLIMIT in the environment
	// wins.
	MemoryLimitMB int `yaml:"memory_limit_mb"`
	// BackupIntervalHours is how often `fano run` writes a consistent
	// snapshot of the WAL into <data-dir>/backup/ (0 = never); BackupsKept
	// is how many of the newest it keeps.
	BackupIntervalHours int `yaml:"backup_interval_hours"`
	BackupsKept         int `yaml:"backups_kept"`
}

// DefaultMemoryLimitMB is the default soft memory limit: well above the
// heap of a normal run (tens of MB), so the collector only works harder
// when memory is really growing.
const DefaultMemoryLimitMB = 256

// DefaultMaxFinishedTasksInMemory: a finished task in memory is a few
// hundred bytes (its light encoded record), so this bound is a few MB;
// the panel's and `fano task` views reach older tasks in the archive.
const DefaultMaxFinishedTasksInMemory = 20000

// Scheduler configures the priority scheduler.
type Scheduler struct {
	TickIntervalMS int `yaml:"tick_interval_ms"`
	// PreemptionThreshold is the priority difference needed to preempt.
	PreemptionThreshold  int                  `yaml:"preemption_threshold"`
	MaxPendingTasks      int                  `yaml:"max_pending_tasks"`
	StarvationPrevention StarvationPrevention `yaml:"starvation_prevention"`
	MaxRunningTasks      int                  `yaml:"max_running_tasks"`
}

// StarvationPrevention raises the priority of tasks that waited long.
type StarvationPrevention struct {
	// MaxWaitHours is a hard bound: a task waiting longer (since it was
	// submitted) runs before every task that has not, whatever their
	// priorities.
	MaxWaitHours         int `yaml:"max_wait_hours"`
	PriorityBoostPerHour int `yaml:"priority_boost_per_hour"`
	MaxBoost             int `yaml:"max_boost"`
}

// ModuleWeights are the relative shares of the modules in the scheduler's
// module-balance factor: a module counts as underserved (and its tasks
// get the balance bonus) below 20% of the recent task starts scaled by its
// weight over the mean weight; equal weights give a plain 20%.
type ModuleWeights struct {
	Explorer   int `yaml:"explorer"`
	Documenter int `yaml:"documenter"`
	Researcher int `yaml:"researcher"`
}

// Consultation is an optional periodic LLM consultation that would
// adjust the module weights. It is not supported yet: enabled: true
// is refused; llm is checked to name a backend.
type Consultation struct {
	Enabled         bool `yaml:"enabled"`
	IntervalMinutes int  `yaml:"interval_minutes"`
	// LLM names the backend to consult.
	LLM string `yaml:"llm"`
}

// Tasks holds per-task limits.
type Tasks struct {
	// MaxRequestsPerTask maps a task type to its LLM request budget.
	// Task types are open: unknown keys are allowed. Use Config.MaxRequests.
	MaxRequestsPerTask       map[string]int `yaml:"max_requests_per_task"`
	DefaultMaxRequests       int            `yaml:"default_max_requests"`
	ConversationMessageLimit int            `yaml:"conversation_message_limit"`
	RequestTimeoutSeconds    int            `yaml:"request_timeout_seconds"`
}

// Recovery configures retries and stuck tasks.
type Recovery struct {
	// StuckTaskTimeoutHours: a run this long is handled (StuckAction);
	// health.stuck_threshold_hours only reports it. At least the threshold.
	StuckTaskTimeoutHours int `yaml:"stuck_task_timeout_hours"`
	// MaxTaskRetries is how many answers of one task that failed
	// validation (or were refusals) are retried; the next one fails the
	// task. Transient backend failures are retried after the backoff
	// without limit: a flaky backend is not the task's fault.
	MaxTaskRetries      int   `yaml:"max_task_retries"`
	RetryBackoffSeconds []int `yaml:"retry_backoff_seconds"`
	// StuckAction is StuckPause or StuckFail.
	StuckAction string `yaml:"stuck_action"`
}

// Health configures the health monitor.
type Health struct {
	CheckIntervalSeconds  int     `yaml:"check_interval_seconds"`
	StuckThresholdHours   int     `yaml:"stuck_threshold_hours"`
	MinDiskSpaceGB        float64 `yaml:"min_disk_space_gb"`
	MaxQueueDepth         int     `yaml:"max_queue_depth"`
	ReconnectAfterSeconds int     `yaml:"reconnect_after_seconds"`
}

// LLM holds quota settings shared by all backends.
type LLM struct {
	HourlyResetMinute int `yaml:"hourly_reset_minute"`
	DailyResetHour    int `yaml:"daily_reset_hour"`
	// QuotaBufferPercent of each quota is kept in reserve (default 10).
	QuotaBufferPercent int               `yaml:"quota_buffer_percent"`
	RateLimitRecovery  RateLimitRecovery `yaml:"rate_limit_recovery"`
	CircuitBreaker     CircuitBreaker    `yaml:"circuit_breaker"`
	// EnvFile, if set, holds KEY=VALUE lines (API keys) loaded into the
	// environment at start and again on SIGHUP, so a fixed key is picked
	// up without a restart. A relative path is from the working directory.
	EnvFile string `yaml:"env_file"`
	// RefusalPatternsFile replaces the built-in patterns of answers that
	// are no answer ("Sorry, I can't help with that."): one regular
	// expression a line.
	RefusalPatternsFile string `yaml:"refusal_patterns_file"`
}

// RateLimitRecovery: after a rate limit lowered a backend's limit estimate,
// every CleanHoursPerStep hours without a rate limit raise it by StepPercent.
type RateLimitRecovery struct {
	CleanHoursPerStep int `yaml:"clean_hours_per_step"`
	StepPercent       int `yaml:"step_percent"`
}

// CircuitBreaker configures each backend's circuit breaker.
type CircuitBreaker struct {
	FailureThreshold       int `yaml:"failure_threshold"`
	RecoveryTimeoutSeconds int `yaml:"recovery_timeout_seconds"`
	HalfOpenRequests       int `yaml:"half_open_requests"`
}

// Backend is one LLM backend. Only the sub-block matching Type may be set;
// after Load it is always non-nil.
type Backend struct {
	// Type is TypeBrowser, TypeAPI or TypeSim.
	Type    string `yaml:"type"`
	Enabled bool   `yaml:"enabled"`
	// HourlyLimit is the believed hourly request quota.
	HourlyLimit int `yaml:"hourly_limit"`
	// DeepModeDailyLimit is the daily deep-mode quota; 0 = no deep mode.
	DeepModeDailyLimit int `yaml:"deep_mode_daily_limit"`
	// MaxConcurrency is the number of requests in flight at once
	// (browser: 1; api default 4; sim default 1).
	MaxConcurrency int `yaml:"max_concurrency"`
	// Host names the gateway host (in hosts) that runs this backend on
	// another machine; "" = this process runs it.
	Host    string          `yaml:"host,omitempty"`
	Browser *BrowserOptions `yaml:"browser,omitempty"`
	API     *APIOptions     `yaml:"api,omitempty"`
	Sim     *SimOptions     `yaml:"sim,omitempty"`
}

// BrowserOptions configures a browser backend.
type BrowserOptions struct {
	// Profile names the site profile (built in: chatgpt, gemini, claude);
	// defaults to the backend name.
	Profile  string `yaml:"profile"`
	Headless bool   `yaml:"headless"`
	// RecycleAfterRequests / RecycleAfterHours restart the browser; 0 = never.
	RecycleAfterRequests int `yaml:"recycle_after_requests"`
	RecycleAfterHours    int `yaml:"recycle_after_hours"`
	TimeoutSeconds       int `yaml:"timeout_seconds"`
	// RecycleAboveMB restarts the browser once Chromium with its child
	// processes uses more memory than this; 0 = never.
	RecycleAboveMB int `yaml:"recycle_above_mb"`
	// PrimeTurns is how many earlier turns a task that comes to this
	// backend with history (or whose conversation vanished) carries into
	// its new conversation, as a transcript before the prompt; 0 = none.
	PrimeTurns int `yaml:"prime_turns"`
	// AcceptDegraded are the task types that take an answer the site gives
	// with another model after a degraded notice (ChatGPT's free-plan
	// fallback); "*" for all. The model is recorded with the answer. Other
	// task types wait for the limit to reset.
	AcceptDegraded []string `yaml:"accept_degraded,omitempty"`
}

// APIOptions configures an OpenAI-compatible API backend.
type APIOptions struct {
	BaseURL string `yaml:"base_url"`
	Model   string `yaml:"model"`
	// APIKeyEnv names the environment variable holding the key; the key
	// itself never appears in the config.
	APIKeyEnv      string `yaml:"api_key_env"`
	TimeoutSeconds int    `yaml:"timeout_seconds"`
	// InitialRPM is the starting requests-per-minute estimate.
	InitialRPM int `yaml:"initial_rpm"`
	// Stream reads answers as server-sent events: a long answer arrives
	// while it is written, and one cut before its [DONE] is retried,
	// never recorded.
	Stream bool `yaml:"stream,omitempty"`
}

// SimOptions configures a simulated backend.
type SimOptions struct {
	Seed int64 `yaml:"seed"`
	// Style is one of SimStyles.
	Style           string `yaml:"style"`
	LatencyMS       int    `yaml:"latency_ms"`
	LatencyJitterMS int    `yaml:"latency_jitter_ms"`
	// HourlyLimit and DeepModeDailyLimit are the simulator's real limits;
	// 0 in the file means "same as the backend" and Load fills that in.
	HourlyLimit        int `yaml:"hourly_limit"`
	DeepModeDailyLimit int `yaml:"deep_mode_daily_limit"`
	// Probabilities (0..1) of a timeout, transient error, malformed answer.
	TimeoutRate   float64 `yaml:"timeout_rate"`
	TransientRate float64 `yaml:"transient_rate"`
	MalformedRate float64 `yaml:"malformed_rate"`
}

// Control configures the control panel.
type Control struct {
	Address string `yaml:"address"`
	Enabled bool   `yaml:"enabled"`
	// Token is a fixed panel token; empty = take it from TokenEnv, else
	// generate one.
	Token          string   `yaml:"token"`
	TokenEnv       string   `yaml:"token_env"`
	AllowedOrigins []string `yaml:"allowed_origins"`
	// AllowRemote must be true for an address other machines can reach
	// (anything but loopback); the panel is then served over TLS, with
	// TLSCert/TLSKey (PEM files) or a certificate fano generates in the
	// data directory and prints by fingerprint.
	AllowRemote bool   `yaml:"allow_remote"`
	TLSCert     string `yaml:"tls_cert"`
	TLSKey      string `yaml:"tls_key"`
	// AlertsWebhook, if set, receives a JSON POST ({"text": ...}, as
	// Slack, Mattermost and ntfy take) for every alert that needs a
	// person, raised and resolved. Its URL may hold a secret: it is never
	// logged or shown.
	AlertsWebhook string `yaml:"alerts_webhook"`
	// AlertsWebhookTopic adds ntfy's "topic", "title" and "message" to
	// the body, for ntfy's JSON publishing at the server's root URL.
	AlertsWebhookTopic string `yaml:"alerts_webhook_topic"`
}

// Remote reports whether the panel's address is reachable from other
// machines (not a loopback address).
func (c Control) Remote() bool {
	host, _, err := net.SplitHostPort(c.Address)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return false
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip == nil || !ip.IsLoopback()
}

// Deduplication configures the shared duplicate checker.
type Deduplication struct {
	Enabled             bool    `yaml:"enabled"`
	UseBatchLLM         bool    `yaml:"use_batch_llm"`
	BatchSize           int     `yaml:"batch_size"`
	SimilarityThreshold float64 `yaml:"similarity_threshold"`
	// BorderlineLow: similarities in [BorderlineLow, SimilarityThreshold)
	// are asked of an LLM.
	BorderlineLow float64 `yaml:"borderline_low"`
}

// WorkAllocation splits documenter work; the two must sum to 100.
type WorkAllocation struct {
	NewInsights    int `yaml:"new_insights"`
	ReviewExisting int `yaml:"review_existing"`
}

// Explorer configures the explorer module.
type Explorer struct {
	Enabled          bool   `yaml:"enabled"`
	SeedsFile        string `yaml:"seeds_file"`
	MaxActiveThreads int    `yaml:"max_active_threads"`
	PromptsDir       string `yaml:"prompts_dir"`
	// ReviewPanelSize reviewers (each a different backend) judge an
	// insight; defaults to min(3, enabled backends).
	ReviewPanelSize int       `yaml:"review_panel_size"`
	Consensus       Consensus `yaml:"consensus"`
	InsightMinChars int       `yaml:"insight_min_chars"`
	InsightMaxChars int       `yaml:"insight_max_chars"`
}

// Consensus decides a review panel's verdict.
type Consensus struct {
	// MinBless defaults to min(2, review_panel_size).
	MinBless  int `yaml:"min_bless"`
	MaxReject int `yaml:"max_reject"`
}

// Documenter configures the documenter module.
type Documenter struct {
	Enabled    bool   `yaml:"enabled"`
	Title      string `yaml:"title"`
	PromptsDir string `yaml:"prompts_dir"`
}

// Researcher configures the researcher module.
type Researcher struct {
	Enabled    bool   `yaml:"enabled"`
	SourcesDir string `yaml:"sources_dir"`
	PromptsDir string `yaml:"prompts_dir"`
}

// Logging configures logs.
type Logging struct {
	// Level is one of LogLevels.
	Level string `yaml:"level"`
	// Console is ConsoleAuto, ConsolePretty or ConsoleJSON.
	Console string `yaml:"console"`
}

// New returns a Config holding every default and no backends. Add backends
// (see NewBackend) and call Validate.
func New() *Config {
	return &Config{
		DataDir: "./fano-data",
		Orchestrator: Orchestrator{
			State: State{
				CheckpointIntervalSeconds:  60,
				WALCompactThresholdMB:      100,
				FinishedTaskRetentionHours: 24,
				MaxFinishedTasksInMemory:   DefaultMaxFinishedTasksInMemory,
				MemoryLimitMB:              DefaultMemoryLimitMB,
				BackupIntervalHours:        6,
				BackupsKept:                4,
			},
			Scheduler: Scheduler{
				TickIntervalMS:      100,
				PreemptionThreshold: 20,
				MaxPendingTasks:     500,
				StarvationPrevention: StarvationPrevention{
					MaxWaitHours:         4,
					PriorityBoostPerHour: 5,
					MaxBoost:             25,
				},
				MaxRunningTasks: 64,
			},
			ModuleWeights: ModuleWeights{Explorer: 40, Documenter: 40, Researcher: 20},
			Consultation:  Consultation{Enabled: false, IntervalMinutes: 60, LLM: "chatgpt"},
			Tasks: Tasks{
				MaxRequestsPerTask:       DefaultMaxRequestsPerTask(),
				DefaultMaxRequests:       10,
				ConversationMessageLimit: 50,
				RequestTimeoutSeconds:    3600,
			},
			Recovery: Recovery{
				StuckTaskTimeoutHours: 2,
				MaxTaskRetries:        3,
				RetryBackoffSeconds:   []int{60, 300, 900},
				StuckAction:           StuckPause,
			},
			Health: Health{
				CheckIntervalSeconds:  60,
				StuckThresholdHours:   2,
				MinDiskSpaceGB:        1,
				MaxQueueDepth:         100,
				ReconnectAfterSeconds: 30,
			},
		},
		LLM: LLM{
			HourlyResetMinute:  0,
			DailyResetHour:     0,
			QuotaBufferPercent: 10,
			RateLimitRecovery:  RateLimitRecovery{CleanHoursPerStep: 1, StepPercent: 10},
			CircuitBreaker:     CircuitBreaker{FailureThreshold: 5, RecoveryTimeoutSeconds: 300, HalfOpenRequests: 3},
		},
		Backends: map[string]*Backend{},
		Remote:   Remote{Listen: "0.0.0.0:7070"},
		Gateway:  Gateway{Listen: "0.0.0.0:7071", MemoryLimitMB: DefaultGatewayMemoryLimitMB},
		Control: Control{
			Address:        "127.0.0.1:8765",
			Enabled:        true,
			TokenEnv:       "FANO_PANEL_TOKEN",
			AllowedOrigins: []string{},
		},
		Deduplication: Deduplication{
			Enabled:             true,
			UseBatchLLM:         true,
			BatchSize:           20,
			SimilarityThreshold: 0.6,
			BorderlineLow:       0.4,
		},
		WorkAllocation: WorkAllocation{NewInsights: 70, ReviewExisting: 30},
		Explorer: Explorer{
			Enabled:          true,
			MaxActiveThreads: 4,
			ReviewPanelSize:  3,
			Consensus:        Consensus{MinBless: 2, MaxReject: 0},
			InsightMinChars:  20,
			InsightMaxChars:  600,
		},
		Documenter: Documenter{Enabled: true, Title: "Finite Projective Planes"},
		Researcher: Researcher{Enabled: true},
		Logging:    Logging{Level: "info", Console: ConsoleAuto},
	}
}

// DefaultMaxRequestsPerTask returns the default request budget of each
// task type.
func DefaultMaxRequestsPerTask() map[string]int {
	return map[string]int{
		"exploration":         20,
		"critique":            5,
		"synthesis":           10,
		"incorporate_insight": 15,
		"review_section":      10,
		"address_comment":     10,
	}
}

// NewBackend returns an enabled backend of the given type with every
// default set, including the sub-block of its type (HourlyLimit 50).
// Settings derived from the backend's name (browser profile, sim style)
// are filled by Load; set them yourself when building in code.
func NewBackend(typ string) *Backend {
	b := &Backend{Type: typ, Enabled: true, HourlyLimit: 50, MaxConcurrency: 1}
	switch typ {
	case TypeBrowser:
		b.Browser = &BrowserOptions{
			Headless:             true,
			RecycleAfterRequests: 200,
			RecycleAfterHours:    12,
			TimeoutSeconds:       3600,
			RecycleAboveMB:       2048,
			PrimeTurns:           6,
		}
	case TypeAPI:
		b.MaxConcurrency = 4
		b.API = &APIOptions{TimeoutSeconds: 600, InitialRPM: 20}
	case TypeSim:
		b.Sim = &SimOptions{Seed: 1, LatencyMS: 50}
	}
	return b
}

// EnabledBackends returns the names of the enabled backends, sorted.
func (c *Config) EnabledBackends() []string {
	var names []string
	for name, b := range c.Backends {
		if b != nil && b.Enabled {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// Backend returns the named backend (enabled or not).
func (c *Config) Backend(name string) (*Backend, bool) {
	b, ok := c.Backends[name]
	if !ok || b == nil {
		return nil, false
	}
	return b, true
}

// MaxRequests returns the LLM request budget of a task type:
// orchestrator.tasks.max_requests_per_task[taskType], else
// default_max_requests.
func (c *Config) MaxRequests(taskType string) int {
	if n, ok := c.Orchestrator.Tasks.MaxRequestsPerTask[taskType]; ok {
		return n
	}
	return c.Orchestrator.Tasks.DefaultMaxRequests
}

// File returns the name of the file the config was loaded from ("" when
// built in code).
func (c *Config) File() string {
	if c.src == nil {
		return ""
	}
	return c.src.file
}

// Host is a gateway host on another machine. It dials in with the
// certificate `fano remote enroll <name>` made for it.
type Host struct {
	// Note says what the host is, for people ("the desktop upstairs").
	Note string `yaml:"note,omitempty"`
}

// Remote is the orchestrator's listener for gateway hosts, used when
// hosts is not empty.
type Remote struct {
	// Listen is host:port to listen on (default 0.0.0.0:7070).
	Listen string `yaml:"listen"`
	// Advertise is host:port hosts dial to answer (default: Listen, which
	// must then be an address hosts can reach).
	Advertise string `yaml:"advertise"`
	// PlaintextLoopback turns TLS off; allowed only when every address is
	// on loopback (a test, a host on the same machine).
	PlaintextLoopback bool `yaml:"plaintext_loopback"`
}

// Gateway configures `fano gateway serve`: this process holds the
// enabled backends for the orchestrator named in the bundle.
type Gateway struct {
	// Name is the host's name; default: the bundle's.
	Name string `yaml:"name"`
	// Bundle is the file `fano remote enroll <name>` wrote.
	Bundle string `yaml:"bundle"`
	// Listen is host:port the orchestrator dials (default 0.0.0.0:7071);
	// Advertise what it dials when that differs (NAT, a name).
	Listen    string `yaml:"listen"`
	Advertise string `yaml:"advertise"`
	// Orchestrator overrides the bundle's orchestrator address.
	Orchestrator string `yaml:"orchestrator"`
	// PlaintextLoopback: no TLS, no bundle; only on loopback.
	PlaintextLoopback bool `yaml:"plaintext_loopback"`
	// MemoryLimitMB is the host process's soft memory limit (Go's
	// GOMEMLIMIT; 0: none). A host holds little: its collector may work
	// more for a small footprint beside the browsers.
	MemoryLimitMB int `yaml:"memory_limit_mb"`
}

// DefaultGatewayMemoryLimitMB is a gateway host's default soft memory
// limit.
const DefaultGatewayMemoryLimitMB = 16

// RemoteBackends maps each host to the enabled backends routed to it.
func (c *Config) RemoteBackends() map[string][]string {
	out := map[string][]string{}
	for name := range c.Hosts {
		out[name] = nil
	}
	for _, name := range c.EnabledBackends() {
		if b := c.Backends[name]; b.Host != "" {
			out[b.Host] = append(out[b.Host], name)
		}
	}
	return out
}
