package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func freeLoopbackPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// The two-machine example on one machine, with real subprocesses: init,
// enroll, a host serving over mTLS, a run whose backend is on the host,
// status on both sides; and a host whose certificate names a host the
// orchestrator does not know, refused with one line and a non-zero exit.
func TestRemoteCommands(t *testing.T) {
	dir := t.TempDir()
	hubAddr := freeLoopbackPort(t)
	orchDir := filepath.Join(dir, "orch")
	orch := filepath.Join(dir, "orch.yaml")
	require.NoError(t, os.WriteFile(orch, []byte(fmt.Sprintf(`
data_dir: %s
hosts: {desk: {}}
remote: {listen: %q}
backends:
  alpha: {type: sim, hourly_limit: 1000, host: desk, sim: {seed: 1, latency_ms: 2}}
explorer: {enabled: false}
documenter: {enabled: false}
researcher: {enabled: false}
control: {enabled: false}
`, orchDir, hubAddr)), 0o600))

	out, errOut, err := runFano(t, "remote", "init", "--config", orch)
	require.NoError(t, err, errOut)
	assert.Contains(t, out, "made a CA")
	_, errOut, err = runFano(t, "remote", "init", "--config", orch)
	require.Error(t, err, "a second init must not replace the CA")
	assert.Contains(t, errOut, "already holds a CA")

	bundle := filepath.Join(dir, "desk.bundle")
	_, errOut, err = runFano(t, "remote", "enroll", "desk", "--config", orch, "--orchestrator", hubAddr, "--out", bundle)
	require.NoError(t, err, errOut)
	fi, err := os.Stat(bundle)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	hostCfg := func(name, bundle string) string {
		p := filepath.Join(dir, name+".yaml")
		require.NoError(t, os.WriteFile(p, []byte(fmt.Sprintf(`
data_dir: %s
gateway: {bundle: %s, listen: 127.0.0.1:0}
backends:
  alpha: {type: sim, hourly_limit: 1000, sim: {seed: 1, latency_ms: 2}}
`, filepath.Join(dir, name), bundle)), 0o600))
		return p
	}
	host := hostCfg("host", bundle)
	serve := fanoCmd(t, "gateway", "serve", "--config", host)
	stdout, err := serve.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, serve.Start())
	t.Cleanup(func() { _ = serve.Process.Kill(); _ = serve.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	assert.Contains(t, line, "gateway host desk: serving alpha on 127.0.0.1:")

	out, errOut, err = runFano(t, "run", "--until-idle", "--config", orch)
	require.NoError(t, err, errOut)
	assert.Contains(t, out, "no work left")

	out, errOut, err = runFano(t, "status", "--json", "--config", orch)
	require.NoError(t, err, errOut)
	var st struct {
		Hosts []struct {
			Name     string   `json:"name"`
			Backends []string `json:"backends"`
			Address  string   `json:"address"`
		} `json:"hosts"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &st), out)
	require.Len(t, st.Hosts, 1)
	assert.Equal(t, "desk", st.Hosts[0].Name)
	assert.Equal(t, []string{"alpha"}, st.Hosts[0].Backends)
	assert.NotEmpty(t, st.Hosts[0].Address)

	out, errOut, err = runFano(t, "gateway", "status", "--config", host)
	require.NoError(t, err, errOut)
	assert.Contains(t, out, "gateway host desk:")
	assert.Contains(t, out, "orchestrator at "+hubAddr)

	// A certificate for a host the orchestrator's config does not list.
	other := filepath.Join(dir, "laptop.bundle")
	_, errOut, err = runFano(t, "remote", "enroll", "laptop", "--config", orch, "--orchestrator", hubAddr, "--out", other)
	require.NoError(t, err)
	assert.Contains(t, errOut, "not in hosts of the config")
	run := fanoCmd(t, "run", "--config", orch)
	require.NoError(t, run.Start())
	t.Cleanup(func() { _ = run.Process.Kill(); _ = run.Wait() })
	waitForListener(t, hubAddr)
	_, errOut, err = runFano(t, "gateway", "serve", "--config", hostCfg("laptop", other))
	require.Error(t, err)
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	assert.Contains(t, lines[len(lines)-1], "refused this host's certificate")
}

// waitForListener waits until something accepts connections on addr.
func waitForListener(t *testing.T, addr string) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("nothing listens on %s", addr)
		}
	}
}
