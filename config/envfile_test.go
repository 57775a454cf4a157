package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoadEnvFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keys.env")
	t.Setenv("FANO_ENVFILE_A", "")
	t.Setenv("FANO_ENVFILE_B", "")
	require.NoError(t, os.WriteFile(path, []byte("# keys\nFANO_ENVFILE_A=sk-one\nexport FANO_ENVFILE_B=\"sk two\"\n\n"), 0o600))
	names, err := LoadEnvFile(path)
	require.NoError(t, err)
	assert.Equal(t, []string{"FANO_ENVFILE_A", "FANO_ENVFILE_B"}, names)
	assert.Equal(t, "sk-one", os.Getenv("FANO_ENVFILE_A"))
	assert.Equal(t, "sk two", os.Getenv("FANO_ENVFILE_B"))

	require.NoError(t, os.WriteFile(path, []byte("FANO_ENVFILE_A=changed\nsk-secret-value\n"), 0o600))
	_, err = LoadEnvFile(path)
	require.ErrorContains(t, err, path+":2")
	assert.NotContains(t, err.Error(), "sk-secret-value")
	assert.Equal(t, "sk-one", os.Getenv("FANO_ENVFILE_A"), "a bad file changes nothing")
}

func TestUnsetKeyVariables(t *testing.T) {
	c := Default()
	c.Backends["router"] = &Backend{Type: TypeAPI, Enabled: true, API: &APIOptions{APIKeyEnv: "FANO_TEST_ROUTER_KEY"}}
	t.Setenv("FANO_TEST_ROUTER_KEY", "")
	assert.Equal(t, []string{"backends.router.api.api_key_env: environment variable FANO_TEST_ROUTER_KEY is unset or empty"}, c.UnsetKeyVariables())
	t.Setenv("FANO_TEST_ROUTER_KEY", "sk-x")
	assert.Empty(t, c.UnsetKeyVariables())
}
