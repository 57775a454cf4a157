package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUnknownFieldNamesFieldAndLine(t *testing.T) {
	doc := `
backends:
  chatgpt:
    type: sim
    hourly_limt: 50 # <-
`
	fe := requireFieldError(t, doc, "backends.chatgpt.hourly_limt")
	assert.Contains(t, fe.Msg, `unknown field "hourly_limt"`)
	assert.Contains(t, fe.Msg, "hourly_limit", "lists the known fields")

	fe = requireFieldError(t, `
orchestrator:
  schedular: {} # <-
`+sim, "orchestrator.schedular")
	assert.Contains(t, fe.Msg, "scheduler")

	requireFieldError(t, `
data_dir: x
verbose: true # <-
`+sim, "verbose")
}

func TestWrongTypeNamesFieldAndLine(t *testing.T) {
	fe := requireFieldError(t, `
backends:
  chatgpt:
    type: sim
    hourly_limit: fifty # <-
`, "backends.chatgpt.hourly_limit")
	assert.Equal(t, "must be an integer, not a string", fe.Msg)

	fe = requireFieldError(t, `
control:
  enabled: "maybe" # <-
`+sim, "control.enabled")
	assert.Contains(t, fe.Msg, "true or false")

	fe = requireFieldError(t, `
orchestrator:
  recovery:
    retry_backoff_seconds: 60 # <-
`+sim, "orchestrator.recovery.retry_backoff_seconds")
	assert.Contains(t, fe.Msg, "a list")

	fe = requireFieldError(t, `
orchestrator:
  recovery:
    retry_backoff_seconds: [60, soon] # <-
`+sim, "orchestrator.recovery.retry_backoff_seconds[1]")
	assert.Contains(t, fe.Msg, "an integer")

	fe = requireFieldError(t, `
explorer:
  consensus: 2 # <-
`+sim, "explorer.consensus")
	assert.Contains(t, fe.Msg, "a mapping")
}

func TestTypeErrorsDoNotEchoValues(t *testing.T) {
	_, err := Parse([]byte(`
backends:
  a:
    type: sim
    hourly_limit: sk-secretvalue
`), "t.yaml")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "sk-sec")
}

func TestDecodeErrorsAreAllReported(t *testing.T) {
	_, err := Parse([]byte(`
backends:
  a:
    type: sim
    hourly_limit: many
    colour: blue
`), "t.yaml")
	var errs Errors
	require.ErrorAs(t, err, &errs)
	require.Len(t, errs, 2)
	assert.Equal(t, "t.yaml:5: backends.a.hourly_limit: must be an integer, not a string", errs[0].Error())
	assert.Equal(t, 6, errs[1].Line)
	assert.Equal(t, "backends.a.colour", errs[1].Path)
}

func TestDuplicateKey(t *testing.T) {
	fe := requireFieldError(t, `
backends:
  a:
    type: sim
    hourly_limit: 50
    hourly_limit: 60 # <-
`, "backends.a.hourly_limit")
	assert.Contains(t, fe.Msg, "duplicate")
	assert.Contains(t, fe.Msg, "line 5")
}

func TestSyntaxErrorHasLine(t *testing.T) {
	_, err := Parse([]byte("backends:\n  a: {type: sim\n"), "bad.yaml")
	var errs Errors
	require.ErrorAs(t, err, &errs)
	require.Len(t, errs, 1)
	assert.Equal(t, "bad.yaml", errs[0].File)
	assert.Positive(t, errs[0].Line)
	assert.Contains(t, errs[0].Msg, "invalid YAML")
}

func TestNotAMappingAndExtraDocuments(t *testing.T) {
	_, err := Parse([]byte("just a string\n"), "t.yaml")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "t.yaml:1: the config must be a YAML mapping")

	_, err = Parse([]byte(sim+"---\ndata_dir: x\n"), "t.yaml")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "one YAML document")
}

func TestEmptyFileNeedsABackend(t *testing.T) {
	_, err := Parse(nil, "empty.yaml")
	require.Error(t, err)
	assert.Equal(t, "empty.yaml: backends: no backends configured; configure at least one (type browser, api or sim)", err.Error())
}

