package remote

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/config"
	"fano/gateway"
)

// The test binary re-executed with these variables is a gateway host
// process holding three sim backends (s1, s2, s3).
const (
	envHostOrchestrator = "FANO_REMOTE_TEST_HOST_ORCHESTRATOR"
	envHostListen       = "FANO_REMOTE_TEST_HOST_LISTEN"
)

func TestMain(m *testing.M) {
	if orch := os.Getenv(envHostOrchestrator); orch != "" {
		os.Exit(runTestHostProcess(orch, os.Getenv(envHostListen)))
	}
	if os.Getenv("FANO_REMOTE_TEST_IDLE") != "" {
		fmt.Println("IDLE")
		select {}
	}
	os.Exit(m.Run())
}

// runTestHostProcess serves until killed. A prompt holding "hold" says
// HOLDING on stdout and never gets its answer: the process is killed
// mid-answer.
func runTestHostProcess(orchestrator, listen string) int {
	// As `fano gateway serve` does by default (gateway.memory_limit_mb).
	debug.SetMemoryLimit(config.DefaultGatewayMemoryLimitMB << 20)
	var backends []gateway.Backend
	for _, name := range []string{"s1", "s2", "s3"} {
		s := newSim(name)
		s.Inject(func(ctx context.Context, req gateway.Request) error {
			if strings.Contains(req.Prompt, "hold") {
				fmt.Printf("HOLDING %d\n", req.IntentSeq)
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		})
		backends = append(backends, s)
	}
	h, err := StartHost(HostConfig{Name: "desk", Version: "v-test", Orchestrator: orchestrator,
		Transport: Transport{Listen: listen, Plaintext: true}, Backends: backends, Logger: newLogBuffer().logger()})
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	fmt.Printf("SERVING %s\n", h.Address())
	select {}
}

// hostProcess is a running host process and its stdout lines.
type hostProcess struct {
	cmd   *exec.Cmd
	lines chan string
}

func startHostProcess(t testing.TB, orchestrator, listen string) *hostProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envHostOrchestrator+"="+orchestrator, envHostListen+"="+listen)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &hostProcess{cmd: cmd, lines: make(chan string, 64)}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	p.expect(t, "SERVING")
	return p
}

func (p *hostProcess) expect(t testing.TB, prefix string) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-p.lines:
			require.True(t, ok, "the host process ended before %s", prefix)
			if strings.HasPrefix(l, prefix) {
				return l
			}
			require.False(t, strings.HasPrefix(l, "ERROR"), l)
		case <-timeout:
			t.Fatalf("the host process did not say %s", prefix)
		}
	}
}

// A host process killed with SIGKILL mid-answer is lost within 2 s; the
// call it held fails as host_lost (transient: the task waits or moves,
// never FAILED) once the host comes back as a new process on the same
// port, and the next request is served by it.
func TestHostProcessKilledAndRestarted(t *testing.T) {
	hub := startTestHub(t, HubConfig{Transport: Transport{Plaintext: true}, Routed: map[string][]string{"desk": {"s1", "s2", "s3"}}})
	listen := freePort(t)
	p := startHostProcess(t, hub.Address(), listen)
	hub.waitFor(t, "desk", HostConnected, 20*time.Second)
	b := hub.Backend("s2", "desk")

	done := make(chan error, 1)
	go func() {
		_, err := b.Send(context.Background(), request(77, "hold this one"))
		done <- err
	}()
	assert.Equal(t, "HOLDING 77", p.expect(t, "HOLDING"))
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	took := hub.waitFor(t, "desk", HostLost, 10*time.Second)
	t.Logf("lost after %s", took)
	assert.Less(t, took, 2*time.Second, "a killed host on loopback is seen within 2 s")
	assert.Equal(t, gateway.StateHostLost, b.(*hostBackend).Condition().State)

	startHostProcess(t, hub.Address(), listen)
	select {
	case err := <-done:
		require.Error(t, err)
		c, ok := gateway.ConditionOf(err)
		require.True(t, ok, "%v", err)
		assert.Equal(t, gateway.StateHostLost, c.State)
		assert.Equal(t, "transient", gateway.Kind(err))
		assert.NotErrorIs(t, err, gateway.ErrNotSent, "it was sent: its quota stays used")
	case <-time.After(30 * time.Second):
		t.Fatal("the held call did not end when its host came back as a new process")
	}
	hub.waitFor(t, "desk", HostConnected, 20*time.Second)
	_, err := b.Send(context.Background(), request(78, "a new prompt"))
	require.NoError(t, err)
}
