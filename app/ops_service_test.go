package app

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"fano/config"
	"fano/health"
	"fano/modules/probe"
	"fano/pb"
)

// syncBuffer is a log sink safe for the goroutines that write to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The ops run service on a real system: the heartbeat summarizes what
// changed, then says idle; ops-status.json and the trace log are written;
// `fano status` reads them back.
func TestOpsServiceHeartbeatTraceAndStatus(t *testing.T) {
	o := startOpsSys(t, opsSysConfig{latency: 2 * time.Second, probe: probe.Config{NoPropose: true, Turns: 2}})
	var logs syncBuffer
	logger := zerolog.New(&logs)
	cfg := config.New()
	cfg.Orchestrator.Health.MinDiskSpaceGB = 0 // the test machine's disk is not the point here
	svc := &Services{env: &ServiceEnv{Cfg: cfg, DataDir: o.dir, Sys: o.sys, Logger: logger, Clock: o.clock, Stop: func(string) {},
		UntilIdle: true, Disk: health.StatFS}}
	stop, err := svc.startOps(svc.env)
	require.NoError(t, err)
	t.Cleanup(stop)

	// Two questions are asked, in one batch; answers come after 2 s on the clock.
	var asked []*pb.Task
	for _, q := range []string{"one", "two"} {
		asked = append(asked, &pb.Task{Id: "probe/exploration/" + q, Module: probe.Name, TaskType: probe.TaskType, Subject: q,
			MaxRequests: 2, Context: map[string]string{"question": "question " + q}})
	}
	rs, err := o.sys.SubmitBatch(asked)
	require.NoError(t, err)
	require.Len(t, rs, 2)
	for _, r := range rs {
		require.True(t, r.Accepted, r.Reason)
	}
	// The clock moves on a short real ticker until both are done.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	for done := 0; done < 2; {
		select {
		case n := <-o.events:
			if n.Event.GetTaskCompleted() != nil {
				done++
			}
		case <-tick.C:
			o.clock.Advance(100 * time.Millisecond)
		case <-deadline:
			t.Fatal("tasks did not complete")
		}
	}
	require.NoError(t, o.sys.WaitIdle(within(t, 20*time.Second)))
	svc.ops.Load().health.CheckNow(within(t, 10*time.Second))
	// The ops service takes notices on its own goroutine: let it see both
	// completions before the heartbeat reports them.
	require.Eventually(t, func() bool { return svc.ops.Load().snapshot().TasksCompleted["probe"] == 2 }, 10*time.Second, time.Millisecond)
	// A heartbeat now: the change it reports (or the 60 s loop reported
	// just before it, woken by the last Advance) is the last changed line.
	svc.ops.Load().heartbeat()
	first := lastLine(t, logs.String(), "cmd.fano.heartbeat", `"changed":true`)
	// Under load the clock can pass a 60 s heartbeat before both tasks
	// are done; the heartbeats together tell the whole change.
	require.Equal(t, 2, sumHeartbeats(logs.String(), `\+(\d+) completed`))
	require.Equal(t, 4, sumHeartbeats(logs.String(), `(\d+) requests`))
	require.Equal(t, 4, sumHeartbeats(logs.String(), `(\d+) answers`))
	require.Contains(t, first, "no work left")
	second := svc.ops.Load().heartbeat()
	require.Contains(t, second, "idle ")
	require.Contains(t, lastLine(t, logs.String(), "cmd.fano.heartbeat"), `"changed":false`, "nothing changed after the first")

	// ops-status.json: health and the 24-hour metrics.
	sec, err := ReadOpsStatus(o.dir, nil, o.clock.Now())
	require.NoError(t, err)
	require.NotNil(t, sec)
	require.Equal(t, "running", sec.Source)
	require.Equal(t, int64(2), sec.Metrics.TasksCompleted["probe"])
	require.Equal(t, int64(4), sec.Metrics.LLMRequests["alpha"])
	// 2 s of latency on the test's clock, which moves 100 ms every 5 ms of
	// real time: a busy machine can let it move a few steps between the
	// call's start and the backend's timer (real time would be ~0.1 s).
	avg := sec.Metrics.LLMAvgResponseSeconds["alpha"]
	require.True(t, avg >= 2 && avg < 3, "average %.3f s: 2 s latency on the injected clock", avg)
	require.Equal(t, 1, sec.Health.LLMsTotal)
	require.GreaterOrEqual(t, sec.Health.Checks, 1)

	// The panel's view.
	view := panelOps{svc.ops.Load()}.Health().(opsView)
	require.Equal(t, int64(2), view.Metrics.TasksCompleted["probe"])
	hs, ok := svc.HealthStatus()
	require.True(t, ok)
	require.Equal(t, 1, hs.LLMsAvailable)

	// Stopped (as a run does: services, then the system, then Finish).
	stop()
	svc.Finish()
	trace := readTrace(t, filepath.Join(o.dir, "logs", "trace.log"))
	require.Len(t, trace, 4)
	for _, l := range trace {
		require.Equal(t, "alpha", l.Backend)
		require.Equal(t, "ok", l.Outcome)
		require.Equal(t, "probe", l.Module)
		require.True(t, l.DurationMS >= 2000 && l.DurationMS < 3000, "duration %v ms: 2 s on the injected clock", l.DurationMS)
		require.Positive(t, l.PromptBytes)
		require.Positive(t, l.AnswerBytes)
	}
	raw, err := os.ReadFile(filepath.Join(o.dir, "logs", "trace.log"))
	require.NoError(t, err)
	require.NotContains(t, string(raw), "question", "no prompt text in the trace")

	// Offline, `fano status` takes the metrics from the WAL.
	sec, err = ReadOpsStatus(o.dir, o.log, o.clock.Now())
	require.NoError(t, err)
	require.Equal(t, "wal", sec.Source)
	require.Equal(t, int64(2), sec.Metrics.TasksCompleted["probe"])
	require.Equal(t, int64(4), sec.Metrics.QuotaUsed["alpha"])
	var w strings.Builder
	PrintOps(&w, sec)
	require.Contains(t, w.String(), "2 tasks completed")
}