func TestDefaultsFilledForAlmostEmptyFile(t *testing.T) {
	c, err := Parse([]byte(`
backends:
  claude:
    type: sim
    hourly_limit: 40
    deep_mode_daily_limit: 7
orchestrator:
  scheduler:
    preemption_threshold: 0      # an explicit zero stays zero
  tasks:
    max_requests_per_task:
      exploration: 30            # overrides one default
      my_new_task: 7             # task types are open
`), "almost-empty.yaml")
	require.NoError(t, err)
	assert.Equal(t, "almost-empty.yaml", c.File())

	want := New()
	assert.Equal(t, want.DataDir, c.DataDir)
	assert.Equal(t, want.Orchestrator.State, c.Orchestrator.State)
	assert.Equal(t, 100, c.Orchestrator.Scheduler.TickIntervalMS)
	assert.Equal(t, 0, c.Orchestrator.Scheduler.PreemptionThreshold)
	assert.Equal(t, 500, c.Orchestrator.Scheduler.MaxPendingTasks)
	assert.Equal(t, 64, c.Orchestrator.Scheduler.MaxRunningTasks)
	assert.Equal(t, StarvationPrevention{MaxWaitHours: 4, PriorityBoostPerHour: 5, MaxBoost: 25}, c.Orchestrator.Scheduler.StarvationPrevention)
	assert.Equal(t, ModuleWeights{40, 40, 20}, c.Orchestrator.ModuleWeights)
	assert.Equal(t, want.Orchestrator.Recovery, c.Orchestrator.Recovery)
	assert.Equal(t, want.Orchestrator.Health, c.Orchestrator.Health)
	assert.Equal(t, want.LLM, c.LLM)
	assert.Equal(t, want.Control, c.Control)
	assert.Equal(t, want.Deduplication, c.Deduplication)
	assert.Equal(t, want.WorkAllocation, c.WorkAllocation)
	assert.Equal(t, want.Documenter, c.Documenter)
	assert.Equal(t, want.Researcher, c.Researcher)
	assert.Equal(t, want.Logging, c.Logging)
	assert.Equal(t, 10, c.LLM.QuotaBufferPercent)

	// Per-key merge of the task budgets.
	assert.Equal(t, 30, c.MaxRequests("exploration"))
	assert.Equal(t, 5, c.MaxRequests("critique"))
	assert.Equal(t, 15, c.MaxRequests("incorporate_insight"))
	assert.Equal(t, 7, c.MaxRequests("my_new_task"))
	assert.Equal(t, 10, c.MaxRequests("never_heard_of_it"))

	// The backend's own defaults.
	b, ok := c.Backend("claude")
	require.True(t, ok)
	assert.True(t, b.Enabled)
	assert.Equal(t, 1, b.MaxConcurrency)
	assert.Nil(t, b.Browser)
	assert.Nil(t, b.API)
	require.NotNil(t, b.Sim)
	assert.Equal(t, SimOptions{Seed: 1, Style: "claude", LatencyMS: 50, HourlyLimit: 40, DeepModeDailyLimit: 7}, *b.Sim)
	assert.Equal(t, []string{"claude"}, c.EnabledBackends())
	_, ok = c.Backend("chatgpt")
	assert.False(t, ok)

	// Settings that adapt to a single backend.
	assert.Equal(t, 1, c.Explorer.ReviewPanelSize)
	assert.Equal(t, 1, c.Explorer.Consensus.MinBless)
	assert.Equal(t, "claude", c.Orchestrator.Consultation.LLM)
	assert.Equal(t, 4, c.Explorer.MaxActiveThreads)
	assert.Equal(t, 20, c.Explorer.InsightMinChars)
	assert.Equal(t, 600, c.Explorer.InsightMaxChars)
}

