package config

import (
	"cmp"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// FieldError is one problem in a config.
type FieldError struct {
	File string // file name; "" when the config was built in code
	Path string // YAML path, like backends.chatgpt.hourly_limit; "" for the whole file
	Line int    // 1-based line; 0 if unknown
	Msg  string
}

// Error formats the problem as "file:line: path: msg", leaving out the
// parts that are unknown.
func (e *FieldError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
		}
		b.WriteString(": ")
	} else if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in a config; Error lists one per line.
type Errors []*FieldError

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As find the individual *FieldError values.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

var (
	reBackendName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$`)
	reEnvName     = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)
)

type checker struct {
	c    *Config
	errs Errors
}

func (v *checker) add(path, format string, args ...any) {
	v.errs = append(v.errs, &FieldError{
		File: v.c.File(),
		Path: path,
		Line: v.c.src.line(path),
		Msg:  fmt.Sprintf(format, args...),
	})
}

func (v *checker) positive(path string, n int) {
	if n <= 0 {
		v.add(path, "must be greater than 0 (is %d)", n)
	}
}

func (v *checker) nonNegative(path string, n int) {
	if n < 0 {
		v.add(path, "must not be negative (is %d)", n)
	}
}

func (v *checker) between(path string, n, lo, hi int) {
	if n < lo || n > hi {
		v.add(path, "must be between %d and %d (is %d)", lo, hi, n)
	}
}

func (v *checker) fraction(path string, f float64) {
	if !(f >= 0 && f <= 1) {
		v.add(path, "must be between 0 and 1 (is %g)", f)
	}
}

func (v *checker) oneOf(path, val string, allowed ...string) {
	if !slices.Contains(allowed, val) {
		v.add(path, "is %q; must be one of: %s", val, strings.Join(allowed, ", "))
	}
}

// envName checks that s names an environment variable. The value is never
// echoed: a user may have pasted a secret here.
func (v *checker) envName(path, s string) {
	if !looksLikeEnvName(s) {
		v.add(path, "must be the NAME of an environment variable (like OPENROUTER_API_KEY: "+
			"A-Z, 0-9 and _, at most 64 characters), never the secret itself; "+
			"the value is not shown here in case it is one")
	}
}

func looksLikeEnvName(s string) bool {
	return len(s) <= 64 && !strings.HasPrefix(strings.ToLower(s), "sk-") && reEnvName.MatchString(s)
}

func sortLine(l int) int {
	if l <= 0 {
		return math.MaxInt
	}
	return l
}

// Validate checks the whole config and returns every problem at once as
// Errors, or nil.
func (c *Config) Validate() error {
	v := &checker{c: c}
	if strings.TrimSpace(c.DataDir) == "" {
		v.add("data_dir", "must not be empty")
	}
	c.validateOrchestrator(v)
	c.validateLLM(v)
	enabled := c.validateBackends(v)
	c.validateConsultation(v)
	c.validateControl(v)
	c.validateHosts(v)
	c.validateModules(v, enabled)
	if len(v.errs) == 0 {
		return nil
	}
	// File order; problems without a line last.
	slices.SortStableFunc(v.errs, func(a, b *FieldError) int {
		return cmp.Compare(sortLine(a.Line), sortLine(b.Line))
	})
	return v.errs
}

func (c *Config) validateOrchestrator(v *checker) {
	o := &c.Orchestrator
	v.positive("orchestrator.state.checkpoint_interval_seconds", o.State.CheckpointIntervalSeconds)
	v.positive("orchestrator.state.wal_compact_threshold_mb", o.State.WALCompactThresholdMB)
	v.positive("orchestrator.state.finished_task_retention_hours", o.State.FinishedTaskRetentionHours)
	v.nonNegative("orchestrator.state.memory_limit_mb", o.State.MemoryLimitMB)
	v.nonNegative("orchestrator.state.max_finished_tasks_in_memory", o.State.MaxFinishedTasksInMemory)
	v.nonNegative("orchestrator.state.backup_interval_hours", o.State.BackupIntervalHours)
	v.positive("orchestrator.state.backups_kept", o.State.BackupsKept)

	s := &o.Scheduler
	v.positive("orchestrator.scheduler.tick_interval_ms", s.TickIntervalMS)
	v.nonNegative("orchestrator.scheduler.preemption_threshold", s.PreemptionThreshold)
	v.positive("orchestrator.scheduler.max_pending_tasks", s.MaxPendingTasks)
	v.positive("orchestrator.scheduler.max_running_tasks", s.MaxRunningTasks)
	v.positive("orchestrator.scheduler.starvation_prevention.max_wait_hours", s.StarvationPrevention.MaxWaitHours)
	v.nonNegative("orchestrator.scheduler.starvation_prevention.priority_boost_per_hour", s.StarvationPrevention.PriorityBoostPerHour)
	v.nonNegative("orchestrator.scheduler.starvation_prevention.max_boost", s.StarvationPrevention.MaxBoost)

	w := o.ModuleWeights
	v.nonNegative("orchestrator.module_weights.explorer", w.Explorer)
	v.nonNegative("orchestrator.module_weights.documenter", w.Documenter)
	v.nonNegative("orchestrator.module_weights.researcher", w.Researcher)
	if w.Explorer >= 0 && w.Documenter >= 0 && w.Researcher >= 0 && w.Explorer+w.Documenter+w.Researcher == 0 {
		v.add("orchestrator.module_weights", "at least one weight must be greater than 0")
	}

	v.positive("orchestrator.consultation.interval_minutes", o.Consultation.IntervalMinutes)

	t := &o.Tasks
	types := make([]string, 0, len(t.MaxRequestsPerTask))
	for k := range t.MaxRequestsPerTask {
		types = append(types, k)
	}
	slices.Sort(types)
	for _, k := range types {
		p := "orchestrator.tasks.max_requests_per_task." + k
		if strings.TrimSpace(k) == "" {
			v.add(p, "task type must not be empty")
		}
		v.positive(p, t.MaxRequestsPerTask[k])
	}
	v.positive("orchestrator.tasks.default_max_requests", t.DefaultMaxRequests)
	v.positive("orchestrator.tasks.conversation_message_limit", t.ConversationMessageLimit)
	v.positive("orchestrator.tasks.request_timeout_seconds", t.RequestTimeoutSeconds)

	r := &o.Recovery
	v.positive("orchestrator.recovery.stuck_task_timeout_hours", r.StuckTaskTimeoutHours)
	if r.StuckTaskTimeoutHours > 0 && r.StuckTaskTimeoutHours < o.Health.StuckThresholdHours {
		// A run is reported stuck at the threshold and handled at the
		// timeout: handling it before it is reported makes no sense.
		v.add("orchestrator.recovery.stuck_task_timeout_hours",
			"must be at least orchestrator.health.stuck_threshold_hours (%d < %d): a task is reported stuck at the threshold, then handled (stuck_action) at the timeout",
			r.StuckTaskTimeoutHours, o.Health.StuckThresholdHours)
	}
	v.nonNegative("orchestrator.recovery.max_task_retries", r.MaxTaskRetries)
	if len(r.RetryBackoffSeconds) == 0 {
		v.add("orchestrator.recovery.retry_backoff_seconds", "must list at least one delay, like [60, 300, 900]")
	}
	for i, s := range r.RetryBackoffSeconds {
		v.positive(fmt.Sprintf("orchestrator.recovery.retry_backoff_seconds[%d]", i), s)
	}
	v.oneOf("orchestrator.recovery.stuck_action", r.StuckAction, StuckPause, StuckFail)

	h := &o.Health
	v.positive("orchestrator.health.check_interval_seconds", h.CheckIntervalSeconds)
	v.positive("orchestrator.health.stuck_threshold_hours", h.StuckThresholdHours)
	if !(h.MinDiskSpaceGB >= 0) {
		v.add("orchestrator.health.min_disk_space_gb", "must not be negative (is %g)", h.MinDiskSpaceGB)
	}
	v.positive("orchestrator.health.max_queue_depth", h.MaxQueueDepth)
	v.positive("orchestrator.health.reconnect_after_seconds", h.ReconnectAfterSeconds)
}

func (c *Config) validateLLM(v *checker) {
	l := &c.LLM
	v.between("llm.hourly_reset_minute", l.HourlyResetMinute, 0, 59)
	v.between("llm.daily_reset_hour", l.DailyResetHour, 0, 23)
	v.between("llm.quota_buffer_percent", l.QuotaBufferPercent, 0, 99)
	v.positive("llm.rate_limit_recovery.clean_hours_per_step", l.RateLimitRecovery.CleanHoursPerStep)
	v.between("llm.rate_limit_recovery.step_percent", l.RateLimitRecovery.StepPercent, 1, 100)
	v.positive("llm.circuit_breaker.failure_threshold", l.CircuitBreaker.FailureThreshold)
	v.positive("llm.circuit_breaker.recovery_timeout_seconds", l.CircuitBreaker.RecoveryTimeoutSeconds)
	v.positive("llm.circuit_breaker.half_open_requests", l.CircuitBreaker.HalfOpenRequests)
}

// validateBackends checks every backend and returns the enabled names.
func (c *Config) validateBackends(v *checker) []string {
	names := make([]string, 0, len(c.Backends))
	for name := range c.Backends {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		c.validateBackend(v, name, c.Backends[name])
	}
	enabled := c.EnabledBackends()
	if len(enabled) == 0 {
		if len(names) == 0 {
			v.add("backends", "no backends configured; configure at least one (type browser, api or sim)")
		} else {
			v.add("backends", "no backend is enabled; enable at least one of: %s", strings.Join(names, ", "))
		}
	}
	return enabled
}

func (c *Config) validateBackend(v *checker, name string, b *Backend) {
	p := "backends." + name
	if !reBackendName.MatchString(name) {
		v.add(p, "backend name must be 1-63 letters, digits, '-' or '_', starting with a letter or digit")
	}
	if b == nil {
		v.add(p, "empty backend; set at least type and hourly_limit")
		return
	}
	types := []string{TypeBrowser, TypeAPI, TypeSim}
	switch {
	case b.Type == "":
		v.add(p+".type", "missing; must be one of: %s", strings.Join(types, ", "))
	case !slices.Contains(types, b.Type):
		v.add(p+".type", "unknown backend type %q; must be one of: %s", b.Type, strings.Join(types, ", "))
	}
	v.positive(p+".hourly_limit", b.HourlyLimit)
	v.nonNegative(p+".deep_mode_daily_limit", b.DeepModeDailyLimit)
	if b.Type == TypeBrowser && b.MaxConcurrency != 1 {
		v.add(p+".max_concurrency", "must be 1 for a browser backend (one page, one request at a time); is %d", b.MaxConcurrency)
	} else {
		v.positive(p+".max_concurrency", b.MaxConcurrency)
	}

	blocks := []struct {
		typ string
		set bool
	}{{TypeBrowser, b.Browser != nil}, {TypeAPI, b.API != nil}, {TypeSim, b.Sim != nil}}
	for _, blk := range blocks {
		if blk.set && blk.typ != b.Type && slices.Contains(types, b.Type) {
			v.add(p+"."+blk.typ, "a backend of type %s may only have the %q block, not %q", b.Type, b.Type, blk.typ)
		}
		if !blk.set && blk.typ == b.Type {
			v.add(p+"."+blk.typ, "missing the %q block of a %s backend", blk.typ, b.Type)
		}
	}

	switch b.Type {
	case TypeBrowser:
		if br := b.Browser; br != nil {
			q := p + ".browser"
			if strings.TrimSpace(br.Profile) == "" {
				v.add(q+".profile", "must name a site profile (built in: chatgpt, gemini, claude)")
			}
			v.nonNegative(q+".recycle_after_requests", br.RecycleAfterRequests)
			v.nonNegative(q+".recycle_after_hours", br.RecycleAfterHours)
			v.nonNegative(q+".recycle_above_mb", br.RecycleAboveMB)
			v.nonNegative(q+".prime_turns", br.PrimeTurns)
			v.positive(q+".timeout_seconds", br.TimeoutSeconds)
		}
	case TypeAPI:
		if a := b.API; a != nil {
			q := p + ".api"
			if a.BaseURL == "" {
				v.add(q+".base_url", "missing; the API's base URL, like https://openrouter.ai/api/v1")
			} else if u, err := url.Parse(a.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				v.add(q+".base_url", "must be an http(s) URL, like https://openrouter.ai/api/v1")
			}
			if strings.TrimSpace(a.Model) == "" {
				v.add(q+".model", "missing; the model name the API expects")
			}
			if a.APIKeyEnv == "" {
				v.add(q+".api_key_env", "missing; the NAME of the environment variable that holds the API key, like OPENROUTER_API_KEY")
			} else {
				v.envName(q+".api_key_env", a.APIKeyEnv)
			}
			v.positive(q+".timeout_seconds", a.TimeoutSeconds)
			v.positive(q+".initial_rpm", a.InitialRPM)
		}
	case TypeSim:
		if s := b.Sim; s != nil {
			q := p + ".sim"
			v.oneOf(q+".style", s.Style, SimStyles...)
			v.nonNegative(q+".latency_ms", s.LatencyMS)
			v.nonNegative(q+".latency_jitter_ms", s.LatencyJitterMS)
			v.nonNegative(q+".hourly_limit", s.HourlyLimit)
			v.nonNegative(q+".deep_mode_daily_limit", s.DeepModeDailyLimit)
			v.fraction(q+".timeout_rate", s.TimeoutRate)
			v.fraction(q+".transient_rate", s.TransientRate)
			v.fraction(q+".malformed_rate", s.MalformedRate)
		}
	}
}

func (c *Config) validateConsultation(v *checker) {
	con := &c.Orchestrator.Consultation
	if con.Enabled {
		v.add("orchestrator.consultation.enabled", "LLM consultation is not supported yet: "+
			"the module weights stay as orchestrator.module_weights sets them; set enabled: false")
	}
	if !con.Enabled && !c.present("orchestrator.consultation.llm") {
		return // the default name need not exist while unused
	}
	c.backendRef(v, "orchestrator.consultation.llm", con.LLM, con.Enabled)
}

// backendRef checks that name (at path) names a configured backend, and an
// enabled one when mustBeEnabled.
func (c *Config) backendRef(v *checker, path, name string, mustBeEnabled bool) {
	b, ok := c.Backend(name)
	switch {
	case name == "":
		v.add(path, "must name a backend")
	case !ok:
		v.add(path, "%q is not a configured backend (configured: %s)", name, strings.Join(c.sortedBackendNames(), ", "))
	case mustBeEnabled && !b.Enabled:
		v.add(path, "backend %q is disabled", name)
	}
}

func (c *Config) sortedBackendNames() []string {
	names := make([]string, 0, len(c.Backends))
	for n := range c.Backends {
		names = append(names, n)
	}
	slices.Sort(names)
	if len(names) == 0 {
		return []string{"none"}
	}
	return names
}

func (c *Config) validateControl(v *checker) {
	ctl := &c.Control
	// An empty host (":8765") listens on every interface; allowed.
	if _, port, err := net.SplitHostPort(ctl.Address); err != nil {
		v.add("control.address", "must be host:port, like 127.0.0.1:8765 (is %q)", ctl.Address)
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		v.add("control.address", "port must be a number from 0 to 65535 (is %q)", port)
	}
	if ctl.Remote() && !ctl.AllowRemote && ctl.Enabled {
		v.add("control.address", "%q is reachable from other machines (it is not a loopback address): use 127.0.0.1:PORT, or set control.allow_remote: true to serve the panel over TLS to the network", ctl.Address)
	}
	if (ctl.TLSCert == "") != (ctl.TLSKey == "") {
		v.add("control.tls_cert", "tls_cert and tls_key go together (PEM files); leave both empty to have fano generate a certificate")
	}
	for field, path := range map[string]string{"control.tls_cert": ctl.TLSCert, "control.tls_key": ctl.TLSKey} {
		if path != "" {
			if _, err := os.Stat(path); err != nil {
				v.add(field, "cannot read %s: %v", path, err)
			}
		}
	}
	if ctl.Token != "" && len(ctl.Token) < 16 {
		v.add("control.token", "must be at least 16 characters (or leave it empty to use token_env or a generated token)")
	}
	if ctl.TokenEnv != "" {
		v.envName("control.token_env", ctl.TokenEnv)
	}
	if ctl.AlertsWebhook != "" {
		// The URL is not echoed: chat webhooks carry their secret in it.
		u, err := url.Parse(ctl.AlertsWebhook)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.add("control.alerts_webhook", "must be an http:// or https:// URL, like https://ntfy.sh/your-topic or a Slack incoming webhook")
		}
	}
	if ctl.AlertsWebhookTopic != "" && ctl.AlertsWebhook == "" {
		v.add("control.alerts_webhook_topic", "needs control.alerts_webhook (the ntfy server's URL)")
	}
	for i, o := range ctl.AllowedOrigins {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			v.add(fmt.Sprintf("control.allowed_origins[%d]", i), "must be an origin like http://localhost:3000 (is %q)", o)
		}
	}

	d := &c.Deduplication
	v.positive("deduplication.batch_size", d.BatchSize)
	v.fraction("deduplication.similarity_threshold", d.SimilarityThreshold)
	v.fraction("deduplication.borderline_low", d.BorderlineLow)
	if d.BorderlineLow > d.SimilarityThreshold {
		v.add("deduplication.borderline_low", "must not be above similarity_threshold (%g > %g)", d.BorderlineLow, d.SimilarityThreshold)
	}

	w := &c.WorkAllocation
	v.between("work_allocation.new_insights", w.NewInsights, 0, 100)
	v.between("work_allocation.review_existing", w.ReviewExisting, 0, 100)
	if sum := w.NewInsights + w.ReviewExisting; sum != 100 {
		v.add("work_allocation", "new_insights + review_existing must be 100 (is %d)", sum)
	}

	v.oneOf("logging.level", c.Logging.Level, LogLevels...)
	v.oneOf("logging.console", c.Logging.Console, ConsoleAuto, ConsolePretty, ConsoleJSON)
}

func (c *Config) validateModules(v *checker, enabled []string) {
	e := &c.Explorer
	v.positive("explorer.max_active_threads", e.MaxActiveThreads)
	if e.ReviewPanelSize < 1 {
		v.add("explorer.review_panel_size", "must be at least 1 (is %d)", e.ReviewPanelSize)
	} else if e.Enabled && len(enabled) > 0 && e.ReviewPanelSize > len(enabled) {
		v.add("explorer.review_panel_size", "is %d but only %d backend(s) are enabled (%s); each reviewer must be a different backend, so enable more backends or lower review_panel_size",
			e.ReviewPanelSize, len(enabled), strings.Join(enabled, ", "))
	}
	if e.Consensus.MinBless < 1 {
		v.add("explorer.consensus.min_bless", "must be at least 1 (is %d)", e.Consensus.MinBless)
	} else if e.ReviewPanelSize >= 1 && e.Consensus.MinBless > e.ReviewPanelSize {
		v.add("explorer.consensus.min_bless", "is %d but the review panel has only %d reviewers (explorer.review_panel_size)", e.Consensus.MinBless, e.ReviewPanelSize)
	}
	v.nonNegative("explorer.consensus.max_reject", e.Consensus.MaxReject)
	v.positive("explorer.insight_min_chars", e.InsightMinChars)
	if e.InsightMaxChars < e.InsightMinChars {
		v.add("explorer.insight_max_chars", "must be at least insight_min_chars (%d < %d)", e.InsightMaxChars, e.InsightMinChars)
	}
	if c.Documenter.Enabled && strings.TrimSpace(c.Documenter.Title) == "" {
		v.add("documenter.title", "must not be empty")
	}
}

// validateHosts checks the gateway hosts, the backends that name one,
// and the listeners of both sides.
func (c *Config) validateHosts(v *checker) {
	names := make([]string, 0, len(c.Hosts))
	for name := range c.Hosts {
		names = append(names, name)
		if !reBackendName.MatchString(name) || name == "fano-orchestrator" {
			v.add("hosts."+name, "host name must be 1-63 letters, digits, '-' or '_', starting with a letter or digit (and not fano-orchestrator)")
		}
	}
	slices.Sort(names)
	known := strings.Join(names, ", ")
	if known == "" {
		known = "none configured"
	}
	for _, name := range c.sortedBackendNames() {
		b := c.Backends[name]
		if b == nil || b.Host == "" {
			continue
		}
		if _, ok := c.Hosts[b.Host]; !ok {
			v.add("backends."+name+".host", "unknown host %q; hosts: %s", b.Host, known)
		}
	}
	if len(c.Hosts) > 0 {
		c.hostPort(v, "remote.listen", c.Remote.Listen, c.Remote.PlaintextLoopback)
		if c.Remote.Advertise != "" {
			c.hostPort(v, "remote.advertise", c.Remote.Advertise, c.Remote.PlaintextLoopback)
		}
	}
	g := c.Gateway
	v.nonNegative("gateway.memory_limit_mb", g.MemoryLimitMB)
	if g.Listen != "" {
		c.hostPort(v, "gateway.listen", g.Listen, g.PlaintextLoopback)
	}
	if g.Advertise != "" {
		c.hostPort(v, "gateway.advertise", g.Advertise, g.PlaintextLoopback)
	}
	if g.Orchestrator != "" {
		c.hostPort(v, "gateway.orchestrator", g.Orchestrator, g.PlaintextLoopback)
	}
}

// hostPort checks a host:port; plaintext allows only loopback.
func (c *Config) hostPort(v *checker, path, addr string, plaintext bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		v.add(path, "must be host:port, like 0.0.0.0:7070; is %q", addr)
		return
	}
	if plaintext {
		ip := net.ParseIP(host)
		if host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			v.add(path, "plaintext_loopback allows only loopback addresses (127.0.0.1, ::1); %q is not", addr)
		}
	}
}