// lastLine is the last log line of event that also holds every one of
// with.
func lastLine(t *testing.T, text, event string, with ...string) string {
	t.Helper()
	var last string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, `"event":"`+event+`"`) && containsAll(l, with) {
			last = l
		}
	}
	require.NotEmpty(t, last, "no %s line %q", event, with)
	return last
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

func readTrace(t *testing.T, path string) []traceLine {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []traceLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l traceLine
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l), sc.Text())
		out = append(out, l)
	}
	return out
}

// The trace log pairs each request with its end and writes sizes and
// times only: a failure's error text and the prompt never appear.
func TestTraceLogLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "logs", "trace.log")
	tr, err := openTrace(path)
	require.NoError(t, err)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ev := func(d time.Duration, e *pb.Event) *pb.Event { e.At = at.Add(d).UnixNano(); return e }
	for _, e := range []*pb.Event{
		ev(0, &pb.Event{Body: &pb.Event_LlmRequestStarted{LlmRequestStarted: &pb.LLMRequestStarted{TaskId: "explorer/critique/t1", Llm: "gemini", Prompt: "SECRET PROMPT", DeepMode: true, Turn: 2}}}),
		ev(3*time.Second, &pb.Event{Body: &pb.Event_LlmResponseReceived{LlmResponseReceived: &pb.LLMResponseReceived{TaskId: "explorer/critique/t1", Llm: "gemini", Content: "answer!", Turn: 2, DurationNs: int64(3 * time.Second), PromptTokens: 4, CompletionTokens: 2}}}),
		ev(4*time.Second, &pb.Event{Body: &pb.Event_LlmRequestStarted{LlmRequestStarted: &pb.LLMRequestStarted{TaskId: "explorer/critique/t1", Llm: "gemini", Prompt: "SECRET PROMPT 2", Turn: 3}}}),
		ev(4500*time.Millisecond, &pb.Event{Body: &pb.Event_LlmRequestFailed{LlmRequestFailed: &pb.LLMRequestFailed{TaskId: "explorer/critique/t1", Llm: "gemini", Kind: "cancelled", Error: "token=abc123 leaked", Turn: 3}}}),
	} {
		require.NoError(t, tr.observe(e))
	}
	tr.close()
	lines := readTrace(t, path)
	require.Len(t, lines, 2)
	require.Equal(t, traceLine{Time: at.Add(3 * time.Second), Backend: "gemini", Task: "explorer/critique/t1", Module: "explorer", TaskType: "critique",
		Turn: 2, Deep: true, Outcome: "ok", DurationMS: 3000, PromptBytes: 13, AnswerBytes: 7, PromptTokens: 4, CompletionTokens: 2}, lines[0])
	require.Equal(t, "cancelled", lines[1].Outcome)
	require.InDelta(t, 500, lines[1].DurationMS, 1e-6)
	require.Equal(t, 15, lines[1].PromptBytes)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NotContains(t, string(raw), "SECRET")
	require.NotContains(t, string(raw), "abc123")
}

func counts(m map[pb.TaskState]int) map[string]map[pb.TaskState]int {
	return map[string]map[pb.TaskState]int{"probe": m}
}

