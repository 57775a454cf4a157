package config

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testdata/spec11.yaml is the YAML block of seeds/001 §11.1, verbatim.
func spec11(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/spec11.yaml")
	require.NoError(t, err)
	return data
}

// lineOf is the 1-based line of the first line of data containing s.
func lineOf(t *testing.T, data []byte, s string) int {
	t.Helper()
	for i, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, s) {
			return i + 1
		}
	}
	t.Fatalf("%q not in the file", s)
	return 0
}

// Loaded as it is, the §11 file is refused for exactly its three keys fano
// has no place for, each on its own line, saying why and what converts it.
func TestSpec11FileNamesItsThreeKeys(t *testing.T) {
	data := spec11(t)
	_, err := Parse(data, "spec.yaml")
	require.Error(t, err)
	var errs Errors
	require.True(t, errors.As(err, &errs))
	got := map[string]*FieldError{}
	for _, fe := range errs {
		got[fe.Path] = fe
	}
	require.Len(t, got, 3, "%v", err)
	for path, key := range map[string]string{specCheckpointDir: "checkpoint_dir:", specWALDir: "wal_dir:", specQuotas: "quotas:"} {
		fe := got[path]
		require.NotNil(t, fe, "no error for %s in %v", path, err)
		assert.Equal(t, lineOf(t, data, key), fe.Line, path)
		assert.Contains(t, fe.Msg, "fano config migrate", path)
	}
	assert.Contains(t, got[specQuotas].Msg, "backends.NAME.hourly_limit")
	assert.Contains(t, got[specWALDir].Msg, "fano.db")
}

// Migrated, the §11 file loads, and every one of its settings lands where
// fano reads it.
func TestMigrateSpec11(t *testing.T) {
	data := spec11(t)
	m, err := Migrate(data, "spec.yaml")
	require.NoError(t, err)
	c := m.Config

	// llm.quotas -> three browser backends with those quotas.
	assert.Equal(t, []string{"chatgpt", "claude", "gemini"}, c.EnabledBackends())
	for name, deep := range map[string]int{"chatgpt": 100, "gemini": 20, "claude": 100} {
		b, ok := c.Backend(name)
		require.True(t, ok, name)
		assert.Equal(t, TypeBrowser, b.Type, name)
		assert.Equal(t, 50, b.HourlyLimit, name)
		assert.Equal(t, deep, b.DeepModeDailyLimit, name)
		assert.Equal(t, name, b.Browser.Profile, name)
	}
	o := c.Orchestrator
	assert.Equal(t, 60, o.State.CheckpointIntervalSeconds)
	assert.Equal(t, 100, o.State.WALCompactThresholdMB)
	assert.Equal(t, Scheduler{TickIntervalMS: 100, PreemptionThreshold: 20, MaxPendingTasks: 500,
		StarvationPrevention: StarvationPrevention{MaxWaitHours: 4, PriorityBoostPerHour: 5, MaxBoost: 25},
		MaxRunningTasks:      64}, o.Scheduler)
	assert.Equal(t, ModuleWeights{Explorer: 40, Documenter: 40, Researcher: 20}, o.ModuleWeights)
	assert.Equal(t, Consultation{Enabled: false, IntervalMinutes: 60, LLM: "chatgpt"}, o.Consultation)
	assert.Equal(t, DefaultMaxRequestsPerTask(), o.Tasks.MaxRequestsPerTask)
	assert.Equal(t, 50, o.Tasks.ConversationMessageLimit)
	assert.Equal(t, Recovery{StuckTaskTimeoutHours: 2, MaxTaskRetries: 3, RetryBackoffSeconds: []int{60, 300, 900}, StuckAction: StuckPause}, o.Recovery)
	assert.Equal(t, Health{CheckIntervalSeconds: 60, StuckThresholdHours: 2, MinDiskSpaceGB: 1, MaxQueueDepth: 100, ReconnectAfterSeconds: 30}, o.Health)
	assert.Equal(t, 0, c.LLM.HourlyResetMinute)
	assert.Equal(t, 0, c.LLM.DailyResetHour)
	assert.Equal(t, CircuitBreaker{FailureThreshold: 5, RecoveryTimeoutSeconds: 300, HalfOpenRequests: 3}, c.LLM.CircuitBreaker)
	assert.True(t, c.Deduplication.Enabled)
	assert.True(t, c.Deduplication.UseBatchLLM)
	assert.Equal(t, 20, c.Deduplication.BatchSize)

	// Each converted and each dropped key is named, with its old line.
	var lines []string
	for _, ch := range m.Changes {
		lines = append(lines, ch.String())
	}
	q := lineOf(t, data, "chatgpt:")
	assert.Equal(t, []Change{
		{Line: lineOf(t, data, "checkpoint_dir:"), From: specCheckpointDir, Why: whyNoStateDirs},
		{Line: lineOf(t, data, "wal_dir:"), From: specWALDir, Why: whyNoStateDirs},
		{Line: q, From: "llm.quotas.chatgpt", To: "backends.chatgpt", Why: m.Changes[2].Why},
	}, m.Changes[:3], strings.Join(lines, "\n"))
	assert.Contains(t, m.Changes[2].Why, "browser backend")
	assert.Contains(t, lines, "line "+strconv.Itoa(q+1)+": llm.quotas.chatgpt.hourly_limit -> backends.chatgpt.hourly_limit")
	assert.Len(t, m.Changes, 2+3*3)

	// The new file keeps the comments and no longer has the old keys; a
	// second migration changes nothing.
	out := string(m.YAML)
	assert.Contains(t, out, "# Module weights (adjusted by consultation)")
	for _, gone := range []string{"quotas:", "checkpoint_dir:", "wal_dir:"} {
		assert.NotContains(t, out, gone)
	}
	again, err := Migrate(m.YAML, "new.yaml")
	require.NoError(t, err)
	assert.Empty(t, again.Changes)
	_, err = Parse(m.YAML, "new.yaml")
	require.NoError(t, err)
}

