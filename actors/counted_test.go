package actors

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/metrics"
	"fano/modules/probe"
)

// Each checkpoint written is published, owner by owner, for the metrics to
// count (fano_checkpoints counts writes, not the owners that have one).
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
	for range 2 {
		require.NoError(t, sys.Checkpoint())
	}
	unsubscribe()
	close(owners)
	count := map[string]int{}
	for o := range owners {
		count[o]++
	}
	assert.Equal(t, 2, count[ownerScheduler], "%v", count)
	assert.Equal(t, 2, count[ownerAllocator], "%v", count)
}
