package actors

import (
	"github.com/asynkron/protoactor-go/actor"
	cmap "github.com/orcaman/concurrent-map"
)

// registryTables is how many concurrent maps the process registry spreads
// its ids over (each of cmap.SHARD_COUNT shards). protoactor makes 1,024,
// that is 32,768 Go maps; a Go map keeps its buckets when emptied, and
// with an id for every executor and every ask passing through, each of
// them ends up holding one: 12 MB after 20k tasks, for a registry that
// holds a few hundred live processes at a time. 16 tables (512 maps) keep
// the locks spread over more shards than there are cores.
const registryTables = 16

// shrinkRegistry gives the actor system a registry of registryTables
// tables, moving over what it registered while it was made (the event
// stream, the dead letters). It must run right after NewActorSystem,
// before anything is spawned or asked.
func shrinkRegistry(as *actor.ActorSystem, tables int) {
	old := as.ProcessRegistry.LocalPIDs
	sm := &actor.SliceMap{LocalPIDs: make([]cmap.ConcurrentMap, tables)}
	for i := range sm.LocalPIDs {
		sm.LocalPIDs[i] = cmap.New()
	}
	for _, table := range old.LocalPIDs {
		for id, proc := range table.Items() {
			sm.GetBucket(id).Set(id, proc)
		}
	}
	as.ProcessRegistry.LocalPIDs = sm
}
