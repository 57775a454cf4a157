//go:build !race

package remote

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/gateway"
)

// enrolled makes a CA in a fresh data directory and a bundle per host.
func enrolled(t testing.TB, hosts ...string) (dataDir string, bundles map[string]*Identity) {
	t.Helper()
	dataDir = t.TempDir()
	require.NoError(t, Init(dataDir, time.Now()))
	bundles = map[string]*Identity{}
	for _, h := range hosts {
		data, err := Enroll(dataDir, h, "127.0.0.1:1", time.Now())
		require.NoError(t, err)
		path := filepath.Join(t.TempDir(), h+".bundle")
		require.NoError(t, WriteBundle(path, data))
		_, id, err := LoadBundle(path)
		require.NoError(t, err)
		bundles[h] = id
	}
	return dataDir, bundles
}

func tlsHub(t *testing.T, dataDir string) *watchedHub {
	t.Helper()
	id, err := OrchestratorIdentity(dataDir)
	require.NoError(t, err)
	return startTestHub(t, HubConfig{Transport: Transport{Identity: id}})
}

// init and enroll leave keys readable by their owner only, and a second
// init does not replace the CA.
func TestInitAndEnrollFiles(t *testing.T) {
	dataDir, _ := enrolled(t, "desk")
	for _, f := range []string{caKeyFile, orchKeyFile, issuedFile} {
		fi, err := os.Stat(filepath.Join(Dir(dataDir), f))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), f)
	}
	data, err := Enroll(dataDir, "desk", "server:7070", time.Now())
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "b")
	require.NoError(t, WriteBundle(path, data))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	b, _, err := LoadBundle(path)
	require.NoError(t, err)
	assert.Equal(t, "server:7070", b.Orchestrator)
	assert.Equal(t, "desk", b.Host)

	err = Init(dataDir, time.Now())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "already holds a CA")
	_, err = Enroll(dataDir, "fano-orchestrator", "x:1", time.Now())
	require.Error(t, err)
}

// Both sides present certificates of fano's CA and each accepts the
// other's name: a request goes through.
func TestMutualTLS(t *testing.T) {
	dataDir, ids := enrolled(t, "desk")
	hub := tlsHub(t, dataDir)
	s := newSim("s1")
	startTestHost(t, hostOpts{orchestrator: hub.Address(), identity: ids["desk"], backends: []gateway.Backend{s}})
	hub.waitFor(t, "desk", HostConnected, 10*time.Second)
	_, err := hub.Backend("s1", "desk").Send(context.Background(), request(1, "p"))
	require.NoError(t, err)
	assert.Empty(t, hub.log.lines("refused"))
}

// A certificate of another CA, of a name the orchestrator does not know,
// or one replaced by a newer enrollment is refused: one line on the
// orchestrator, the start of the host fails with one line.
func TestWrongCertificatesRefused(t *testing.T) {
	_, foreign := enrolled(t, "desk")
	dataDir, ids := enrolled(t, "desk", "laptop")
	old := ids["desk"]
	_, again := func() (string, map[string]*Identity) {
		data, err := Enroll(dataDir, "desk", "x:1", time.Now())
		require.NoError(t, err)
		path := filepath.Join(t.TempDir(), "desk2")
		require.NoError(t, WriteBundle(path, data))
		_, id, err := LoadBundle(path)
		require.NoError(t, err)
		return "", map[string]*Identity{"desk": id}
	}()
	hub := tlsHub(t, dataDir)

	for _, c := range []struct {
		name    string
		id      *Identity
		hubLine string
		hostErr string
	}{
		{"another CA", foreign["desk"], "TLS handshake with 127.0.0.1 failed", "is not signed by this fano's CA"},
		{"unknown name", ids["laptop"], `laptop\": not a host in the orchestrator's config`, "refused this host's certificate"},
		{"replaced", old, "replaced by a newer one (revoked)", "refused this host's certificate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := StartHost(HostConfig{Name: "desk", Version: "v-test", Orchestrator: hub.Address(),
				Transport: Transport{Listen: "127.0.0.1:0", Identity: c.id}, Logger: (newLogBuffer()).logger()})
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.hostErr)
			assert.Len(t, hub.log.waitLines(t, c.hubLine, 1, 5*time.Second), 1, "one line on the orchestrator")
		})
	}

	// The newest certificate of desk is taken.
	h, _ := startTestHost(t, hostOpts{orchestrator: hub.Address(), identity: again["desk"], backends: []gateway.Backend{newSim("s1")}})
	_ = h
	hub.waitFor(t, "desk", HostConnected, 10*time.Second)
}

