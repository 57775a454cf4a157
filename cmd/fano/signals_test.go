package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// slowConfig: the probe module on one sim backend whose answers take
// latencyMS, so a request is in flight for a while.
func slowConfig(latencyMS int) string {
	return fmt.Sprintf(`
backends:
  alpha: {type: sim, hourly_limit: 1000, sim: {seed: 1, latency_ms: %d}}
explorer: {enabled: false}
documenter: {enabled: false}
researcher: {enabled: false}
control: {enabled: false}
logging: {level: debug, console: json}
`, latencyMS)
}

// quickFano is fanoCmd without the race detector's one-second sleep at
// exit (GORACE atexit_sleep_ms), which would otherwise count in every
// exit these tests time.
func quickFano(t testing.TB, args ...string) *exec.Cmd {
	cmd := fanoCmd(t, args...)
	cmd.Env = append(cmd.Env, "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	return cmd
}

// runQuick runs quickFano to the end: stdout, stderr, error.
func runQuick(t testing.TB, args ...string) (string, string, error) {
	t.Helper()
	cmd := quickFano(t, args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// runningFano is a `fano run` subprocess.
type runningFano struct {
	t       testing.TB
	cmd     *exec.Cmd
	dataDir string
	stderr  *os.File
	done    chan error
}

// startFano starts `fano run` and returns once it runs; with inFlight, once
// a request has been sent.
func startFano(t testing.TB, cfg, dataDir string, inFlight bool, extra ...string) *runningFano {
	t.Helper()
	logPath := filepath.Join(dataDir, "logs", "fano.log")
	startedBefore := countLines(logPath, `"event":"cmd.fano.started"`)
	requestsBefore := countLines(logPath, `"event":"cmd.fano.llm_request"`)
	errPath := filepath.Join(t.TempDir(), "stderr")
	ef, err := os.Create(errPath)
	require.NoError(t, err)
	cmd := quickFano(t, append([]string{"run", "--config", cfg, "--data-dir", dataDir}, extra...)...)
	cmd.Stderr = ef
	require.NoError(t, cmd.Start())
	r := &runningFano{t: t, cmd: cmd, dataDir: dataDir, stderr: ef, done: make(chan error, 1)}
	go func() { r.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-r.done
		}
		ef.Close()
	})
	waitLogLines(t, logPath, `"event":"cmd.fano.started"`, startedBefore+1)
	if inFlight {
		waitLogLines(t, logPath, `"event":"cmd.fano.llm_request"`, requestsBefore+1)
	}
	return r
}

// stop sends sig and returns how long fano took to exit and its error.
func (r *runningFano) stop(sig os.Signal) (time.Duration, error) {
	r.t.Helper()
	start := time.Now()
	require.NoError(r.t, r.cmd.Process.Signal(sig))
	select {
	case err := <-r.done:
		return time.Since(start), err
	case <-time.After(30 * time.Second):
		r.t.Fatalf("fano did not exit after %v", sig)
	}
	return 0, nil
}

func (r *runningFano) stderrText() string {
	b, _ := os.ReadFile(r.stderr.Name())
	return string(b)
}

type statusJSON struct {
	Recovery struct {
		TasksPaused         int            `json:"tasks_paused"`
		RequestsInterrupted int            `json:"requests_interrupted"`
		TaskStates          map[string]int `json:"task_states"`
	} `json:"recovery"`
}

func readStatus(t *testing.T, cfg, dataDir string) statusJSON {
	t.Helper()
	out, errOut, err := runQuick(t, "status", "--json", "--config", cfg, "--data-dir", dataDir)
	require.NoError(t, err, errOut)
	var st statusJSON
	require.NoError(t, json.Unmarshal([]byte(out), &st), out)
	return st
}

// SIGTERM while a request is in flight: fano exits within 2 s, cleanly,
// and the task is PAUSED (by the shutdown itself: recovery finds nothing
// running and no request interrupted).
func TestSignalTermMidRequestPausesAndExitsFast(t *testing.T) {
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	cfg := writeConfig(t, dir, slowConfig(60_000))
	r := startFano(t, cfg, dataDir, true)
	took, err := r.stop(syscall.SIGTERM)
	require.NoError(t, err, r.stderrText())
	require.Less(t, took, 2*time.Second, "exit took %v", took)
	require.Contains(t, r.stderrText(), `"event":"cmd.fano.stopping"`)
	require.NoFileExists(t, filepath.Join(dataDir, "fano.pid"), "removed at a clean exit")

	st := readStatus(t, cfg, dataDir)
	require.GreaterOrEqual(t, st.Recovery.TaskStates["PAUSED"], 1, "%+v", st)
	require.Zero(t, st.Recovery.TaskStates["RUNNING"])
	require.Zero(t, st.Recovery.TaskStates["FAILED"])
	require.Zero(t, st.Recovery.TasksPaused, "the shutdown paused them, not recovery")
	require.Zero(t, st.Recovery.RequestsInterrupted, "the cancelled call was recorded")
}

// SIGUSR1 writes a dump with every goroutine's stack and fano keeps
// running; it then stops normally.
func TestSignalUSR1DumpsStacksAndKeepsRunning(t *testing.T) {
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	cfg := writeConfig(t, dir, slowConfig(60_000))
	r := startFano(t, cfg, dataDir, true)
	logPath := filepath.Join(dataDir, "logs", "fano.log")
	for i := 1; i <= 2; i++ {
		require.NoError(t, r.cmd.Process.Signal(syscall.SIGUSR1))
		waitLogLines(t, logPath, `"event":"cmd.fano.stack_dump"`, i)
	}
	dumps, err := filepath.Glob(filepath.Join(dataDir, "logs", "stacks-*.txt"))
	require.NoError(t, err)
	require.Len(t, dumps, 2, "one dump per signal")
	text, err := os.ReadFile(dumps[0])
	require.NoError(t, err)
	require.Contains(t, string(text), "goroutine ")
	require.Contains(t, string(text), "fano/actors")
	require.Nil(t, r.cmd.ProcessState, "still running")
	took, err := r.stop(syscall.SIGTERM)
	require.NoError(t, err, r.stderrText())
	require.Less(t, took, 2*time.Second)
}

// A PID file naming a live fano: a second `fano run` on the same data
// directory is refused with that pid. A stale one (its process is gone)
// is taken over with a warning.
func TestPIDFileLiveRefusedStaleTakenOver(t *testing.T) {
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	cfg := writeConfig(t, dir, slowConfig(60_000))
	r := startFano(t, cfg, dataDir, false)
	pidText, err := os.ReadFile(filepath.Join(dataDir, "fano.pid"))
	require.NoError(t, err)
	require.Equal(t, fmt.Sprint(r.cmd.Process.Pid), strings.TrimSpace(string(pidText)))

	_, errOut, err := runQuick(t, "run", "--config", cfg, "--data-dir", dataDir)
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "the second fano must fail: %v", err)
	require.Contains(t, errOut, fmt.Sprintf("data directory %s is in use by another fano (pid %d)", dataDir, r.cmd.Process.Pid))
	_, err = r.stop(syscall.SIGTERM)
	require.NoError(t, err)

	// A pid file left by a process that is gone.
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	deadPID := dead.ProcessState.Pid()
	require.NoError(t, os.WriteFile(filepath.Join(dataDir, "fano.pid"), []byte(fmt.Sprintf("%d\n", deadPID)), 0o644))
	fast := writeConfig(t, t.TempDir(), slowConfig(5))
	_, errOut, err = runQuick(t, "run", "--until-idle", "--config", fast, "--data-dir", dataDir)
	require.NoError(t, err, errOut)
	require.Contains(t, errOut, `"event":"cmd.fano.stale_pid"`)
	require.Contains(t, errOut, fmt.Sprintf(`"pid":%d`, deadPID))
	require.NoFileExists(t, filepath.Join(dataDir, "fano.pid"))
}

