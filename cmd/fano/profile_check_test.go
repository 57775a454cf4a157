package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/gateway/browser/fakechat"
)

// `fano profile check <backend>` against the fake 2026 Gemini: every field
// listed, the controls walked, exit 0; in guest mode it names the login
// problem and exits non-zero. Real Chromium, real subprocess.
func TestProfileCheckCommand(t *testing.T) {
	site, err := fakechat.New("gemini-2026")
	require.NoError(t, err)
	defer site.Close()
	dir := t.TempDir()
	profiles := filepath.Join(dir, "sites.yaml")
	require.NoError(t, os.WriteFile(profiles, []byte("profiles:\n  gemini:\n    start_url: "+site.URL()+"/app\n"), 0o600))
	cfg := writeConfig(t, dir, "site_profiles_file: "+profiles+"\nbackends:\n  gemini:\n    type: browser\n")
	data := filepath.Join(dir, "data")

	out, stderr, err := runFano(t, "profile", "check", "gemini", "--config", cfg, "--data-dir", data)
	require.NoError(t, err, stderr+out)
	for _, want := range []string{"site profile gemini", "login", "selectors.prompt", "controls.deep_mode", "item found, state off", "controls.upload", "0 problem(s)"} {
		assert.Contains(t, out, want)
	}
	assert.Empty(t, site.Sent())

	site.SetControl(fakechat.Control{Shape2026: fakechat.Shape2026{Guest: true}})
	out, stderr, err = runFano(t, "profile", "check", "gemini", "--config", cfg, "--data-dir", data)
	require.Error(t, err)
	assert.Contains(t, out, "guest mode")
	assert.Contains(t, stderr, "1 problem(s)")

	_, stderr, err = runFano(t, "profile", "check", "nosuch", "--config", cfg, "--data-dir", data)
	require.Error(t, err)
	assert.Contains(t, stderr, `profile check: no backend "nosuch" in the config (browser backends: gemini)`)
	_, stderr, err = runFano(t, "login", "nosuch", "--config", cfg, "--data-dir", data)
	require.Error(t, err)
	assert.Contains(t, stderr, `login: no backend "nosuch" in the config (browser backends: gemini)`)
}