func TestBackendDefaultsByType(t *testing.T) {
	c, err := Parse([]byte(`
backends:
  chatgpt:
    type: browser
    hourly_limit: 50
  router:
    type: api
    hourly_limit: 500
    api:
      base_url: https://openrouter.ai/api/v1
      model: some/model
      api_key_env: OPENROUTER_API_KEY
  mock:
    type: sim
    hourly_limit: 10
    enabled: false
    sim: {style: gemini}
  quiet:
    type: sim
    hourly_limit: 10
    sim:
`), "t.yaml")
	require.NoError(t, err)

	br := c.Backends["chatgpt"]
	assert.Equal(t, 1, br.MaxConcurrency)
	assert.Equal(t, BrowserOptions{Profile: "chatgpt", Headless: true, RecycleAfterRequests: 200, RecycleAfterHours: 12, TimeoutSeconds: 3600, RecycleAboveMB: 2048, PrimeTurns: 6}, *br.Browser)

	api := c.Backends["router"]
	assert.Equal(t, 4, api.MaxConcurrency)
	assert.Equal(t, APIOptions{BaseURL: "https://openrouter.ai/api/v1", Model: "some/model", APIKeyEnv: "OPENROUTER_API_KEY", TimeoutSeconds: 600, InitialRPM: 20}, *api.API)

	mock := c.Backends["mock"]
	assert.False(t, mock.Enabled, "an explicit enabled: false is kept")
	assert.Equal(t, "gemini", mock.Sim.Style)
	assert.Equal(t, int64(1), mock.Sim.Seed)

	quiet := c.Backends["quiet"]
	require.NotNil(t, quiet.Sim, "an empty sim: block gets the defaults")
	assert.Equal(t, "api", quiet.Sim.Style, "unknown names get the api style")

	assert.Equal(t, []string{"chatgpt", "quiet", "router"}, c.EnabledBackends())
	assert.Equal(t, 3, c.Explorer.ReviewPanelSize)
	assert.Equal(t, 2, c.Explorer.Consensus.MinBless)
	assert.Equal(t, "chatgpt", c.Orchestrator.Consultation.LLM)
}

func TestBackendSubBlockDefaultsKeepUnsetFields(t *testing.T) {
	c, err := Parse([]byte(`
backends:
  chatgpt:
    type: browser
    hourly_limit: 50
    browser:
      headless: false
      recycle_after_requests: 0   # never
`), "t.yaml")
	require.NoError(t, err)
	br := c.Backends["chatgpt"].Browser
	assert.False(t, br.Headless)
	assert.Equal(t, 0, br.RecycleAfterRequests)
	assert.Equal(t, 12, br.RecycleAfterHours)
	assert.Equal(t, 3600, br.TimeoutSeconds)
	assert.Equal(t, "chatgpt", br.Profile)
}

func TestExamplesLoad(t *testing.T) {
	for _, name := range []string{"examples/demo.yaml", "examples/full.yaml"} {
		t.Run(name, func(t *testing.T) {
			c, err := Load(name)
			require.NoError(t, err)
			require.NoError(t, c.Validate())
			assert.Equal(t, name, c.File())
		})
	}
}

func TestDemoConfig(t *testing.T) {
	c := Default()
	require.NoError(t, c.Validate())
	assert.Equal(t, DemoName, c.File())
	assert.Equal(t, []string{"chatgpt", "claude", "gemini", "openrouter-sim"}, c.EnabledBackends())
	for _, name := range c.EnabledBackends() {
		b, _ := c.Backend(name)
		assert.Equal(t, TypeSim, b.Type, name)
		assert.LessOrEqual(t, b.Sim.LatencyMS+b.Sim.LatencyJitterMS, 100, "%s: the demo must be fast", name)
	}
	limits := func(name string) [2]int {
		b, _ := c.Backend(name)
		return [2]int{b.HourlyLimit, b.DeepModeDailyLimit}
	}
	assert.Equal(t, [2]int{50, 100}, limits("chatgpt"))
	assert.Equal(t, [2]int{50, 20}, limits("gemini"))
	assert.Equal(t, [2]int{50, 100}, limits("claude"))
	assert.Equal(t, 800, limits("openrouter-sim")[0], "room for restarts within the hour")
	assert.Equal(t, "api", c.Backends["openrouter-sim"].Sim.Style)
	assert.Equal(t, 3, c.Explorer.ReviewPanelSize)

	// Each call returns a fresh copy.
	c.Backends["chatgpt"].HourlyLimit = 1
	assert.Equal(t, 50, Default().Backends["chatgpt"].HourlyLimit)
	assert.Equal(t, DemoYAML(), mustRead(t, "examples/demo.yaml"))
	assert.Equal(t, FullYAML(), mustRead(t, "examples/full.yaml"))
}