// Output into a reader that goes away (`fano ... | head`) neither kills
// fano nor marks anything failed.
func TestClosedPipeMarksNothingFailed(t *testing.T) {
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	cfg := writeConfig(t, dir, slowConfig(5))

	// `fano run --until-idle 2>&1 | head -1`
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	cmd := quickFano(t, "run", "--until-idle", "--config", cfg, "--data-dir", dataDir)
	var stdout strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, pw
	require.NoError(t, cmd.Start())
	pw.Close()
	line, err := bufio.NewReader(pr).ReadString('\n')
	require.NoError(t, err)
	require.NotEmpty(t, line)
	require.NoError(t, pr.Close()) // the reader leaves
	require.NoError(t, cmd.Wait(), "fano must not die of SIGPIPE")
	require.Contains(t, stdout.String(), "no work left; 5 tasks completed")
	st := readStatus(t, cfg, dataDir)
	require.Equal(t, map[string]int{"COMPLETED": 5}, st.Recovery.TaskStates)

	// `fano wal inspect | head -0`: the reader is gone before fano writes.
	pr, pw, err = os.Pipe()
	require.NoError(t, err)
	require.NoError(t, pr.Close())
	cmd = quickFano(t, "wal", "inspect", "--limit", "0", "--config", cfg, "--data-dir", dataDir)
	cmd.Stdout = pw
	var errb strings.Builder
	cmd.Stderr = &errb
	require.NoError(t, cmd.Run(), errb.String())
	pw.Close()
	require.Empty(t, errb.String())
	st = readStatus(t, cfg, dataDir)
	require.Equal(t, map[string]int{"COMPLETED": 5}, st.Recovery.TaskStates)
}