// A host refuses an orchestrator whose certificate names something else.
func TestHostRefusesImpostorOrchestrator(t *testing.T) {
	dataDir, ids := enrolled(t, "desk", "other")
	// A hub presenting a host's certificate, though signed by the CA.
	id, err := OrchestratorIdentity(dataDir)
	require.NoError(t, err)
	impostor := &Identity{Name: "other", Cert: ids["other"].Cert, CA: ids["other"].CA, Issued: id.Issued}
	hub := startTestHub(t, HubConfig{Transport: Transport{Identity: impostor}})
	_, err = StartHost(HostConfig{Name: "desk", Version: "v-test", Orchestrator: hub.Address(),
		Transport: Transport{Listen: "127.0.0.1:0", Identity: ids["desk"]}, Logger: (newLogBuffer()).logger()})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "this host refused the orchestrator")
	assert.Contains(t, err.Error(), `certificate name "other": a gateway host talks only to fano-orchestrator`)
}

// A host registers only under the name of its own certificate: laptop's
// certificate cannot say hello as desk.
func TestHelloBoundToCertificateName(t *testing.T) {
	dataDir, ids := enrolled(t, "desk", "laptop")
	id, err := OrchestratorIdentity(dataDir)
	require.NoError(t, err)
	hub := startTestHub(t, HubConfig{Transport: Transport{Identity: id},
		Routed: map[string][]string{"desk": {"s1"}, "laptop": {"s2"}}})
	startTestHost(t, hostOpts{name: "desk", orchestrator: hub.Address(), identity: ids["laptop"], backends: []gateway.Backend{newSim("s1")}})
	lines := hub.log.waitLines(t, "refused a hello as host desk over a link whose certificate names laptop", 1, 10*time.Second)
	assert.Len(t, lines, 1)
	for _, st := range hub.Status() {
		assert.Equal(t, HostNever, st.State, st.Name)
	}
}

// A revoke counts for the next connection of a running orchestrator.
func TestRevokeWithoutRestart(t *testing.T) {
	dataDir, ids := enrolled(t, "desk")
	hub := tlsHub(t, dataDir)
	h, _ := startTestHost(t, hostOpts{orchestrator: hub.Address(), identity: ids["desk"], backends: []gateway.Backend{newSim("s1")}})
	hub.waitFor(t, "desk", HostConnected, 10*time.Second)
	h.Close()
	require.NoError(t, Revoke(dataDir, "desk"))
	_, err := StartHost(HostConfig{Name: "desk", Version: "v-test", Orchestrator: hub.Address(),
		Transport: Transport{Listen: "127.0.0.1:0", Identity: ids["desk"]}, Logger: newLogBuffer().logger()})
	require.Error(t, err)
	assert.Len(t, hub.log.waitLines(t, "no certificate is issued to this host (revoked)", 1, 5*time.Second), 1)
}

// A host whose certificate is revoked while it runs says why in one
// line once its link is made again, and gateway status shows it.
func TestRevokedWhileRunningSaysSoOnTheHost(t *testing.T) {
	dataDir, ids := enrolled(t, "desk")
	addr := freePort(t)
	id, err := OrchestratorIdentity(dataDir)
	require.NoError(t, err)
	hub := startTestHub(t, HubConfig{Transport: Transport{Identity: id, Listen: addr}})
	hostLog := newLogBuffer()
	h, err := StartHost(HostConfig{Name: "desk", Version: "v-test", Orchestrator: addr, ProbeEvery: 200 * time.Millisecond,
		Transport: Transport{Listen: "127.0.0.1:0", Identity: ids["desk"]}, Backends: []gateway.Backend{newSim("s1")},
		Logger: hostLog.logger()})
	require.NoError(t, err)
	t.Cleanup(h.Close)
	hub.waitFor(t, "desk", HostConnected, 10*time.Second)

	require.NoError(t, Revoke(dataDir, "desk"))
	hub.Close() // the orchestrator restarts
	id, err = OrchestratorIdentity(dataDir)
	require.NoError(t, err)
	startTestHub(t, HubConfig{Transport: Transport{Identity: id, Listen: addr}})
	lines := hostLog.waitLines(t, "refused this host's certificate", 1, 20*time.Second)
	assert.Len(t, lines, 1)
	assert.Contains(t, h.Status().LinkError, "refused this host's certificate")
}
