package control

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/config"
)

func TestResolveToken(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	dir := t.TempDir()
	ctl := config.Control{TokenEnv: "FANO_PANEL_TOKEN"}

	tok, src, err := ResolveToken(ctl, dir, getenv, false)
	require.NoError(t, err)
	assert.Equal(t, TokenNotConfigured, src, "read-only: no file, nothing made")
	assert.Empty(t, tok)
	assert.NoFileExists(t, filepath.Join(dir, TokenFile))

	gen, src, err := ResolveToken(ctl, dir, getenv, true)
	require.NoError(t, err)
	assert.Equal(t, TokenGenerated, src)
	assert.GreaterOrEqual(t, len(gen), 40)
	fi, err := os.Stat(filepath.Join(dir, TokenFile))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	again, src, err := ResolveToken(ctl, dir, getenv, true)
	require.NoError(t, err)
	assert.Equal(t, TokenFromFile, src)
	assert.Equal(t, gen, again, "the token survives restarts")

	env["FANO_PANEL_TOKEN"] = "from-the-environment-123"
	tok, src, err = ResolveToken(ctl, dir, getenv, true)
	require.NoError(t, err)
	assert.Equal(t, TokenFromEnv, src)
	assert.Equal(t, "from-the-environment-123", tok)

	ctl.Token = "from-the-config-file-1"
	tok, src, err = ResolveToken(ctl, dir, getenv, true)
	require.NoError(t, err)
	assert.Equal(t, TokenFromConfig, src)
	assert.Equal(t, "from-the-config-file-1", tok)

	_, _, err = ResolveToken(config.Control{Token: "short"}, dir, getenv, true)
	assert.ErrorContains(t, err, "control.token")
	env["FANO_PANEL_TOKEN"] = "tiny"
	_, _, err = ResolveToken(config.Control{TokenEnv: "FANO_PANEL_TOKEN"}, dir, getenv, true)
	assert.ErrorContains(t, err, "$FANO_PANEL_TOKEN")
	assert.NotContains(t, err.Error(), "tiny", "no secret in an error")
}

func TestTokenFileChecks(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, TokenFile)
	require.NoError(t, os.WriteFile(path, []byte("a-long-enough-token-1234\n"), 0o644))
	_, _, err := ResolveToken(config.Control{}, dir, nil, true)
	assert.ErrorContains(t, err, path)
	assert.ErrorContains(t, err, "chmod 600")
	assert.NotContains(t, err.Error(), "a-long-enough-token-1234")

	require.NoError(t, os.Chmod(path, 0o600))
	tok, src, err := ResolveToken(config.Control{}, dir, nil, true)
	require.NoError(t, err)
	assert.Equal(t, TokenFromFile, src)
	assert.Equal(t, "a-long-enough-token-1234", tok)

	require.NoError(t, os.WriteFile(path, []byte("short\n"), 0o600))
	_, _, err = ResolveToken(config.Control{}, dir, nil, true)
	assert.ErrorContains(t, err, "at least 16")
}

func TestBaseURL(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:8765": "http://127.0.0.1:8765",
		":8765":          "http://127.0.0.1:8765",
		"0.0.0.0:9000":   "http://127.0.0.1:9000",
		"[::]:9000":      "http://[::1]:9000",
		"localhost:80":   "http://localhost:80",
	} {
		got, err := BaseURL(addr)
		require.NoError(t, err, addr)
		assert.Equal(t, want, got, addr)
	}
	_, err := BaseURL("nonsense")
	assert.ErrorContains(t, err, `"nonsense"`)
}