// `fano run` wired to the ops service (DumpState on SIGUSR1,
// Services.Finish after the system stopped, the ops section in status):
// the dump has mailbox depths and a task summary, the request cancelled by SIGTERM is in trace.log, and `fano
// status --json` shows health while fano runs and metrics after.
func TestRunWiresOps(t *testing.T) {
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	cfg := writeConfig(t, dir, slowConfig(60_000))
	r := startFano(t, cfg, dataDir, true)
	requireProcsLogged(t, filepath.Join(dataDir, "logs", "fano.log"))
	require.NoError(t, r.cmd.Process.Signal(syscall.SIGUSR1))
	waitLogLines(t, filepath.Join(dataDir, "logs", "fano.log"), `"event":"cmd.fano.stack_dump"`, 1)
	dumps, _ := filepath.Glob(filepath.Join(dataDir, "logs", "stacks-*.txt"))
	require.Len(t, dumps, 1)
	text, err := os.ReadFile(dumps[0])
	require.NoError(t, err)
	require.Contains(t, string(text), "== mailboxes", "the dump has each actor's mailbox depth")
	require.Regexp(t, `\d+  orchestrator/scheduler\n`, string(text))
	require.Regexp(t, `probe: .*RUNNING 1`, string(text))

	out, errOut, err := runQuick(t, "status", "--json", "--config", cfg, "--data-dir", dataDir)
	require.NoError(t, err, errOut)
	var live struct {
		Running bool `json:"running"`
		Ops     struct {
			Source string `json:"source"`
			Health struct {
				LLMsTotal int `json:"llms_total"`
			} `json:"health"`
		} `json:"ops"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &live), out)
	require.True(t, live.Running)
	require.Equal(t, "running", live.Ops.Source)

	_, err = r.stop(syscall.SIGTERM)
	require.NoError(t, err, r.stderrText())
	trace, err := os.ReadFile(filepath.Join(dataDir, "logs", "trace.log"))
	require.NoError(t, err)
	require.Contains(t, string(trace), `"outcome":"cancelled"`)
	require.NotContains(t, string(trace), "Fano plane", "no prompt text")

	out, errOut, err = runQuick(t, "status", "--json", "--config", cfg, "--data-dir", dataDir)
	require.NoError(t, err, errOut)
	require.Contains(t, out, `"source": "wal"`)
	require.Contains(t, out, `"llm_requests": {`)
}

// requireProcsLogged checks the started line of the log at path: fano runs
// with one P more than the CPUs (internal/procs), unless GOMAXPROCS is set
// in the environment it inherited.
func requireProcsLogged(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.Contains(line, `"event":"cmd.fano.started"`) {
			continue
		}
		var started struct {
			Procs int    `json:"gomaxprocs"`
			From  string `json:"gomaxprocs_from"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &started), line)
		if env := os.Getenv("GOMAXPROCS"); env != "" {
			require.Equal(t, "GOMAXPROCS", started.From, line)
			require.Equal(t, env, strconv.Itoa(started.Procs), line)
			return
		}
		require.Equal(t, "fano: the CPUs + 1", started.From, line)
		require.Equal(t, runtime.NumCPU()+1, started.Procs, line)
		return
	}
	t.Fatalf("no started line in %s", path)
}