// The heartbeat: a change summary, then one short idle line; an ETA from
// the pace so far on --until-idle runs.
func TestHeartbeatLines(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	h := newHeartbeat(start)
	done := func(id string) *pb.Event {
		return &pb.Event{Body: &pb.Event_TaskCompleted{TaskCompleted: &pb.TaskCompleted{TaskId: id}}}
	}
	h.observe(&pb.Event{Body: &pb.Event_LlmRequestStarted{LlmRequestStarted: &pb.LLMRequestStarted{TaskId: "p/x/1"}}})
	h.observe(&pb.Event{Body: &pb.Event_LlmRequestFailed{LlmRequestFailed: &pb.LLMRequestFailed{TaskId: "p/x/1", Kind: "rate_limited"}}})
	h.observe(done("p/x/1"))
	h.observe(done("p/x/2"))
	line, changed := h.line(start.Add(time.Minute), counts(map[pb.TaskState]int{pb.TaskState_TASK_STATE_PENDING: 4, pb.TaskState_TASK_STATE_COMPLETED: 2}), time.Time{}, true)
	require.True(t, changed)
	require.Equal(t, "+2 completed, 1 requests, 0 answers, 1 failed (1 rate limited); now 0 running, 4 waiting, 0 paused; eta ~2m0s (4 tasks left at 2.0/min)", line)

	line, changed = h.line(start.Add(2*time.Minute), counts(map[pb.TaskState]int{pb.TaskState_TASK_STATE_PENDING: 4, pb.TaskState_TASK_STATE_COMPLETED: 2}), time.Time{}, true)
	require.False(t, changed)
	require.Equal(t, "idle 1m0s: 0 running, 4 waiting, 0 paused", line)

	resume := time.Date(2026, 3, 1, 12, 30, 0, 0, time.UTC)
	line, _ = h.line(start.Add(3*time.Minute), counts(map[pb.TaskState]int{pb.TaskState_TASK_STATE_PAUSED: 1}), resume, false)
	require.Equal(t, "state changed; now 0 running, 0 waiting, 1 paused", line)
	line, _ = h.line(start.Add(4*time.Minute), counts(map[pb.TaskState]int{pb.TaskState_TASK_STATE_PAUSED: 1}), resume, false)
	require.Equal(t, "idle 1m0s: 0 running, 0 waiting, 1 paused (next resume 12:30:00)", line)

	h2 := newHeartbeat(start)
	h2.observe(&pb.Event{Body: &pb.Event_TaskSubmitted{TaskSubmitted: &pb.TaskSubmitted{Task: &pb.Task{Id: "p/x/9"}}}})
	line, _ = h2.line(start.Add(time.Minute), counts(map[pb.TaskState]int{pb.TaskState_TASK_STATE_PENDING: 1}), time.Time{}, true)
	require.Equal(t, "+1 new tasks; now 0 running, 1 waiting, 0 paused; eta unknown (1 tasks left, none finished yet)", line)
}

// SIGUSR1's dump: stacks, each actor's mailbox depth, and the tasks.
func TestDumpStateHasStacksMailboxesAndTasks(t *testing.T) {
	o := startOpsSys(t, opsSysConfig{timeoutRate: 1, probe: probe.Config{Questions: []string{"q"}, Turns: 1}})
	o.waitTask("probe/exploration/q0000", "request in flight", awaitingAnswer)
	path, err := DumpState(o.dir, o.sys)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(filepath.Base(path), "stacks-"))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	text := string(b)
	require.Contains(t, text, "== goroutines ==")
	require.Contains(t, text, "goroutine ")
	require.Contains(t, text, "== mailboxes")
	require.Regexp(t, `\n\s+\d+  orchestrator/scheduler\n`, text)
	require.NotContains(t, text, "    -1  orchestrator/scheduler", "depth readable")
	require.Contains(t, text, "== tasks ==")
	require.Contains(t, text, "probe: RUNNING 1")
	require.Contains(t, text, "probe/exploration/q0000 on alpha, 1 requests, awaiting answer: true")

	// Without a system (a dump before it started) only the stacks.
	path, err = DumpState(t.TempDir(), nil)
	require.NoError(t, err)
	b, _ = os.ReadFile(path)
	require.NotContains(t, string(b), "== tasks ==")
}

// sumHeartbeats adds up the number pattern captures over every heartbeat
// line of the log.
func sumHeartbeats(log, pattern string) int {
	re := regexp.MustCompile(pattern)
	sum := 0
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "cmd.fano.heartbeat") {
			continue
		}
		if m := re.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			sum += n
		}
	}
	return sum
}

// Trace lines wait for a flush (the consumer flushes whenever no notice
// waits), and a long burst is written in pieces of about 64 KB.
func TestTraceLogWritesOnFlush(t *testing.T) {
	path := filepath.Join(t.TempDir(), "logs", "trace.log")
	tr, err := openTrace(path)
	require.NoError(t, err)
	defer tr.close()
	answered := func(i int) *pb.Event {
		return &pb.Event{At: int64(i), Body: &pb.Event_LlmResponseReceived{LlmResponseReceived: &pb.LLMResponseReceived{TaskId: fmt.Sprintf("probe/bench/t%d", i), Llm: "alpha"}}}
	}
	require.NoError(t, tr.observe(answered(0)))
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Empty(t, raw, "not written before a flush")
	require.NoError(t, tr.flush())
	require.Len(t, readTrace(t, path), 1)
	n := 1
	for ; ; n++ {
		st, err := os.Stat(path)
		require.NoError(t, err)
		if st.Size() > 64<<10 {
			break
		}
		require.NoError(t, tr.observe(answered(n)))
		require.Less(t, n, 10000, "a burst is written before it passes 64 KB")
	}
	require.NoError(t, tr.flush())
	require.Equal(t, n, len(readTrace(t, path)), "lines 0..n-1, each once")
}
