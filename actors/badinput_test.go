package actors

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"fano/modules/probe"
	"fano/pb"
	"fano/wal"
)

// A task of an unknown module or type is refused with a reason naming it,
// and nothing is queued.
func TestSubmitOfUnknownModuleOrTypeIsRefused(t *testing.T) {
	b := setup(t, setupOpts{probe: probe.Config{NoPropose: true}})
	sys := b.start()
	for _, tk := range []*pb.Task{
		{Id: "ghost/exploration/x", Module: "ghost", TaskType: "exploration", Subject: "x"},
		{Id: "probe/teleport/x", Module: "probe", TaskType: "teleport", Subject: "x"},
	} {
		r, err := sys.Submit(tk)
		require.NoError(t, err)
		require.False(t, r.Accepted)
		require.Contains(t, r.Reason, tk.Id)
		_, ok := sys.Task(tk.Id)
		require.False(t, ok)
	}
}

// A WAL entry that does not decode stops recovery with its sequence
// number; nothing is skipped in silence.
func TestRecoveryNamesAnUndecodableEntry(t *testing.T) {
	b := setup(t, setupOpts{probe: probe.Config{NoPropose: true}})
	seqs, err := b.log.Append(context.Background(), wal.Entry{Owner: ownerScheduler, Type: "task_teleported", Payload: []byte{0xff, 0xff, 0xff}})
	require.NoError(t, err)
	_, err = Recover(b.opts)
	require.Error(t, err)
	require.Contains(t, err.Error(), "wal entry "+itoa(seqs[0]))

	// An event of a type this build does not know (an empty body) too.
	unknown, _ := proto.Marshal(&pb.Event{At: 1})
	seqs, err = b.log.Append(context.Background(), wal.Entry{Owner: ownerAllocator, Type: "from_the_future", Payload: unknown})
	require.NoError(t, err)
	b2 := setup(t, setupOpts{probe: probe.Config{NoPropose: true}})
	b2.opts.Log = b.log
	_, err = Recover(b2.opts)
	require.Error(t, err)
}

// Entries of an owner nobody here knows (a module not configured) are
// kept and reported, not applied and not dropped.
func TestRecoveryReportsEntriesOfUnknownOwners(t *testing.T) {
	b := setup(t, setupOpts{probe: probe.Config{NoPropose: true}})
	ev, _ := proto.Marshal(&pb.Event{At: 1, Body: &pb.Event_ModuleEvent{ModuleEvent: &pb.ModuleEvent{Module: "ghost", Type: "x"}}})
	_, err := b.log.Append(context.Background(), wal.Entry{Owner: "module/ghost", Type: "module_event", Payload: ev})
	require.NoError(t, err)
	rep, err := Recover(b.opts)
	require.NoError(t, err)
	require.Len(t, rep.Problems, 1)
	require.Contains(t, rep.Problems[0], `"module/ghost"`)
}

// A checkpoint that does not decode is an error naming its owner and seq.
func TestRecoveryNamesAnUndecodableCheckpoint(t *testing.T) {
	b := setup(t, setupOpts{probe: probe.Config{NoPropose: true}})
	_, err := b.log.Append(context.Background(), wal.Entry{Owner: ownerScheduler, Type: "x", Payload: mustMarshal(t, &pb.Event{At: 1, Body: &pb.Event_TaskSubmitted{TaskSubmitted: &pb.TaskSubmitted{Task: benchTask(1)}}})})
	require.NoError(t, err)
	require.NoError(t, b.log.SaveCheckpoint(ownerScheduler, 1, []byte{0xff, 0x01, 0x02}))
	_, err = Recover(b.opts)
	require.Error(t, err)
	require.Contains(t, err.Error(), "checkpoint of scheduler at seq 1")
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	data, err := proto.Marshal(m)
	require.NoError(t, err)
	return data
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