// TestFullExampleShowsEveryField: full.yaml must set every field of the
// schema, so it stays the complete reference.
func TestFullExampleShowsEveryField(t *testing.T) {
	c, err := Load("examples/full.yaml")
	require.NoError(t, err)
	for _, path := range []string{
		"data_dir", "site_profiles_file",
		"orchestrator.state.finished_task_retention_hours",
		"orchestrator.state.max_finished_tasks_in_memory",
		"orchestrator.state.memory_limit_mb",
		"orchestrator.scheduler.starvation_prevention.max_boost",
		"orchestrator.scheduler.max_running_tasks",
		"orchestrator.tasks.default_max_requests",
		"orchestrator.tasks.request_timeout_seconds",
		"orchestrator.recovery.stuck_action",
		"orchestrator.health.reconnect_after_seconds",
		"llm.quota_buffer_percent", "llm.rate_limit_recovery.step_percent",
		"control.allowed_origins", "control.token_env",
		"deduplication.borderline_low",
		"explorer.consensus.max_reject", "explorer.insight_max_chars",
		"researcher.sources_dir", "logging.console",
	} {
		assert.True(t, c.present(path), path)
	}
	// Every field of the backend blocks.
	for typ, at := range map[string]string{
		"config.Backend":        "backends.chatgpt",
		"config.BrowserOptions": "backends.chatgpt.browser",
		"config.APIOptions":     "backends.openrouter.api",
		"config.SimOptions":     "backends.sim-gemini.sim",
	} {
		fields := knownFields(typ)
		require.NotEmpty(t, fields, typ)
		for _, f := range fields {
			if typ == "config.Backend" && (f == "api" || f == "sim") {
				continue // only the block of its type
			}
			assert.True(t, c.present(at+"."+f), "%s.%s", at, f)
		}
	}
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	return b
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "fano.yaml")
	require.NoError(t, os.WriteFile(path, []byte("data_dir: /tmp/x\n"+sim), 0o600))
	c, err := Load(path)
	require.NoError(t, err)
	assert.Equal(t, "/tmp/x", c.DataDir)

	require.NoError(t, os.WriteFile(path, []byte(sim+"  b: {type: sim, hourly_limit: 0}\n"), 0o600))
	_, err = Load(path)
	require.Error(t, err)
	assert.Contains(t, err.Error(), path+":4: backends.b.hourly_limit: ")

	_, err = Load(filepath.Join(dir, "missing.yaml"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "missing.yaml")
	assert.True(t, errors.Is(err, os.ErrNotExist))
}

func TestCheckDataDir(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "a", "b")
	require.NoError(t, CheckDataDir(dir))
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.True(t, fi.IsDir())
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "the probe file is removed")

	require.NoError(t, CheckDataDir(dir), "an existing dir is fine")

	file := filepath.Join(base, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	err = CheckDataDir(file)
	require.Error(t, err)
	assert.Contains(t, err.Error(), file)
	assert.Contains(t, err.Error(), "not a directory")

	err = CheckDataDir(filepath.Join(file, "sub"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), filepath.Join(file, "sub"))

	require.Error(t, CheckDataDir(""))

	if os.Geteuid() != 0 { // root may write anywhere
		ro := filepath.Join(base, "ro")
		require.NoError(t, os.Mkdir(ro, 0o500))
		err = CheckDataDir(ro)
		require.Error(t, err)
		assert.Contains(t, err.Error(), ro)
		assert.True(t, strings.Contains(err.Error(), "not writable"))
	}
}
