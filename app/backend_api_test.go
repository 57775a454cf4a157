package app

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/config"
	"fano/gateway"
	"fano/gateway/api"
	"fano/gateway/breaker"
)

func apiConfig(t *testing.T, url, keyEnv string, names ...string) *config.Config {
	t.Helper()
	cfg := config.New()
	for _, n := range names {
		b := config.NewBackend(config.TypeAPI)
		b.API.BaseURL, b.API.Model, b.API.APIKeyEnv = url, "vendor/model-x", keyEnv
		cfg.Backends[n] = b
	}
	return cfg
}

// An unset key does not stop fano: the backend is built in the
// credentials state, naming the backend and the variable, and `fano config
// validate` reports the variable.
func TestAPIBackendMissingKeyParksBackendNamingVariable(t *testing.T) {
	t.Setenv("FANO_TEST_ROUTER_KEY", "")
	cfg := apiConfig(t, "http://127.0.0.1:1/v1", "FANO_TEST_ROUTER_KEY", "router")
	gws, _, err := buildBackends(cfg, &backendEnv{Cfg: cfg, Clock: clockwork.NewFakeClock(), Logger: zerolog.Nop()})
	require.NoError(t, err)
	c := gws[0].(gateway.Conditioner).Condition()
	assert.Equal(t, gateway.StateCredentials, c.State)
	assert.Contains(t, c.Reason, "router")
	assert.Contains(t, c.Reason, "FANO_TEST_ROUTER_KEY")
	_, err = gws[0].Send(context.Background(), gateway.Request{TaskID: "t1", Prompt: "hi"})
	assert.Equal(t, "credentials", gateway.Kind(err))

	unset := cfg.UnsetKeyVariables()
	require.Len(t, unset, 1)
	assert.Contains(t, unset[0], "backends.router.api.api_key_env")
}

func TestAPIBackendIsBuiltWrappedAndSharesItsModelLimiter(t *testing.T) {
	const key = "sk-test-cmd-0123456789"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+key {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"choices":[{"message":{"content":"hello"}}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`)
	}))
	defer srv.Close()
	t.Setenv("FANO_TEST_ROUTER_KEY", key)
	cfg := apiConfig(t, srv.URL+"/v1", "FANO_TEST_ROUTER_KEY", "router-a", "router-b")
	env := &backendEnv{Cfg: cfg, Logger: zerolog.Nop()}
	gws, _, err := buildBackends(cfg, env)
	require.NoError(t, err)
	require.Len(t, gws, 2)

	br, ok := gws[0].(*breaker.Backend)
	require.True(t, ok, "the API backend is guarded by a circuit breaker")
	assert.Equal(t, "router-a", br.Name())
	assert.Equal(t, breaker.Closed, br.State())
	assert.Same(t, br, wrapBreaker(br, env), "wrapping is idempotent")

	resp, err := gws[0].Send(context.Background(), gateway.Request{TaskID: "t1", Prompt: "hi"})
	require.NoError(t, err)
	assert.Equal(t, "hello", resp.Content)

	a := br.Unwrap().(*api.Backend)
	b := gws[1].(*breaker.Backend).Unwrap().(*api.Backend)
	assert.Same(t, a.Limiter(), b.Limiter(), "same model, same budget")
	assert.EqualValues(t, 3, a.Stats().PromptTokens)
}