// A backend the file defines keeps its own figures; the quota is named as
// dropped.
func TestMigrateKeepsExistingBackend(t *testing.T) {
	doc := `
llm:
  quotas:
    a:
      hourly_limit: 50
      deep_mode_daily_limit: 5
backends:
  a: {type: sim, hourly_limit: 10}
`
	m, err := Migrate([]byte(doc), "t.yaml")
	require.NoError(t, err)
	b, _ := m.Config.Backend("a")
	assert.Equal(t, TypeSim, b.Type)
	assert.Equal(t, 10, b.HourlyLimit)
	assert.Equal(t, 5, b.DeepModeDailyLimit)
	require.Len(t, m.Changes, 2)
	assert.Equal(t, Change{Line: 5, From: "llm.quotas.a.hourly_limit", Why: "backends.a.hourly_limit is already set (line 8) and kept"}, m.Changes[0])
	assert.Equal(t, Change{Line: 6, From: "llm.quotas.a.deep_mode_daily_limit", To: "backends.a.deep_mode_daily_limit"}, m.Changes[1])
	assert.NotContains(t, string(m.YAML), "llm:", "an llm block left empty is removed")
}

// Bad input: one error naming the old file's line and the field.
func TestMigrateBadInput(t *testing.T) {
	for _, tc := range []struct{ name, doc, path, msg string }{
		{"typo in a quota", `
llm:
  quotas:
    chatgpt:
      hourly_limt: 50 # <-
`, "llm.quotas.chatgpt.hourly_limt", `unknown quota field "hourly_limt"`},
		{"quota not a mapping", `
llm:
  quotas:
    chatgpt: 50 # <-
`, "llm.quotas.chatgpt", "must be a mapping"},
		{"converted value invalid", `
llm:
  quotas:
    chatgpt:
      hourly_limit: 0 # <-
`, "backends.chatgpt.hourly_limit", "greater than 0"},
		{"other problem keeps its line", `
orchestrator:
  state:
    wal_dir: x
  scheduler:
    tick_interval_ms: 0 # <-
backends:
  a: {type: sim, hourly_limit: 5}
`, "orchestrator.scheduler.tick_interval_ms", "greater than 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Migrate([]byte(tc.doc), "t.yaml")
			require.Error(t, err)
			var errs Errors
			require.True(t, errors.As(err, &errs), "%T %v", err, err)
			require.Len(t, errs, 1, "%v", err)
			assert.Equal(t, tc.path, errs[0].Path)
			assert.Equal(t, markedLine(t, tc.doc), errs[0].Line, "%v", err)
			assert.Contains(t, errs[0].Error(), "t.yaml:")
			assert.Contains(t, errs[0].Msg, tc.msg)
		})
	}
}

// Consultation is not supported: turning it on is refused saying so.
func TestConsultationEnabledIsRefused(t *testing.T) {
	fe := requireFieldError(t, `
orchestrator:
  consultation:
    enabled: true # <-
`+sim, "orchestrator.consultation.enabled")
	assert.Contains(t, fe.Msg, "not supported yet")
}

// A run is reported stuck at the health threshold and handled at the
// recovery timeout, so the timeout may not come first.
func TestStuckTimeoutNotBeforeThreshold(t *testing.T) {
	fe := requireFieldError(t, `
orchestrator:
  recovery:
    stuck_task_timeout_hours: 1 # <-
  health:
    stuck_threshold_hours: 3
`+sim, "orchestrator.recovery.stuck_task_timeout_hours")
	assert.Contains(t, fe.Msg, "stuck_threshold_hours")
}
