package actors

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"fano/modules"
	"fano/modules/probe"
	"fano/pb"
	"fano/wal"
)

// Recovery refuses a WAL with unfinished tasks of a module the registry
// knows but could not build, naming the module, the count and why, and
// writes nothing; tasks an earlier recovery paused as orphans resume
// once their module is built again.
func TestRecoveryRefusesTasksOfAnUnbuiltModuleAndResumesOrphans(t *testing.T) {
	b := setup(t, setupOpts{probe: probe.Config{NoPropose: true, TaskType: benchTaskType}})
	for i := range 3 {
		_, err := b.log.Append(context.Background(), wal.Entry{Owner: ownerScheduler, Type: "task_submitted",
			Payload: mustMarshal(t, &pb.Event{At: 1, Body: &pb.Event_TaskSubmitted{TaskSubmitted: &pb.TaskSubmitted{Task: benchTask(i)}}})})
		require.NoError(t, err)
	}

	// A build without the module: its tasks are parked as orphans.
	noModule := b.opts
	noModule.Modules = []modules.Module{}
	rep, err := Recover(noModule)
	require.NoError(t, err)
	require.Len(t, rep.Repairs, 3)

	// Known but not built: refused, with why; nothing written.
	before := b.log.LastSeq()
	unbuilt := noModule
	unbuilt.Unbuilt = map[string]string{probe.Name: "its definition is missing"}
	_, err = Recover(unbuilt)
	require.ErrorIs(t, err, ErrModuleNotBuilt)
	require.Contains(t, err.Error(), `3 unfinished tasks of module "probe"`)
	require.Contains(t, err.Error(), "its definition is missing")
	require.Equal(t, before, b.log.LastSeq(), "a refused recovery writes nothing")

	// Built again: the orphans resume.
	rep, err = Recover(b.opts)
	require.NoError(t, err)
	require.Equal(t, 3, rep.TasksToResume)
	in, err := Inspect(b.opts)
	require.NoError(t, err)
	require.Len(t, in.Tasks, 3)
	for _, tk := range in.Tasks {
		require.Equal(t, "recovery", tk.PauseReason, tk.Id)
		require.Zero(t, tk.NotBefore, tk.Id)
	}
}
