package main

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
