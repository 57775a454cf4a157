package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/control"
)

// `fano config validate` says a key variable is unset (fano would run
// with that backend parked), naming the field and the variable.
func TestConfigValidateReportsUnsetKeyVariable(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, fmt.Sprintf(`
data_dir: %s
backends:
  router: {type: api, hourly_limit: 100, api: {base_url: "http://127.0.0.1:1/v1", model: m, api_key_env: FANO_TEST_VALIDATE_KEY}}
explorer: {enabled: false}
documenter: {enabled: false}
researcher: {enabled: false}
`, filepath.Join(dir, "data")))
	t.Setenv("FANO_TEST_VALIDATE_KEY", "")
	code, out, errOut := cli("config", "validate", "--config", cfg)
	assert.Equal(t, 1, code, out)
	assert.Contains(t, errOut, "backends.router.api.api_key_env")
	assert.Contains(t, errOut, "FANO_TEST_VALIDATE_KEY is unset")

	t.Setenv("FANO_TEST_VALIDATE_KEY", "sk-valid-1234")
	code, out, errOut = cli("config", "validate", "--config", cfg)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "ok")
	assert.NotContains(t, out+errOut, "sk-valid-1234")
}

// `fano retry` needs ids or --failed, not both.
func TestRetryArguments(t *testing.T) {
	code, _, errOut := cli("retry")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "--failed")
	code, _, errOut = cli("retry", "probe/x", "--failed")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "not both")
}

// A wrong key costs no work: the API backend is parked in the credentials
// state (one alert naming it and the variable), its tasks wait, and a
// batch run whose work all waits on that key ends by itself: one line
// naming the backend and what to do, exit code 3, nothing failed. Once
// the key is fixed in llm.env_file the next run finishes the work.
func TestWrongKeyEndsTheBatchRunThenTheNextRunFinishes(t *testing.T) {
	const goodKey = "sk-e2e-good-key-0123"
	var served, refused atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer "+goodKey {
			refused.Add(1)
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":{"message":"invalid api key"}}`)
			return
		}
		served.Add(1)
		_, _ = io.WriteString(w, `{"choices":[{"message":{"content":"The Fano plane has seven points."}}]}`)
	}))
	defer srv.Close()
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	envFile := filepath.Join(dir, "keys.env")
	require.NoError(t, os.WriteFile(envFile, []byte("FANO_E2E_KEY=sk-e2e-wrong-key-999\n"), 0o600))
	t.Setenv("FANO_E2E_KEY", "")
	cfg := writeConfig(t, dir, fmt.Sprintf(`
llm: {env_file: %s}
backends:
  router: {type: api, hourly_limit: 1000, api: {base_url: "%s/v1", model: m, api_key_env: FANO_E2E_KEY, initial_rpm: 6000}}
explorer: {enabled: false}
documenter: {enabled: false}
researcher: {enabled: false}
control: {enabled: false}
logging: {level: debug, console: json}
`, envFile, srv.URL))
	logPath := filepath.Join(dataDir, "logs", "fano.log")

	out, errOut, err := runQuick(t, "run", "--config", cfg, "--data-dir", dataDir, "--until-idle")
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "stdout:\n%s\nstderr:\n%s", out, errOut)
	assert.Equal(t, ExitWaitingOnPerson, exit.ExitCode())
	assert.Contains(t, out, "router waits on a person (credentials): fix the API key of router")
	assert.Equal(t, 1, strings.Count(out, "waits on a person"), "one line per blocked backend")
	assert.Contains(t, errOut, "the next run continues")
	assert.Positive(t, refused.Load())
	assert.Zero(t, served.Load())
	code, tasks, tasksErr := cli("tasks", "--json", "--config", cfg, "--data-dir", dataDir)
	require.Equal(t, 0, code, tasksErr)
	assert.NotContains(t, tasks, "FAILED", "nothing lost")
	assert.NotContains(t, tasks, "COMPLETED")

	require.NoError(t, os.WriteFile(envFile, []byte("FANO_E2E_KEY="+goodKey+"\n"), 0o600))
	out, errOut, err = runQuick(t, "run", "--config", cfg, "--data-dir", dataDir, "--until-idle")
	require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", out, errOut)
	assert.Contains(t, out, "no work left")
	assert.Positive(t, served.Load())
	log, err := os.ReadFile(logPath)
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(string(log), `"event":"actors.allocator.backend_credentials"`), "one alert")
	assert.Contains(t, string(log), "FANO_E2E_KEY")
	assert.NotContains(t, string(log), goodKey)
	assert.NotContains(t, string(log), "sk-e2e-wrong-key-999")
	assert.NotContains(t, string(log), `"event":"actors.task.failed"`)
	code, tasks, tasksErr = cli("tasks", "--json", "--config", cfg, "--data-dir", dataDir)
	require.Equal(t, 0, code, tasksErr)
	assert.NotContains(t, tasks, "FAILED")
	assert.Contains(t, tasks, "COMPLETED")
}

// `fano status` says what fano knows of each backend: its state with the
// reason and until-time, the estimate, the learned rate and the queue.
func TestLiveStatusBackendLines(t *testing.T) {
	until := time.Date(2026, 1, 5, 19, 29, 0, 0, time.Local)
	st := control.Status{Backends: []control.BackendView{
		{Name: "chatgpt", State: "capped", Reason: "usage cap", Until: &until, HourlyUsed: 20, HourlyLimit: 100, Usable: 18, LimitEstimate: 20},
		{Name: "router", State: "ready", HourlyUsed: 5, HourlyLimit: 1000, Usable: 900, LimitEstimate: 1000,
			LearnedLimit: 60, LearnedWindow: "1m0s", LimiterWaiting: 7},
		{Name: "claude", State: "credentials", Reason: "environment variable CLAUDE_KEY is unset", Class: "person",
			Action: "fix the API key of claude, then: fano backend resume claude"},
	}}
	var out strings.Builder
	require.NoError(t, printLiveStatus(&out, st))
	text := out.String()
	assert.Regexp(t, `chatgpt\s+capped until 2026-01-05 19:29:00\S* \(usage cap\)\s+20/100 \(usable 18\)\s+20\s+-\s+0`, text)
	assert.Regexp(t, `router\s+ready\s+5/1000 \(usable 900\)\s+1000\s+60/1m0s\s+7`, text)
	assert.Regexp(t, `claude\s+credentials \(environment variable CLAUDE_KEY is unset\)`, text)
	assert.Contains(t, text, "claude waits on a person (credentials): fix the API key of claude, then: fano backend resume claude")
	assert.Equal(t, 1, strings.Count(text, "waits on a person"), "only the backend a person must act for")
}
