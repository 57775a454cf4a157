package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/config"
)

// `fano config validate FILE` takes the path as users type it; --config
// still works, and the two naming different files is refused.
func TestConfigValidateTakesAPath(t *testing.T) {
	dir := t.TempDir()
	good := writeConfig(t, dir, "backends:\n  a: {type: sim, hourly_limit: 5}\n")
	code, out, errOut := cli("config", "validate", good)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, good+": ok")

	code, out, errOut = cli("config", "validate", "--config", good)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, good+": ok")

	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("backends:\n  a: {type: sim, hourly_limit: 0}\n"), 0o644))
	code, _, errOut = cli("config", "validate", bad)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, bad+":2: backends.a.hourly_limit: must be greater than 0")

	code, _, errOut = cli("config", "validate", bad, "--config", good)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "two config files")
}

// `fano config migrate` prints the spec's §11 file in fano's layout and
// names each key it converted or dropped; --write replaces the file and
// keeps the old one as .bak, after which the file validates.
func TestConfigMigrateSpecFile(t *testing.T) {
	spec, err := os.ReadFile(filepath.Join("..", "..", "config", "testdata", "spec11.yaml"))
	require.NoError(t, err)
	dir := t.TempDir()
	path := filepath.Join(dir, "spec.yaml")
	require.NoError(t, os.WriteFile(path, spec, 0o600))

	code, _, errOut := cli("config", "validate", path)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "fano config migrate")

	code, out, errOut := cli("config", "migrate", path)
	require.Equal(t, 0, code, errOut)
	_, err = config.Parse([]byte(out), "printed")
	require.NoError(t, err, "the printed config loads")
	for _, want := range []string{
		"dropped orchestrator.state.checkpoint_dir", "dropped orchestrator.state.wal_dir",
		"llm.quotas.gemini -> backends.gemini", "llm.quotas.gemini.deep_mode_daily_limit -> backends.gemini.deep_mode_daily_limit",
	} {
		assert.Contains(t, errOut, want)
	}
	assert.Contains(t, errOut, path+":")
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, spec, after, "without --write the file is untouched")

	code, _, errOut = cli("config", "migrate", "--write", path)
	require.Equal(t, 0, code, errOut)
	bak, err := os.ReadFile(path + ".bak")
	require.NoError(t, err)
	assert.Equal(t, spec, bak)
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	code, out, errOut = cli("config", "validate", path)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "3 backends enabled")

	code, _, errOut = cli("config", "migrate", path)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "nothing to migrate")
}

// Bad input: one error naming file:line and the field, exit 1, the file
// untouched.
func TestConfigMigrateBadInput(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	doc := "llm:\n  quotas:\n    chatgpt:\n      hourly_limt: 50\n"
	require.NoError(t, os.WriteFile(path, []byte(doc), 0o644))
	code, out, errOut := cli("config", "migrate", "--write", path)
	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, errOut)
	assert.Contains(t, errOut, path+":4: llm.quotas.chatgpt.hourly_limt: unknown quota field")
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, doc, string(after))
	assert.NoFileExists(t, path+".bak")
}
