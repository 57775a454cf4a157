package probe

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"fano/modules"
	"fano/pb"
)

// DecideResponseEnd says an answer ends its task exactly when NextAction,
// on the state after the answer's events, says the task is done, and then
// decides what DecideCompletion decides there; its events are
// DecideResponse's.
func TestAnswerEndsItsTaskWhenNextActionWouldSayDone(t *testing.T) {
	now := time.Unix(1767607200, 0)
	for _, turns := range []int{1, 2, 3} {
		fast, slow := New(Config{NoPropose: true, Turns: turns}), New(Config{NoPropose: true, Turns: turns})
		task := &pb.Task{Id: "probe/exploration/q1", Module: Name, Context: map[string]string{"question": "why?"}}
		for turn := range turns {
			evs, ends, end, err := fast.DecideResponseEnd(task, "because", now)
			require.NoError(t, err)
			want, err := slow.DecideResponse(task, "because", now)
			require.NoError(t, err)
			requireSameEvents(t, want, evs)
			for _, e := range evs {
				require.NoError(t, fast.Apply(e, now))
				require.NoError(t, slow.Apply(e, now))
			}
			act, err := slow.NextAction(task)
			require.NoError(t, err)
			require.Equal(t, act.Kind == modules.ActionDone, ends, "%d turns, answer %d", turns, turn+1)
			if ends {
				wantEnd, err := slow.DecideCompletion(task, now)
				require.NoError(t, err)
				require.NotEmpty(t, wantEnd)
				requireSameEvents(t, wantEnd, end)
			}
		}
	}
	// An empty answer fails validation, as DecideResponse's does.
	_, ends, _, err := New(Config{NoPropose: true, Turns: 1}).DecideResponseEnd(&pb.Task{Id: "probe/exploration/q2"}, "", now)
	require.True(t, modules.IsValidation(err))
	require.False(t, ends)
}

func requireSameEvents(t *testing.T, want, got []*pb.ModuleEvent) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		require.True(t, proto.Equal(want[i], got[i]), "event %d: want %v, got %v", i, want[i], got[i])
	}
}
