package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sim is a valid backends block with one sim backend, for cases that are
// about something else.
const sim = `
backends:
  a: {type: sim, hourly_limit: 50}
`

// three is a valid backends block with three enabled sim backends.
const three = `
backends:
  a: {type: sim, hourly_limit: 50}
  b: {type: sim, hourly_limit: 50}
  c: {type: sim, hourly_limit: 50}
`

const marker = "# <-"

// markedLine returns the 1-based line of doc that holds the marker.
func markedLine(t *testing.T, doc string) int {
	t.Helper()
	for i, l := range strings.Split(doc, "\n") {
		if strings.Contains(l, marker) {
			return i + 1
		}
	}
	t.Fatalf("no %q marker in:\n%s", marker, doc)
	return 0
}

// requireFieldError parses doc and asserts that one of the errors names
// path on the marked line, both in the FieldError and in the message.
func requireFieldError(t *testing.T, doc, path string) *FieldError {
	t.Helper()
	line := markedLine(t, doc)
	_, err := Parse([]byte(doc), "t.yaml")
	require.Error(t, err, "doc:\n%s", doc)
	var errs Errors
	require.True(t, errors.As(err, &errs), "error is %T: %v", err, err)
	for _, fe := range errs {
		if fe.Path == path {
			assert.Equal(t, line, fe.Line, "line of %s in %v", path, err)
			assert.Equal(t, "t.yaml", fe.File)
			assert.Contains(t, err.Error(), fmt.Sprintf("t.yaml:%d: %s: ", line, path))
			return fe
		}
	}
	t.Fatalf("no error for %s; got:\n%v", path, err)
	return nil
}

