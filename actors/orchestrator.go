package actors

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"fano/pb"
)

// orchestrator is the root supervisor: it spawns the scheduler, the
// allocator, a host per module and per backend, and one executor per
// running task, and restarts a child that panics (OneForOne, with a limit;
// see Start). A restarted child rebuilds its state from the WAL.
type orchestrator struct {
	sys       *System
	ready     chan struct{}
	executors map[string]*executor // task id -> its running executor
}

func (o *orchestrator) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		o.executors = map[string]*executor{}
		o.spawnChildren(ctx)
		if o.ready != nil {
			close(o.ready)
			o.ready = nil
		}
	case *startExecutor:
		o.spawnExecutor(ctx, m.task)
	case *executorDone:
		delete(o.executors, m.taskID)
	case *cancelTask:
		e, ok := o.executors[m.id]
		if !ok {
			// It finished between the scheduler's look and ours.
			m.reply <- nil
			return
		}
		e.stop(m.reason)
		m.reply <- nil
	case *actor.Stopping:
		for _, e := range o.executors {
			e.stop(errShutdown.Error())
		}
	}
}

func (o *orchestrator) spawnChildren(ctx actor.Context) {
	s := o.sys
	// The PIDs were fixed in Start; spawning must produce exactly them.
	spawn := func(want *actor.PID, name string, producer actor.Producer) {
		pid, err := ctx.SpawnNamed(actor.PropsFromProducer(producer), name)
		if err != nil || pid.Id != want.Id {
			panic(fmt.Errorf("actors: spawn %s: got %v, %v", name, pid, err)) // only a bug gets here
		}
	}
	spawn(s.schedulerPID, "scheduler", func() actor.Actor { return &schedulerActor{sys: s} })
	for _, b := range s.opts.Backends {
		spawn(s.gatewayPIDs[b.Name()], "gateway-"+b.Name(), func() actor.Actor { return &gatewayHost{sys: s, backend: b} })
	}
	for _, m := range s.opts.Modules {
		spawn(s.modulePIDs[m.Name()], "module-"+m.Name(), func() actor.Actor { return &moduleHost{sys: s, mod: m} })
	}
	// Last: its first publish starts the scheduler's dispatching.
	spawn(s.allocatorPID, "allocator", func() actor.Actor { return &allocatorActor{sys: s} })
}

func (o *orchestrator) spawnExecutor(ctx actor.Context, t *pb.Task) {
	s := o.sys
	e := &executor{sys: s, task: t}
	o.executors[t.Id] = e
	e.start()
}
