package main

import (
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"fano/actors"
	"fano/actors/scheduler"
	"fano/pb"
	"fano/wal"
)

// coreConfig runs the probe module (explorer off) on three slow sim
// backends, so requests are in flight when the test kills fano.
func coreConfig(latencyMS int) string {
	return fmt.Sprintf(`
backends:
  chatgpt: {type: sim, hourly_limit: 1000, sim: {seed: 1, latency_ms: %[1]d}}
  gemini:  {type: sim, hourly_limit: 1000, sim: {seed: 2, latency_ms: %[1]d}}
  claude:  {type: sim, hourly_limit: 1000, sim: {seed: 3, latency_ms: %[1]d}}
explorer: {enabled: false}
documenter: {enabled: false}
researcher: {enabled: false}
control: {enabled: false}
orchestrator:
  scheduler: {tick_interval_ms: 20}
logging: {level: debug, console: json}
`, latencyMS)
}

type turnKey struct {
	task string
	turn int32
}

// walFacts reads what the WAL says about requests and answers.
type walFacts struct {
	answers  map[turnKey]string
	requests map[turnKey]int
	tasks    *scheduler.State
	archived map[string]*pb.Task // finished tasks whole, from the archive
}

func readWAL(t *testing.T, dataDir string) walFacts {
	t.Helper()
	log, err := wal.Open(filepath.Join(dataDir, "fano.db"), wal.Options{LockTimeout: time.Second})
	require.NoError(t, err)
	defer log.Close()
	f := walFacts{answers: map[turnKey]string{}, requests: map[turnKey]int{}, tasks: scheduler.New(scheduler.Config{MaxPending: 1000, MessageLimit: 50})}
	require.NoError(t, log.Replay(1, func(ent wal.Entry) error {
		if ent.Owner != "scheduler" {
			return nil
		}
		var e pb.Event
		require.NoError(t, proto.Unmarshal(ent.Payload, &e))
		if r := e.GetLlmRequestStarted(); r != nil {
			f.requests[turnKey{r.TaskId, r.Turn}]++
		}
		if r := e.GetLlmResponseReceived(); r != nil {
			f.answers[turnKey{r.TaskId, r.Turn}] = r.Content
		}
		return f.tasks.Apply(&e)
	}))
	// A finished task's conversation left memory for the archive: the
	// facts hold the whole task.
	f.archived = map[string]*pb.Task{}
	for _, light := range f.tasks.Tasks(func(t *pb.Task) bool { return t.GetArchived() }, 0) {
		at, ok, err := actors.ArchivedTask(log, light, light.Id)
		require.NoError(t, err)
		require.True(t, ok, "%s completed as archived but is not in the archive", light.Id)
		f.archived[light.Id] = at
	}
	return f
}

// Spec §13.2 test_crash_recovery_preserves_work, with a real process:
// `fano run` is killed with SIGKILL mid-run, then run again to the end.
// No answer that was saved is lost or changed, and a request is sent a
// second time only for a task that had one in flight at the kill.
func TestCrashRecoveryPreservesWork(t *testing.T) {
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	cfg := writeConfig(t, dir, coreConfig(150))

	cmd := fanoCmd(t, "run", "--config", cfg, "--data-dir", dataDir)
	require.NoError(t, cmd.Start())
	logPath := filepath.Join(dataDir, "logs", "fano.log")
	waitLogLines(t, logPath, "actors.executor.llm_response", 4)
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()

	before := readWAL(t, dataDir)
	require.GreaterOrEqual(t, len(before.answers), 4, "answers were saved before the kill")
	inFlight := 0
	for _, tk := range before.tasks.Tasks(nil, 0) {
		if tk.Conversation.GetAwaitingResponse() {
			inFlight++
		}
	}

	out, errOut, err := runFano(t, "recover", "--json", "--config", cfg, "--data-dir", dataDir)
	require.NoError(t, err, errOut)
	require.Contains(t, out, `"requests_interrupted": `+fmt.Sprint(inFlight))

	_, errOut, err = runFano(t, "run", "--until-idle", "--config", cfg, "--data-dir", dataDir)
	require.NoError(t, err, errOut)

	after := readWAL(t, dataDir)
	for k, a := range before.answers {
		require.Equal(t, a, after.answers[k], "answer of %s turn %d changed or lost", k.task, k.turn)
		require.Equal(t, 1, after.requests[k], "%s turn %d was answered before the kill and asked again", k.task, k.turn)
	}
	resent := 0
	for k, n := range after.requests {
		require.LessOrEqual(t, n, 2, "%s turn %d sent %d times", k.task, k.turn, n)
		if n == 2 {
			resent++
		}
	}
	require.LessOrEqual(t, resent, inFlight, "only requests in flight at the kill may be sent again")
	tasks := after.tasks.Tasks(nil, 0)
	require.Len(t, tasks, 5)
	for _, tk := range tasks {
		require.Equal(t, pb.TaskState_TASK_STATE_COMPLETED, tk.State, tk.Id)
		if at := after.archived[tk.Id]; at != nil {
			tk = at
		}
		require.EqualValues(t, 3, tk.Conversation.TurnCount, tk.Id)
		for turn := int32(0); turn < 3; turn++ {
			if a, ok := before.answers[turnKey{tk.Id, turn}]; ok {
				require.Equal(t, a, tk.Conversation.Messages[2*turn+1].Content, "%s turn %d", tk.Id, turn)
			}
		}
	}
}