func TestValidationErrors(t *testing.T) {
	cases := []struct {
		name, path, doc string
		msg             string // optional: part of the message
	}{
		{"data_dir empty", "data_dir", `data_dir: "" # <-` + sim, "empty"},

		{"checkpoint interval", "orchestrator.state.checkpoint_interval_seconds", `
orchestrator:
  state:
    checkpoint_interval_seconds: 0 # <-
` + sim, "greater than 0"},
		{"wal threshold", "orchestrator.state.wal_compact_threshold_mb", `
orchestrator: {state: {wal_compact_threshold_mb: -1}} # <-
` + sim, ""},
		{"retention", "orchestrator.state.finished_task_retention_hours", `
orchestrator:
  state: {finished_task_retention_hours: 0} # <-
` + sim, ""},
		{"memory limit", "orchestrator.state.memory_limit_mb", `
orchestrator:
  state: {memory_limit_mb: -64} # <-
` + sim, "negative"},
		{"tick", "orchestrator.scheduler.tick_interval_ms", `
orchestrator:
  scheduler:
    tick_interval_ms: 0 # <-
` + sim, ""},
		{"preemption", "orchestrator.scheduler.preemption_threshold", `
orchestrator:
  scheduler:
    preemption_threshold: -5 # <-
` + sim, "negative"},
		{"max pending", "orchestrator.scheduler.max_pending_tasks", `
orchestrator:
  scheduler:
    max_pending_tasks: 0 # <-
` + sim, ""},
		{"max running", "orchestrator.scheduler.max_running_tasks", `
orchestrator:
  scheduler:
    max_running_tasks: -1 # <-
` + sim, ""},
		{"max wait", "orchestrator.scheduler.starvation_prevention.max_wait_hours", `
orchestrator:
  scheduler:
    starvation_prevention:
      max_wait_hours: 0 # <-
` + sim, ""},
		{"boost per hour", "orchestrator.scheduler.starvation_prevention.priority_boost_per_hour", `
orchestrator:
  scheduler:
    starvation_prevention:
      priority_boost_per_hour: -1 # <-
` + sim, ""},
		{"max boost", "orchestrator.scheduler.starvation_prevention.max_boost", `
orchestrator:
  scheduler:
    starvation_prevention:
      max_boost: -1 # <-
` + sim, ""},
		{"negative weight", "orchestrator.module_weights.researcher", `
orchestrator:
  module_weights:
    researcher: -20 # <-
` + sim, ""},
		{"all weights zero", "orchestrator.module_weights", `
orchestrator:
  module_weights: # <-
    explorer: 0
    documenter: 0
    researcher: 0
` + sim, "at least one"},
		{"consultation interval", "orchestrator.consultation.interval_minutes", `
orchestrator:
  consultation:
    interval_minutes: 0 # <-
` + sim, ""},
		{"consultation unknown llm", "orchestrator.consultation.llm", `
orchestrator:
  consultation:
    enabled: true
    llm: gpt5 # <-
` + sim, `"gpt5" is not a configured backend`},
		{"consultation llm typo while disabled", "orchestrator.consultation.llm", `
orchestrator:
  consultation:
    llm: chatgtp # <-
` + sim, "not a configured backend"},
		{"consultation llm disabled backend", "orchestrator.consultation.llm", `
orchestrator:
  consultation:
    enabled: true
    llm: b # <-
backends:
  a: {type: sim, hourly_limit: 50}
  b: {type: sim, hourly_limit: 50, enabled: false}
`, "disabled"},
		{"max requests of a known type", "orchestrator.tasks.max_requests_per_task.exploration", `
orchestrator:
  tasks:
    max_requests_per_task:
      exploration: 0 # <-
` + sim, ""},
		{"max requests of an open type", "orchestrator.tasks.max_requests_per_task.my_task", `
orchestrator:
  tasks:
    max_requests_per_task: {my_task: -3} # <-
` + sim, ""},
		{"default max requests", "orchestrator.tasks.default_max_requests", `
orchestrator:
  tasks:
    default_max_requests: 0 # <-
` + sim, ""},
		{"conversation limit", "orchestrator.tasks.conversation_message_limit", `
orchestrator:
  tasks:
    conversation_message_limit: 0 # <-
` + sim, ""},
		{"request timeout", "orchestrator.tasks.request_timeout_seconds", `
orchestrator:
  tasks:
    request_timeout_seconds: -1 # <-
` + sim, ""},
		{"stuck timeout", "orchestrator.recovery.stuck_task_timeout_hours", `
orchestrator:
  recovery:
    stuck_task_timeout_hours: 0 # <-
` + sim, ""},
		{"retries", "orchestrator.recovery.max_task_retries", `
orchestrator:
  recovery:
    max_task_retries: -1 # <-
` + sim, ""},
		{"backoff empty", "orchestrator.recovery.retry_backoff_seconds", `
orchestrator:
  recovery:
    retry_backoff_seconds: [] # <-
` + sim, "at least one"},
		{"backoff not positive", "orchestrator.recovery.retry_backoff_seconds[1]", `
orchestrator:
  recovery:
    retry_backoff_seconds:
      - 60
      - 0 # <-
` + sim, ""},
		{"stuck action", "orchestrator.recovery.stuck_action", `
orchestrator:
  recovery:
    stuck_action: retry # <-
` + sim, "pause, fail"},
		{"health interval", "orchestrator.health.check_interval_seconds", `
orchestrator:
  health:
    check_interval_seconds: 0 # <-
` + sim, ""},
		{"health stuck", "orchestrator.health.stuck_threshold_hours", `
orchestrator:
  health:
    stuck_threshold_hours: 0 # <-
` + sim, ""},
		{"disk", "orchestrator.health.min_disk_space_gb", `
orchestrator:
  health:
    min_disk_space_gb: -0.5 # <-
` + sim, ""},
		{"queue depth", "orchestrator.health.max_queue_depth", `
orchestrator:
  health:
    max_queue_depth: 0 # <-
` + sim, ""},
		{"reconnect", "orchestrator.health.reconnect_after_seconds", `
orchestrator:
  health:
    reconnect_after_seconds: 0 # <-
` + sim, ""},

		{"hourly reset minute", "llm.hourly_reset_minute", `
llm:
  hourly_reset_minute: 60 # <-
` + sim, "between 0 and 59"},
		{"daily reset hour", "llm.daily_reset_hour", `
llm:
  daily_reset_hour: 24 # <-
` + sim, "between 0 and 23"},
		{"negative daily reset hour", "llm.daily_reset_hour", `
llm:
  daily_reset_hour: -1 # <-
` + sim, ""},
		{"quota buffer", "llm.quota_buffer_percent", `
llm:
  quota_buffer_percent: 100 # <-
` + sim, ""},
		{"clean hours", "llm.rate_limit_recovery.clean_hours_per_step", `
llm:
  rate_limit_recovery:
    clean_hours_per_step: 0 # <-
` + sim, ""},
		{"step percent", "llm.rate_limit_recovery.step_percent", `
llm:
  rate_limit_recovery:
    step_percent: 101 # <-
` + sim, ""},
		{"failure threshold", "llm.circuit_breaker.failure_threshold", `
llm:
  circuit_breaker:
    failure_threshold: 0 # <-
` + sim, ""},
		{"recovery timeout", "llm.circuit_breaker.recovery_timeout_seconds", `
llm:
  circuit_breaker:
    recovery_timeout_seconds: 0 # <-
` + sim, ""},
		{"half open", "llm.circuit_breaker.half_open_requests", `
llm:
  circuit_breaker:
    half_open_requests: 0 # <-
` + sim, ""},

		{"no backends", "backends", `
backends: {} # <-
`, "no backends"},
		{"no enabled backend", "backends", `
backends: # <-
  a: {type: sim, hourly_limit: 50, enabled: false}
`, "no backend is enabled"},
		{"unknown type", "backends.a.type", `
backends:
  a:
    type: browserr # <-
    hourly_limit: 50
  b: {type: sim, hourly_limit: 50}
`, `unknown backend type "browserr"`},
		{"missing type", "backends.a.type", `
backends:
  a: # <-
    hourly_limit: 50
`, "missing"},
		{"empty backend", "backends.a", `
backends:
  a: # <-
  b: {type: sim, hourly_limit: 50}
`, "empty backend"},
		{"bad backend name", "backends.a/b", `
backends:
  a/b: {type: sim, hourly_limit: 50} # <-
`, "backend name"},
		{"hourly limit", "backends.a.hourly_limit", `
backends:
  a:
    type: sim
    hourly_limit: 0 # <-
`, "greater than 0"},
		{"deep mode limit", "backends.a.deep_mode_daily_limit", `
backends:
  a:
    type: sim
    hourly_limit: 50
    deep_mode_daily_limit: -1 # <-
`, ""},
		{"browser concurrency", "backends.a.max_concurrency", `
backends:
  a:
    type: browser
    hourly_limit: 50
    max_concurrency: 2 # <-
`, "must be 1"},
		{"api concurrency", "backends.a.max_concurrency", `
backends:
  a:
    type: api
    hourly_limit: 50
    max_concurrency: 0 # <-
    api: {base_url: "https://x.example/v1", model: m, api_key_env: KEY}
`, ""},
		{"sim with api block", "backends.a.api", `
backends:
  a:
    type: sim
    hourly_limit: 50
    api: # <-
      model: m
`, "only have the \"sim\" block"},
		{"api with browser block", "backends.a.browser", `
backends:
  a:
    type: api
    hourly_limit: 50
    api: {base_url: "https://x.example/v1", model: m, api_key_env: KEY}
    browser: {headless: false} # <-
`, ""},
		{"browser recycle", "backends.a.browser.recycle_after_requests", `
backends:
  a:
    type: browser
    hourly_limit: 50
    browser:
      recycle_after_requests: -1 # <-
`, ""},
		{"browser recycle hours", "backends.a.browser.recycle_after_hours", `
backends:
  a:
    type: browser
    hourly_limit: 50
    browser:
      recycle_after_hours: -1 # <-
`, ""},
		{"browser timeout", "backends.a.browser.timeout_seconds", `
backends:
  a:
    type: browser
    hourly_limit: 50
    browser:
      timeout_seconds: 0 # <-
`, ""},
		{"api missing base_url", "backends.a.api.base_url", `
backends:
  a:
    type: api
    hourly_limit: 50
    api: # <-
      model: m
      api_key_env: KEY
`, "missing"},
		{"api missing model", "backends.a.api.model", `
backends:
  a:
    type: api
    hourly_limit: 50
    api: # <-
      base_url: https://x.example/v1
      api_key_env: KEY
`, "missing"},
		{"api missing api_key_env", "backends.a.api.api_key_env", `
backends:
  a:
    type: api
    hourly_limit: 50
    api: # <-
      base_url: https://x.example/v1
      model: m
`, "missing"},
		{"api without api block", "backends.a.api.base_url", `
backends:
  a: # <-
    type: api
    hourly_limit: 50
`, "missing"},
		{"api bad base_url", "backends.a.api.base_url", `
backends:
  a:
    type: api
    hourly_limit: 50
    api:
      base_url: openrouter.ai/api # <-
      model: m
      api_key_env: KEY
`, "http(s) URL"},
		{"api key env lowercase", "backends.a.api.api_key_env", `
backends:
  a:
    type: api
    hourly_limit: 50
    api:
      base_url: https://x.example/v1
      model: m
      api_key_env: openrouter_key # <-
`, "NAME of an environment variable"},
		{"api timeout", "backends.a.api.timeout_seconds", `
backends:
  a:
    type: api
    hourly_limit: 50
    api:
      base_url: https://x.example/v1
      model: m
      api_key_env: KEY
      timeout_seconds: 0 # <-
`, ""},
		{"api initial rpm", "backends.a.api.initial_rpm", `
backends:
  a:
    type: api
    hourly_limit: 50
    api:
      base_url: https://x.example/v1
      model: m
      api_key_env: KEY
      initial_rpm: -1 # <-
`, ""},
		{"sim style", "backends.a.sim.style", `
backends:
  a:
    type: sim
    hourly_limit: 50
    sim:
      style: llama # <-
`, "chatgpt, gemini, claude, api"},
		{"sim latency", "backends.a.sim.latency_ms", `
backends:
  a:
    type: sim
    hourly_limit: 50
    sim:
      latency_ms: -1 # <-
`, ""},
		{"sim jitter", "backends.a.sim.latency_jitter_ms", `
backends:
  a:
    type: sim
    hourly_limit: 50
    sim:
      latency_jitter_ms: -1 # <-
`, ""},
		{"sim hourly", "backends.a.sim.hourly_limit", `
backends:
  a:
    type: sim
    hourly_limit: 50
    sim:
      hourly_limit: -1 # <-
`, ""},
		{"sim deep", "backends.a.sim.deep_mode_daily_limit", `
backends:
  a:
    type: sim
    hourly_limit: 50
    sim:
      deep_mode_daily_limit: -1 # <-
`, ""},
		{"sim timeout rate", "backends.a.sim.timeout_rate", `
backends:
  a:
    type: sim
    hourly_limit: 50
    sim:
      timeout_rate: 1.5 # <-
`, "between 0 and 1"},
		{"sim transient rate", "backends.a.sim.transient_rate", `
backends:
  a:
    type: sim
    hourly_limit: 50
    sim:
      transient_rate: -0.1 # <-
`, ""},
		{"sim malformed rate", "backends.a.sim.malformed_rate", `
backends:
  a:
    type: sim
    hourly_limit: 50
    sim:
      malformed_rate: 2 # <-
`, ""},

		{"control address", "control.address", `
control:
  address: localhost # <-
` + sim, "host:port"},
		{"control port", "control.address", `
control:
  address: 127.0.0.1:http # <-
` + sim, "port"},
		{"control token", "control.token", `
control:
  token: short # <-
` + sim, "16 characters"},
		{"control token env", "control.token_env", `
control:
  token_env: my-token # <-
` + sim, "NAME of an environment variable"},
		{"allowed origin", "control.allowed_origins[0]", `
control:
  allowed_origins:
    - localhost:3000 # <-
` + sim, "origin"},
		{"alerts webhook", "control.alerts_webhook", `
control:
  alerts_webhook: hooks.example.com/T0SECRET # <-
` + sim, "http:// or https:// URL"},
		{"alerts webhook topic", "control.alerts_webhook_topic", `
control:
  alerts_webhook_topic: fano # <-
` + sim, "needs control.alerts_webhook"},

		{"dedup batch", "deduplication.batch_size", `
deduplication:
  batch_size: 0 # <-
` + sim, ""},
		{"dedup threshold", "deduplication.similarity_threshold", `
deduplication:
  similarity_threshold: 1.2 # <-
` + sim, "between 0 and 1"},
		{"dedup borderline", "deduplication.borderline_low", `
deduplication:
  similarity_threshold: 0.5
  borderline_low: 0.7 # <-
` + sim, "similarity_threshold"},

		{"work allocation sum", "work_allocation", `
work_allocation: # <-
  new_insights: 60
  review_existing: 30
` + sim, "must be 100 (is 90)"},
		{"work allocation percent", "work_allocation.new_insights", `
work_allocation:
  new_insights: 130 # <-
  review_existing: -30
` + sim, "between 0 and 100"},

		{"threads", "explorer.max_active_threads", `
explorer:
  max_active_threads: 0 # <-
` + sim, ""},
		{"panel zero", "explorer.review_panel_size", `
explorer:
  review_panel_size: 0 # <-
` + sim, "at least 1"},
		{"panel larger than backends", "explorer.review_panel_size", `
explorer:
  review_panel_size: 4 # <-
` + three, "is 4 but only 3 backend(s) are enabled (a, b, c)"},
		{"panel counts enabled backends only", "explorer.review_panel_size", `
explorer:
  review_panel_size: 2 # <-
backends:
  a: {type: sim, hourly_limit: 50}
  b: {type: sim, hourly_limit: 50, enabled: false}
`, "only 1 backend(s) are enabled"},
		{"min bless above panel", "explorer.consensus.min_bless", `
explorer:
  review_panel_size: 2
  consensus:
    min_bless: 3 # <-
` + three, "only 2 reviewers"},
		{"min bless zero", "explorer.consensus.min_bless", `
explorer:
  consensus: {min_bless: 0} # <-
` + three, ""},
		{"max reject", "explorer.consensus.max_reject", `
explorer:
  consensus:
    max_reject: -1 # <-
` + three, ""},
		{"insight min chars", "explorer.insight_min_chars", `
explorer:
  insight_min_chars: 0 # <-
` + sim, ""},
		{"insight max chars", "explorer.insight_max_chars", `
explorer:
  insight_min_chars: 100
  insight_max_chars: 50 # <-
` + sim, ""},
		{"documenter title", "documenter.title", `
documenter:
  title: "" # <-
` + sim, "empty"},
		{"log level", "logging.level", `
logging:
  level: verbose # <-
` + sim, "trace, debug, info, warn, error"},
		{"console", "logging.console", `
logging:
  console: color # <-
` + sim, "auto, pretty, json"},
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		require.False(t, seen[tc.name], "duplicate case name %q", tc.name)
		seen[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			fe := requireFieldError(t, tc.doc, tc.path)
			if tc.msg != "" {
				assert.Contains(t, fe.Msg, tc.msg)
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	doc := `
data_dir: ""
llm:
  hourly_reset_minute: 99
  daily_reset_hour: 30
work_allocation: {new_insights: 10, review_existing: 10}
backends:
  a: {type: sim, hourly_limit: -1}
  b: {type: ftp, hourly_limit: 50}
`
	_, err := Parse([]byte(doc), "many.yaml")
	var errs Errors
	require.ErrorAs(t, err, &errs)
	paths := map[string]int{}
	for _, e := range errs {
		paths[e.Path] = e.Line
	}
	assert.Equal(t, map[string]int{
		"data_dir":                2,
		"llm.hourly_reset_minute": 4,
		"llm.daily_reset_hour":    5,
		"work_allocation":         6,
		"backends.a.hourly_limit": 8,
		"backends.b.type":         9,
	}, paths)
	assert.Len(t, strings.Split(err.Error(), "\n"), len(errs), "one problem per line")
	var fe *FieldError
	require.ErrorAs(t, err, &fe, "errors.As reaches the FieldErrors")
}

func TestSecretInAPIKeyEnvIsRejectedAndNotShown(t *testing.T) {
	secrets := []string{
		"sk-or-v1-0123456789abcdef0123456789abcdef",
		"SK-PROJ0123456789",
		"AKIA_" + strings.Repeat("X", 70), // looks like a name but is far too long
		"ghp_abcdefABCDEF0123456789",
	}
	for _, secret := range secrets {
		doc := `
backends:
  a:
    type: api
    hourly_limit: 50
    api:
      base_url: https://openrouter.ai/api/v1
      model: m
      api_key_env: "` + secret + `" # <-
`
		fe := requireFieldError(t, doc, "backends.a.api.api_key_env")
		assert.NotContains(t, fe.Error(), secret)
		_, err := Parse([]byte(doc), "t.yaml")
		assert.NotContains(t, err.Error(), secret)
		assert.NotContains(t, err.Error(), secret[:8], "not even a prefix of the value")
	}
	// A real name passes.
	_, err := Parse([]byte(`
backends:
  a:
    type: api
    hourly_limit: 50
    api: {base_url: "https://openrouter.ai/api/v1", model: m, api_key_env: OPENROUTER_API_KEY}
`), "t.yaml")
	require.NoError(t, err)
}

func TestValidateOnConfigBuiltInCode(t *testing.T) {
	c := New()
	require.Error(t, c.Validate(), "no backends")

	c.Backends["sim1"] = NewBackend(TypeSim)
	c.Backends["sim1"].Sim.Style = "api"
	c.Backends["sim2"] = NewBackend(TypeSim)
	c.Backends["sim2"].Sim.Style = "claude"
	c.Backends["sim3"] = NewBackend(TypeSim)
	c.Backends["sim3"].Sim.Style = "gemini"
	require.NoError(t, c.Validate())

	c.Backends["sim2"].HourlyLimit = 0
	err := c.Validate()
	var errs Errors
	require.ErrorAs(t, err, &errs)
	require.Len(t, errs, 1)
	assert.Equal(t, &FieldError{Path: "backends.sim2.hourly_limit", Msg: "must be greater than 0 (is 0)"}, errs[0])
	assert.Equal(t, "backends.sim2.hourly_limit: must be greater than 0 (is 0)", err.Error())

	// A sub-block that does not match the type, and a missing one.
	c.Backends["sim2"].HourlyLimit = 50
	c.Backends["sim2"].API = &APIOptions{}
	c.Backends["sim3"].Sim = nil
	err = c.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `backends.sim2.api: a backend of type sim may only have the "sim" block`)
	assert.Contains(t, err.Error(), `backends.sim3.sim: missing`)
}

func TestFieldErrorFormat(t *testing.T) {
	assert.Equal(t, "f.yaml:3: a.b: bad", (&FieldError{File: "f.yaml", Line: 3, Path: "a.b", Msg: "bad"}).Error())
	assert.Equal(t, "f.yaml: a.b: bad", (&FieldError{File: "f.yaml", Path: "a.b", Msg: "bad"}).Error())
	assert.Equal(t, "line 3: bad", (&FieldError{Line: 3, Msg: "bad"}).Error())
	assert.Equal(t, "bad", (&FieldError{Msg: "bad"}).Error())
	es := Errors{{Path: "x", Msg: "one"}, {Path: "y", Msg: "two"}}
	assert.Equal(t, "x: one\ny: two", es.Error())
}
