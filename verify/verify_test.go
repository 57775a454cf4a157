package verify

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"fano/actors"
	"fano/actors/allocator"
	"fano/actors/scheduler"
	"fano/gateway"
	"fano/gateway/sim"
	"fano/modules"
	"fano/modules/probe"
	"fano/pb"
	"fano/wal"
)

func env(t *testing.T, dir string, log *wal.Log) Env {
	backends := []gateway.Backend{sim.New(sim.Config{Name: "alpha"}, nil)}
	return Env{
		DataDir: dir,
		Logger:  zerolog.New(zerolog.NewTestWriter(t)),
		Options: func() (actors.Options, error) {
			return actors.Options{
				Log: log, Backends: backends, OutputDir: filepath.Join(dir, "output"),
				Allocator: allocator.Config{Backends: []allocator.BackendConfig{{Name: "alpha", Kind: "sim", HourlyLimit: 10}}},
				Scheduler: scheduler.Config{MaxPending: 100, MessageLimit: 50},
				Modules:   []modules.Module{probe.New(probe.Config{NoPropose: true})},
			}, nil
		},
	}
}

func appendEvent(t *testing.T, log *wal.Log, owner string, e *pb.Event, intent bool) {
	t.Helper()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	e.At = at.UnixNano()
	data, err := proto.Marshal(e)
	require.NoError(t, err)
	_, err = log.Append(context.Background(), wal.Entry{Time: at, Owner: owner, Type: "event", Intent: intent, Payload: data})
	require.NoError(t, err)
}

// Probe has no Exporter or Verifier: verify still checks tasks, intents
// and stray output files, and repair clears them.
func TestVerifyAndRepairWithoutModuleInterfaces(t *testing.T) {
	dir := t.TempDir()
	log, err := wal.Open(filepath.Join(dir, "fano.db"), wal.Options{NoSync: true})
	require.NoError(t, err)
	defer log.Close()
	e := env(t, dir, log)

	r, err := Verify(e)
	require.NoError(t, err)
	require.True(t, r.Clean)
	require.Equal(t, []string{"probe"}, r.Modules)

	appendEvent(t, log, "scheduler", &pb.Event{Body: &pb.Event_TaskSubmitted{TaskSubmitted: &pb.TaskSubmitted{
		Task: &pb.Task{Id: "ghost/scan/1", Module: "ghost", TaskType: "scan", Subject: "1"}}}}, false)
	appendEvent(t, log, "scheduler", &pb.Event{Body: &pb.Event_TaskSubmitted{TaskSubmitted: &pb.TaskSubmitted{
		Task: &pb.Task{Id: "probe/exploration/1", Module: "probe", TaskType: "exploration", Subject: "1", Context: map[string]string{"question": "q"}}}}}, false)
	appendEvent(t, log, "scheduler", &pb.Event{Body: &pb.Event_TaskStarted{TaskStarted: &pb.TaskStarted{TaskId: "probe/exploration/1", Llm: "alpha"}}}, false)
	appendEvent(t, log, "scheduler", &pb.Event{Body: &pb.Event_LlmRequestStarted{LlmRequestStarted: &pb.LLMRequestStarted{TaskId: "probe/exploration/1", Llm: "alpha", Prompt: "q"}}}, true)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "output", "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "output", "sub", ".x.json.tmp-123"), []byte("half"), 0o644))

	r, err = Verify(e)
	require.NoError(t, err)
	require.Equal(t, []string{KindInterruptedTask, KindOpenIntent, KindOutputExtra, KindUnknownModuleTask}, r.Kinds())
	require.Equal(t, 2, r.Tasks)

	rr, err := Repair(e)
	require.NoError(t, err)
	require.True(t, rr.After.Clean, "%+v", rr.After.Problems)
	require.NotEmpty(t, rr.Fixes)
	moved, _ := filepath.Glob(filepath.Join(dir, "output-orphaned", "*", "sub", ".x.json.tmp-123"))
	require.Len(t, moved, 1)

	in, err := actors.Inspect(mustOpts(t, e))
	require.NoError(t, err)
	require.Empty(t, in.Uncommitted)
	for _, tk := range in.Tasks {
		require.Equal(t, pb.TaskState_TASK_STATE_PAUSED, tk.State, tk.Id)
	}
}

func mustOpts(t *testing.T, e Env) actors.Options {
	o, err := e.Options()
	require.NoError(t, err)
	return o
}
