package pipeline

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"fano/modules"
	"fano/pb"
)

// DecideResponseEnd says an answer ends its task only where NextAction,
// on the state after the answer's events, says done, and then decides
// what DecideCompletion decides (nothing); every valid answer ends its
// task. A module that took the fast path ends in the same state as one
// that asked NextAction and DecideCompletion.
func TestAnswerEndsItsTaskWhenNextActionWouldSayDone(t *testing.T) {
	def, items := writeDef(t, fanout, 6)
	def.Steps[0].LLM.Attempts = 3
	fast, slow := New(Config{Def: def, Items: items}), New(Config{Def: def, Items: items})
	h := newHarness(t, def, items)
	rng := rand.New(rand.NewPCG(3, 4))
	apply := func(evs []*pb.ModuleEvent) {
		t.Helper()
		for _, e := range evs {
			require.NoError(t, fast.Apply(e, h.now))
			require.NoError(t, slow.Apply(e, h.now))
		}
	}
	tasks := slow.Propose(h.now)
	require.Len(t, tasks, 18)
	require.Len(t, fast.Propose(h.now), 18)
	endings, valid, invalid := 0, 0, 0
	for _, task := range tasks {
		for {
			act, err := slow.NextAction(task)
			require.NoError(t, err)
			fastAct, err := fast.NextAction(task)
			require.NoError(t, err)
			require.Equal(t, act, fastAct)
			if act.Kind == modules.ActionDone {
				end, err := slow.DecideCompletion(task, h.now)
				require.NoError(t, err)
				fastEnd, err := fast.DecideCompletion(task, h.now)
				require.NoError(t, err)
				requireSameEvents(t, end, fastEnd)
				apply(end)
				break
			}
			answer := `{"verdict": true}`
			if rng.IntN(2) == 0 {
				answer = `{"verdict": "maybe"}`
			}
			evs, ends, end, err := fast.DecideResponseEnd(task, answer, h.now)
			require.NoError(t, err)
			want, err := slow.DecideResponse(task, answer, h.now)
			require.NoError(t, err)
			requireSameEvents(t, want, evs)
			apply(evs)
			if evs[0].Type == "answer_ok" {
				valid++
				require.True(t, ends, "task %s: a valid answer ends it", task.Id)
			} else {
				invalid++
			}
			if !ends {
				continue
			}
			endings++
			// The slow path, on the applied state; the fast one asks
			// neither.
			next, err := slow.NextAction(task)
			require.NoError(t, err)
			require.Equal(t, modules.ActionDone, next.Kind, "task %s", task.Id)
			wantEnd, err := slow.DecideCompletion(task, h.now)
			require.NoError(t, err)
			requireSameEvents(t, wantEnd, end)
			for _, e := range end {
				require.NoError(t, fast.Apply(e, h.now))
			}
			for _, e := range wantEnd {
				require.NoError(t, slow.Apply(e, h.now))
			}
			break
		}
	}
	require.Positive(t, endings)
	require.Positive(t, invalid)
	require.Equal(t, valid, endings)
	a, err := fast.Snapshot()
	require.NoError(t, err)
	b, err := slow.Snapshot()
	require.NoError(t, err)
	require.Equal(t, b, a, "the same state either way")
	require.Equal(t, slow.Summary(), fast.Summary())
}

func requireSameEvents(t *testing.T, want, got []*pb.ModuleEvent) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		require.True(t, proto.Equal(want[i], got[i]), "event %d: want %v, got %v", i, want[i], got[i])
	}
}
