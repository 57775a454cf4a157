package app

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"fano/config"
	"fano/gateway"
	"fano/gateway/sim"
	"fano/pb"
	"fano/wal"
)

// mainConfig is a config on one simulated LLM answering after latencyMS,
// the probe module alone, the panel on a free port.
func mainConfig(t *testing.T, latencyMS int) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
backends:
  alpha: {type: sim, hourly_limit: 1000, sim: {seed: 1, latency_ms: %d}}
explorer: {enabled: false}
documenter: {enabled: false}
researcher: {enabled: false}
control: {address: "127.0.0.1:0"}
logging: {level: info, console: json}
`, latencyMS)), "test config")
	require.NoError(t, err)
	return cfg
}

// sentSignal wraps a backend: the first Send closes sent.
type sentSignal struct {
	gateway.Backend
	once sync.Once
	sent chan struct{}
}

func (s *sentSignal) Send(ctx context.Context, req gateway.Request) (gateway.Response, error) {
	s.once.Do(func() { close(s.sent) })
	return s.Backend.Send(ctx, req)
}

// A Main run in process until idle finishes the work, says what it did,
// and a second Main on the same data directory continues from there.
func TestMainRunsUntilIdleAndContinues(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	var out bytes.Buffer
	m := NewMain(Options{Config: mainConfig(t, 5), DataDir: dataDir, UntilIdle: true, Stdout: &out, Console: "off"})
	require.NoError(t, m.Open(context.Background()))
	require.NoError(t, m.Run(context.Background()))
	require.NoError(t, m.Close())
	res := m.Result()
	require.Equal(t, "idle", res.Reason)
	require.Positive(t, res.Completed)
	require.False(t, res.Continued)
	require.Contains(t, out.String(), "fano control panel: http://127.0.0.1:", "the panel ran and said where")

	again := NewMain(Options{Config: mainConfig(t, 5), DataDir: dataDir, UntilIdle: true, NoPanel: true, Console: "off"})
	require.NoError(t, again.Open(context.Background()))
	require.NoError(t, again.Run(context.Background()))
	require.NoError(t, again.Close())
	require.True(t, again.Result().Continued)
	require.Equal(t, res.Completed, again.Result().CompletedBefore)
}

// runWithRequestOut opens a Main whose only LLM never answers on its own
// and returns once a request is out.
func runWithRequestOut(t *testing.T, dataDir string) *Main {
	t.Helper()
	sig := &sentSignal{sent: make(chan struct{})}
	m := NewMain(Options{Config: mainConfig(t, 0), DataDir: dataDir, NoPanel: true, Console: "off",
		NewBackend: func(name string, b *config.Backend) (gateway.Backend, error) {
			// Every call hangs until it is cancelled.
			sig.Backend = sim.New(sim.Config{Name: name, Seed: 1, HourlyLimit: 1000, TimeoutRate: 1}, nil)
			return sig, nil
		}})
	require.NoError(t, m.Open(context.Background()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	select {
	case <-sig.sent:
	case <-time.After(30 * time.Second):
		t.Fatal("no request was sent")
	}
	cancel()
	require.NoError(t, <-done)
	require.Equal(t, "context", m.Result().Reason)
	return m
}

// reopenReport opens the data directory again and returns what recovery
// found.
func reopenReport(t *testing.T, dataDir string) (paused, interrupted int) {
	t.Helper()
	m := NewMain(Options{Config: mainConfig(t, 0), DataDir: dataDir, NoPanel: true, Console: "off"})
	require.NoError(t, m.Open(context.Background()))
	rep := m.System().Report()
	require.NoError(t, m.Close())
	return rep.TasksPaused, rep.RequestsInterrupted
}

// Close pauses the task whose request is out (recovery finds nothing to
// repair); Kill leaves it RUNNING with its request open, as kill -9 does,
// and the next Open recovers it.
func TestMainCloseIsGracefulKillIsNot(t *testing.T) {
	graceful := filepath.Join(t.TempDir(), "data")
	require.NoError(t, runWithRequestOut(t, graceful).Close())
	paused, interrupted := reopenReport(t, graceful)
	require.Zero(t, paused, "Close paused the task itself")
	require.Zero(t, interrupted)

	killed := filepath.Join(t.TempDir(), "data")
	require.NoError(t, runWithRequestOut(t, killed).Kill())
	paused, interrupted = reopenReport(t, killed)
	require.Equal(t, 1, paused, "recovery pauses the task Kill left running")
	require.Equal(t, 1, interrupted, "its request was out")
}

// A start that fails before the system runs leaves nothing behind.
func TestMainFailedOpenLeavesNothing(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	cfg := mainConfig(t, 5)
	cfg.LLM.RefusalPatternsFile = filepath.Join(t.TempDir(), "missing.yaml")
	m := NewMain(Options{Config: cfg, DataDir: dataDir, NoPanel: true, Console: "off"})
	err := m.Open(context.Background())
	require.ErrorContains(t, err, "llm.refusal_patterns_file")
	require.NoDirExists(t, dataDir)
	require.NoError(t, m.Close())
}

// A start refused before the data directory is opened (here: the panel's
// port is taken) leaves an existing data directory as it was.
func TestMainRefusedStartKeepsTheDataDir(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	first := NewMain(Options{Config: mainConfig(t, 5), DataDir: dataDir, UntilIdle: true, NoPanel: true, Console: "off"})
	require.NoError(t, first.Open(context.Background()))
	require.NoError(t, first.Run(context.Background()))
	require.NoError(t, first.Close())

	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	cfg := mainConfig(t, 5)
	cfg.Control.Address = taken.Addr().String()
	m := NewMain(Options{Config: cfg, DataDir: dataDir, Console: "off"})
	require.ErrorContains(t, m.Open(context.Background()), "control.address")
	require.FileExists(t, filepath.Join(dataDir, "fano.db"))
}

// Options.WAL sees the options Open built for the WAL (where a test puts
// its write faults) before the WAL is opened, and the run goes on with
// what it changed.
func TestMainWALHookRunsBeforeTheWALOpens(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	called := false
	m := NewMain(Options{Config: mainConfig(t, 5), DataDir: dataDir, UntilIdle: true, NoPanel: true, Console: "off",
		WAL: func(o *wal.Options) {
			called = true
			require.NoFileExists(t, filepath.Join(dataDir, "fano.db"), "the hook runs before the WAL is opened")
			require.Equal(t, filepath.Join(dataDir, "fano.pid"), o.PIDFile, "on the options Open built")
			require.Positive(t, o.RetryWrites, "a writable open retries failed writes")
			o.NoSync = true
		}})
	require.NoError(t, m.Open(context.Background()))
	require.NoError(t, m.Run(context.Background()))
	require.NoError(t, m.Close())
	require.True(t, called)
}

// Below the low-disk threshold (Options.Disk reads a nearly full disk) no
// new work starts, and an until-idle run stops after Options.HaltLimit
// saying why, rather than claim that no work is left.
func TestMainUntilIdleHaltsOnLowDisk(t *testing.T) {
	cfg := mainConfig(t, 5)
	cfg.Orchestrator.Health.MinDiskSpaceGB = 1
	var started atomic.Int32
	firstStart := make(chan struct{})
	m := NewMain(Options{Config: cfg, DataDir: filepath.Join(t.TempDir(), "data"), UntilIdle: true, NoPanel: true, Console: "off",
		Disk: func(string) (uint64, error) {
			// A slow disk reading (a busy machine): it waits for a task
			// to start, a while at most, so work that does not wait for
			// the disk check shows here.
			select {
			case <-firstStart:
			case <-time.After(time.Second):
			}
			return 1 << 20, nil
		},
		HaltLimit: 500 * time.Millisecond,
		Observe: func(_ string, e *pb.Event) {
			if e.GetTaskStarted() != nil && started.Add(1) == 1 {
				close(firstStart)
			}
		}})
	require.NoError(t, m.Open(context.Background()))
	err := m.Run(context.Background())
	require.NoError(t, m.Close())
	require.Zero(t, started.Load(), "no task starts below the disk minimum, not even before the first health check")
	require.ErrorContains(t, err, "stopped with work left")
	require.ErrorContains(t, err, "low disk space")
	require.Equal(t, "halted", m.Result().Reason)
}

// BeforeStart runs with the data directory open and locked, before
// recovery: its error refuses the start and what the start created is
// removed. Until replaces the idle rule: its reason ends Run; Wake asks
// it at once.
func TestMainBeforeStartAndUntil(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	refused := NewMain(Options{Config: mainConfig(t, 5), DataDir: dataDir, UntilIdle: true, NoPanel: true, Console: "off",
		BeforeStart: func(dir string) error {
			require.FileExists(t, filepath.Join(dir, "fano.db"), "the WAL is open")
			return fmt.Errorf("no definition in %s", dir)
		}})
	require.ErrorContains(t, refused.Open(context.Background()), "no definition in "+dataDir)
	require.NoDirExists(t, dataDir, "a refused start leaves nothing")

	wake := make(chan struct{}, 1)
	asked := 0
	m := NewMain(Options{Config: mainConfig(t, 5), DataDir: dataDir, UntilIdle: true, NoPanel: true, Console: "off", Wake: wake,
		Until: func(idle bool) (string, error) {
			asked++
			if asked == 1 {
				return "", nil
			}
			return "told to", nil
		}})
	require.NoError(t, m.Open(context.Background()))
	wake <- struct{}{}
	require.NoError(t, m.Run(context.Background()))
	require.NoError(t, m.Close())
	require.Equal(t, "told to", m.Result().Reason)
	require.Equal(t, 2, asked)
}
