package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A backend naming a host the config does not list is refused, naming
// the backend, its line and the hosts there are; listeners must be
// host:port, and plaintext only on loopback.
func TestHostValidation(t *testing.T) {
	for _, tc := range []struct {
		name, path, doc, msg string
	}{
		{"unknown host", "backends.a.host", `
hosts: {desk: {}}
backends:
  a:
    type: sim
    hourly_limit: 50
    host: laptop # <-
`, `unknown host "laptop"; hosts: desk`},
		{"no hosts at all", "backends.a.host", `
backends:
  a: {type: sim, hourly_limit: 50, host: desk} # <-
`, `unknown host "desk"; hosts: none configured`},
		{"bad host name", "hosts.fano-orchestrator", `
hosts:
  fano-orchestrator: {} # <-
` + sim, "host name"},
		{"listen not host:port", "remote.listen", `
hosts: {desk: {}}
remote:
  listen: "7070" # <-
` + sim, "host:port"},
		{"plaintext off loopback", "remote.listen", `
hosts: {desk: {}}
remote:
  listen: 0.0.0.0:7070 # <-
  plaintext_loopback: true
` + sim, "only loopback"},
		{"gateway plaintext off loopback", "gateway.orchestrator", `
gateway:
  orchestrator: 10.0.0.5:7070 # <-
  listen: 127.0.0.1:7071
  plaintext_loopback: true
` + sim, "only loopback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fe := requireFieldError(t, tc.doc, tc.path)
			assert.Contains(t, fe.Msg, tc.msg)
		})
	}

	c, err := Parse([]byte(`
hosts: {desk: {}}
remote: {listen: 127.0.0.1:7070, plaintext_loopback: true}
backends:
  a: {type: sim, hourly_limit: 50, host: desk}
  b: {type: sim, hourly_limit: 50}
`), "ok.yaml")
	require.NoError(t, err)
	assert.Equal(t, map[string][]string{"desk": {"a"}}, c.RemoteBackends())
}
