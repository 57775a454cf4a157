package actors

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/metrics"
	"fano/modules/probe"
)

// Each checkpoint written is published, owner by owner, for the metrics to
// count (fano_checkpoints counts writes, not the owners that have one); a
// checkpoint of an owner with nothing applied since its last is not
// written again.
func TestCheckpointsArePublished(t *testing.T) {
	b := setup(t, setupOpts{probe: probe.Config{Questions: questions(1), Turns: 1}, memory: true})
	sys := b.start()
	b.waitCompleted(1)
	owners := make(chan string, 16)
	unsubscribe := sys.Subscribe(func(n Notice) {
		if u := n.Update; u != nil && u.Component == metrics.UpdateWAL && u.UpdateType == metrics.UpdateCheckpoint {
			owners <- u.Data["owner"]
		}
	})
	count := func() map[string]int {
		out := map[string]int{}
		for {
			select {
			case o := <-owners:
				out[o]++
			default:
				return out
			}
		}
	}
	require.NoError(t, sys.Checkpoint())
	first := count()
	assert.Equal(t, 1, first[ownerScheduler], "%v", first)
	assert.Equal(t, 1, first[ownerAllocator], "%v", first)
	require.NoError(t, sys.Checkpoint())
	second := count()
	assert.Zero(t, second[ownerScheduler], "nothing applied since the last: %v", second)
	assert.Zero(t, second[ownerAllocator], "nothing applied since the last: %v", second)

	// Something applied: written again.
	require.NoError(t, sys.PauseBackend("chatgpt", "test", true))
	require.NoError(t, sys.Checkpoint())
	unsubscribe()
	third := count()
	assert.Equal(t, 1, third[ownerAllocator], "%v", third)
}
