package remote

import (
	"runtime"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The registry of a hub's or host's actor system is slim: a few buckets,
// not protoactor's million-map default, and every process the system
// registered as it started is still found in it.
func TestSlimRegistryKeepsItsProcesses(t *testing.T) {
	heapOf := func(f func()) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		f()
		runtime.GC()
		runtime.ReadMemStats(&after)
		return after.HeapAlloc - before.HeapAlloc
	}
	var sys *actor.ActorSystem
	full := heapOf(func() { sys = actor.NewActorSystem() })
	var ids []string
	for _, bucket := range sys.ProcessRegistry.LocalPIDs.LocalPIDs {
		ids = append(ids, bucket.Keys()...)
	}
	require.NotEmpty(t, ids, "a new system registers processes of its own")

	slimRegistry(sys)
	assert.Len(t, sys.ProcessRegistry.LocalPIDs.LocalPIDs, registryBuckets)
	for _, id := range ids {
		_, ok := sys.ProcessRegistry.GetLocal(id)
		assert.True(t, ok, "process %s lost", id)
	}
	var slim *actor.ActorSystem
	small := heapOf(func() {
		slim = actor.NewActorSystem()
		slimRegistry(slim)
	})
	t.Logf("a new actor system holds %d kB, %d kB with a slim registry", full/1024, small/1024)
	assert.Less(t, small, full/4, "the slim registry is most of a system's memory saved")
	runtime.KeepAlive(sys)
	runtime.KeepAlive(slim)
}
