package actors

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"

	"fano/actors/allocator"
	"fano/actors/scheduler"
	"fano/gateway"
	"fano/gateway/sim"
	"fano/modules"
	"fano/modules/probe"
	"fano/pb"
	"fano/wal"
)

// The actors test binary doubles as a worker process for the kill
// benchmark: FANO_KILL_WORKER=<dir> runs 20,000 tasks on the WAL in dir,
// printing "ready" once recovered, "done N" as tasks complete, "idle" at
// the end.
func TestMain(m *testing.M) {
	if dir := os.Getenv("FANO_KILL_WORKER"); dir != "" {
		os.Exit(killWorker(dir, 20000))
	}
	if dir := os.Getenv(envFirstPromptFano); dir != "" {
		os.Exit(firstPromptFano(dir, os.Getenv(envTurnsSite)))
	}
	if orchestrator := os.Getenv(envBrowserHost); orchestrator != "" {
		os.Exit(browserHostProcess(orchestrator))
	}
	os.Exit(m.Run())
}

func killWorker(dir string, tasks int) int {
	log, err := wal.Open(filepath.Join(dir, "fano.db"), wal.Options{LockTimeout: 5 * time.Second})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer log.Close()
	clock := clockwork.NewRealClock()
	var done atomic.Int64
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	say := func(s string) { mu.Lock(); fmt.Fprintln(out, s); out.Flush(); mu.Unlock() }
	opts := Options{
		Log: log, Clock: clock, Logger: zerolog.Nop(),
		Scheduler:    scheduler.Config{MaxPending: 1 << 20, MessageLimit: 50},
		Allocator:    allocator.Config{Backends: []allocator.BackendConfig{{Name: "api", Kind: "sim", HourlyLimit: 1 << 30, MaxConcurrency: 64}}},
		Backends:     []gateway.Backend{sim.New(sim.Config{Name: "api", Style: "api", Seed: 1}, clock)},
		Modules:      []modules.Module{probe.New(probe.Config{NoPropose: true, Turns: 1, TaskType: benchTaskType})},
		TickInterval: 100 * time.Millisecond, MaxRunning: 64, CheckpointInterval: time.Second,
		Observe: func(_ string, e *pb.Event) {
			if e.GetTaskCompleted() != nil {
				say(fmt.Sprint("done ", done.Add(1)))
			}
		},
	}
	sys, err := Start(opts)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	say("ready")
	// As a producer that lost its process does: every task the system
	// does not know (its submit was never acknowledged: killed before)
	// is submitted again.
	var wg sync.WaitGroup
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for j := w; j < tasks; j += 64 {
				t := benchTask(j)
				if _, known := sys.Task(t.Id); known {
					continue
				}
				if _, err := sys.Submit(t); err != nil {
					say("error " + err.Error())
				}
			}
		}(w)
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := sys.WaitIdle(ctx); err != nil {
		say("error " + err.Error())
	}
	say("idle")
	_ = sys.Stop()
	return 0
}

// worker runs the worker process on dir; lines delivers its output.
func startWorker(b *testing.B, dir string) (*exec.Cmd, <-chan string) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "FANO_KILL_WORKER="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return cmd, lines
}

// waitLine waits for a line that match accepts and returns when it came.
func waitLine(b *testing.B, lines <-chan string, match func(string) bool) time.Time {
	deadline := time.After(5 * time.Minute)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				b.Fatal("worker ended early")
			}
			if strings.HasPrefix(l, "error") {
				b.Fatal(l)
			}
			if match(l) {
				return time.Now()
			}
		case <-deadline:
			b.Fatal("worker is stuck")
		}
	}
}

// taskFacts reads completions and requests per task from a closed WAL.
func taskFacts(b *testing.B, dir string) (submitted, completed map[string]bool, requests map[string]int, inFlight map[string]bool) {
	log, err := wal.Open(filepath.Join(dir, "fano.db"), wal.Options{LockTimeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	submitted, completed, requests, inFlight = map[string]bool{}, map[string]bool{}, map[string]int{}, map[string]bool{}
	err = log.Replay(1, func(ent wal.Entry) error {
		if ent.Owner != ownerScheduler {
			return nil
		}
		var e pb.Event
		if err := proto.Unmarshal(ent.Payload, &e); err != nil {
			return err
		}
		switch {
		case e.GetTaskSubmitted() != nil:
			submitted[e.GetTaskSubmitted().GetTask().GetId()] = true
		case e.GetTaskCompleted() != nil:
			completed[e.GetTaskCompleted().TaskId] = true
		case e.GetLlmRequestStarted() != nil:
			id := e.GetLlmRequestStarted().TaskId
			requests[id]++
			inFlight[id] = true
		case e.GetLlmResponseReceived() != nil:
			delete(inFlight, e.GetLlmResponseReceived().TaskId)
		case e.GetLlmRequestFailed() != nil:
			delete(inFlight, e.GetLlmRequestFailed().TaskId)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return submitted, completed, requests, inFlight
}

// BenchmarkKillRestart: 20,000 tasks, SIGKILL at half-way, restart. Goals:
// tasks run again within 1 s of the restart, 0 tasks lost, only the tasks
// in flight at the kill run twice. Baseline in the same run: the time from
// start to the first completion on an empty data directory.
func BenchmarkKillRestart(b *testing.B) {
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		cmd, lines := startWorker(b, dir)
		start := time.Now()
		coldFirst := waitLine(b, lines, func(l string) bool { return strings.HasPrefix(l, "done ") }).Sub(start)
		waitLine(b, lines, func(l string) bool { return l == "done 10000" })
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()

		submittedBefore, completedBefore, _, inFlight := taskFacts(b, dir)

		cmd, lines = startWorker(b, dir)
		restart := time.Now()
		again := waitLine(b, lines, func(l string) bool { return strings.HasPrefix(l, "done ") }).Sub(restart)
		waitLine(b, lines, func(l string) bool { return l == "idle" })
		_ = cmd.Wait()

		submitted, completed, requests, _ := taskFacts(b, dir)
		lost, twice, twiceNotInFlight := 0, 0, 0
		for j := 0; j < 20000; j++ {
			id := benchTask(j).Id
			if !completed[id] {
				lost++
			}
			if !submitted[id] {
				b.Fatalf("task %s was never submitted", id)
			}
			if requests[id] > 1 {
				twice++
				if !inFlight[id] {
					twiceNotInFlight++
				}
			}
		}
		for id := range completedBefore {
			if requests[id] != 1 {
				b.Fatalf("task %s completed before the kill but sent %d requests", id, requests[id])
			}
		}
		b.ReportMetric(again.Seconds(), "s-to-run-again")
		b.ReportMetric(coldFirst.Seconds(), "s-cold-start(baseline)")
		b.ReportMetric(float64(lost), "lost")
		b.ReportMetric(float64(twice), "ran-twice")
		b.ReportMetric(float64(len(inFlight)), "in-flight-at-kill")
		// Tasks whose submit was not yet acknowledged at the kill, which
		// the restarted producer submitted again.
		b.ReportMetric(float64(20000-len(submittedBefore)), "unsubmitted-at-kill")
		if lost > 0 || twiceNotInFlight > 0 {
			b.Fatalf("lost %d tasks; %d ran twice without being in flight", lost, twiceNotInFlight)
		}
	}
}
