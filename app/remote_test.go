//go:build !race

// Left out under the race detector: it runs a gateway host and the
// orchestrator's hub in one process, and protoactor-go's Remote.Start
// sets gRPC's process-wide logger each time (a race inside the library
// between two remotes of one process; fano runs one a process).
// cmd/fano's TestRemoteCommands runs the same with real processes.

package app

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/config"
	"fano/gateway"
	"fano/gateway/sim"
	"fano/remote"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// A backend with host: desk runs on the gateway host: a run until idle
// completes its work there, every request carrying its WAL intent, each
// intent asked of the backend once.
func TestRunWithBackendOnGatewayHost(t *testing.T) {
	hubAddr := freeAddr(t)
	orch, err := config.Parse([]byte(fmt.Sprintf(`
hosts: {desk: {}}
remote: {listen: %q, plaintext_loopback: true}
backends:
  alpha: {type: sim, hourly_limit: 1000, host: desk, sim: {seed: 1, latency_ms: 2}}
explorer: {enabled: false}
documenter: {enabled: false}
researcher: {enabled: false}
logging: {level: info, console: json}
`, hubAddr)), "orchestrator config")
	require.NoError(t, err)
	hostCfg, err := config.Parse([]byte(fmt.Sprintf(`
gateway: {name: desk, listen: 127.0.0.1:0, orchestrator: %q, plaintext_loopback: true}
backends:
  alpha: {type: sim, hourly_limit: 1000, sim: {seed: 1, latency_ms: 2}}
`, hubAddr)), "host config")
	require.NoError(t, err)

	var requests, withoutIntent atomic.Int64
	seen := map[uint64]int{}
	repeats := make(chan uint64, 1024)
	gw, err := StartGateway(GatewayOptions{Config: hostCfg, DataDir: t.TempDir(), Logger: zerolog.Nop(), Version: remote.Version(),
		NewBackend: func(name string, b *config.Backend) (gateway.Backend, error) {
			s := sim.New(sim.Config{Name: name, Seed: 1, Latency: 2 * time.Millisecond}, clockwork.NewRealClock())
			s.Inject(func(_ context.Context, req gateway.Request) error {
				requests.Add(1)
				if req.IntentSeq == 0 {
					withoutIntent.Add(1)
				}
				seen[req.IntentSeq]++ // one request at a time: max_concurrency 1
				if seen[req.IntentSeq] > 1 {
					repeats <- req.IntentSeq
				}
				return nil
			})
			return s, nil
		}})
	require.NoError(t, err)
	defer gw.Close()

	m := NewMain(Options{Config: orch, DataDir: filepath.Join(t.TempDir(), "data"), UntilIdle: true, NoPanel: true, Console: "off",
		HaltLimit: 30 * time.Second})
	require.NoError(t, m.Open(context.Background()))
	require.NotNil(t, m.Hub())
	require.NoError(t, m.Run(context.Background()))
	hosts := m.Hub().Status()
	panelView := panelHosts(m.Hub()).Hosts()
	require.NoError(t, m.Close())

	res := m.Result()
	assert.Equal(t, "idle", res.Reason)
	assert.Positive(t, res.Completed)
	assert.Positive(t, requests.Load())
	assert.Zero(t, withoutIntent.Load(), "a request reached the host without its intent")
	assert.Empty(t, repeats, "an intent was asked of the backend twice")
	require.Len(t, hosts, 1)
	assert.Equal(t, remote.HostConnected, hosts[0].State)
	assert.Equal(t, []string{"alpha"}, hosts[0].Backends)
	// The panel lists the host as the hub knows it.
	require.Len(t, panelView, 1)
	pv := panelView[0]
	assert.Equal(t, "desk", pv.Name)
	assert.Equal(t, "connected", pv.State)
	assert.Equal(t, []string{"alpha"}, pv.Backends)
	assert.Equal(t, remote.Version(), pv.Version)
	assert.NotEmpty(t, pv.Address)
	assert.False(t, pv.LastHeard.IsZero(), "the host was heard")
	assert.False(t, pv.Since.IsZero(), "connected since its hello")
	assert.Nil(t, panelHosts(nil), "no hub, no host source (not a typed nil)")
}
