package main

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"fano/pb"
	"fano/wal"
)

// crashFacts is what the WAL says about requests, answers and tasks.
type crashFacts struct {
	requests map[turnKey]int
	answers  map[turnKey]string
	tasks    map[string]bool
}

// readCrashFacts reads the WAL of dataDir read-only.
func readCrashFacts(t *testing.T, dataDir string) crashFacts {
	t.Helper()
	f := crashFacts{requests: map[turnKey]int{}, answers: map[turnKey]string{}, tasks: map[string]bool{}}
	path := filepath.Join(dataDir, "fano.db")
	if _, err := os.Stat(path); os.IsNotExist(err) {
		return f
	}
	log, err := wal.Open(path, wal.Options{ReadOnly: true, LockTimeout: 5 * time.Second})
	require.NoError(t, err)
	defer log.Close()
	require.NoError(t, log.Replay(1, func(ent wal.Entry) error {
		if ent.Owner != "scheduler" {
			return nil
		}
		var e pb.Event
		require.NoError(t, proto.Unmarshal(ent.Payload, &e))
		switch {
		case e.GetTaskSubmitted() != nil:
			f.tasks[e.GetTaskSubmitted().GetTask().GetId()] = true
		case e.GetLlmRequestStarted() != nil:
			r := e.GetLlmRequestStarted()
			f.requests[turnKey{r.TaskId, r.Turn}]++
		case e.GetLlmResponseReceived() != nil:
			r := e.GetLlmResponseReceived()
			f.answers[turnKey{r.TaskId, r.Turn}] = r.Content
		}
		return nil
	}))
	return f
}

// crashConfig is the demo on slowed sim backends with the panel off and
// quotas raised for the restarts.
func crashConfig(t *testing.T, slow int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "examples", "demo.yaml"))
	require.NoError(t, err)
	s := regexp.MustCompile(`latency_ms: (\d+)`).ReplaceAllStringFunc(string(b), func(m string) string {
		n, _ := strconv.Atoi(strings.TrimPrefix(m, "latency_ms: "))
		return fmt.Sprintf("latency_ms: %d", n*slow)
	})
	// Every restart redoes a few requests: the quotas leave room for up
	// to 500 crashes within the hour, so no run waits for the next one.
	s = regexp.MustCompile(`hourly_limit: (\d+)`).ReplaceAllStringFunc(s, func(m string) string {
		n, _ := strconv.Atoi(strings.TrimPrefix(m, "hourly_limit: "))
		return fmt.Sprintf("hourly_limit: %d", n*100)
	})
	s = strings.Replace(s, "logging:\n  level: info\n  console: auto", "logging:\n  level: info\n  console: json", 1)
	return s + "\ncontrol: {enabled: false}\n"
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// The crash harness (`make crashtest`, K=50 by default, up to 500; a
// small K in `make test`): `fano run` on the slowed demo is SIGKILLed at
// seeded random moments K times, then runs to the end. Checked: no answer
// the WAL held is lost or changed, no task lost, each request re-sent at
// most once per kill it was in flight at, no section of the document with
// the same title or body twice, and `fano verify` clean (which includes
// the modules' own checks: no insight blessed twice).
func TestCrashLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("crash loop: not in -short")
	}
	kills := min(envInt("FANO_CRASH_K", 3), 500)
	seed := int64(envInt("FANO_CRASH_SEED", 1))
	t.Logf("crash loop: %d kills, seed %d (FANO_CRASH_K, FANO_CRASH_SEED)", kills, seed)
	rng := rand.New(rand.NewSource(seed))
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	cfg := writeConfig(t, dir, crashConfig(t, 10))

	seenAnswers := map[turnKey]string{}
	seenTasks := map[string]bool{}
	inFlightAtKill := map[turnKey]int{}
	for k := 0; k < kills; k++ {
		errPath := filepath.Join(dir, fmt.Sprintf("stderr-%d", k))
		ef, err := os.Create(errPath)
		require.NoError(t, err)
		cmd := quickFano(t, "run", "--until-idle", "--config", cfg, "--data-dir", dataDir)
		cmd.Stderr = ef
		require.NoError(t, cmd.Start())
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		// Kill at a seeded moment after the start; a run that ends first
		// (all work done) is simply the last one.
		waitLogLines(t, errPath, `"event":"cmd.fano.started"`, 1)
		timer := time.NewTimer(time.Duration(rng.Intn(800)) * time.Millisecond)
		finished := false
		select {
		case <-timer.C:
			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			<-done
		case err := <-done:
			timer.Stop()
			require.NoError(t, err, tail(errPath))
			finished = true
		}
		ef.Close()
		f := readCrashFacts(t, dataDir)
		for key, a := range seenAnswers {
			require.Equal(t, a, f.answers[key], "kill %d: the answer of %s turn %d was lost or changed", k, key.task, key.turn)
		}
		for id := range seenTasks {
			require.True(t, f.tasks[id], "kill %d: task %s lost", k, id)
		}
		for key, a := range f.answers {
			seenAnswers[key] = a
		}
		for id := range f.tasks {
			seenTasks[id] = true
		}
		for key := range f.requests {
			if _, answered := f.answers[key]; !answered {
				inFlightAtKill[key]++
			}
		}
		if finished {
			break
		}
	}

	_, errOut, err := runQuick(t, "run", "--until-idle", "--config", cfg, "--data-dir", dataDir)
	require.NoError(t, err, errOut)
	final := readCrashFacts(t, dataDir)
	for key, a := range seenAnswers {
		require.Equal(t, a, final.answers[key], "the answer of %s turn %d was lost or changed", key.task, key.turn)
	}
	for id := range seenTasks {
		require.True(t, final.tasks[id], "task %s lost", id)
	}
	for key, n := range final.requests {
		require.LessOrEqual(t, n-1, inFlightAtKill[key], "%s turn %d sent %d times, in flight at %d kills", key.task, key.turn, n, inFlightAtKill[key])
	}

	out, errOut, code := runCmd("verify", "--config", cfg, "--data-dir", dataDir)
	require.Equal(t, 0, code, "%s%s", out, errOut)
	require.Contains(t, out, "clean")

	doc, err := os.ReadFile(filepath.Join(dataDir, "output", "DOCUMENT.md"))
	require.NoError(t, err)
	titles, bodies := map[string]int{}, map[string]int{}
	for _, sec := range strings.Split(string(doc), "\n## ")[1:] {
		title, body, _ := strings.Cut(sec, "\n")
		titles[strings.TrimSpace(title)]++
		if b := strings.TrimSpace(body); b != "" {
			bodies[b]++
		}
	}
	require.NotEmpty(t, titles, "the document has sections")
	for title, n := range titles {
		require.Equal(t, 1, n, "section %q appears %d times", title, n)
	}
	for _, n := range bodies {
		require.Equal(t, 1, n, "a section body appears %d times", n)
	}
}
