package actors

import (
	"context"
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
	executors map[string]*actor.PID // task id -> executor
}

func (o *orchestrator) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		o.executors = map[string]*actor.PID{}
		o.spawnChildren(ctx)
		if o.ready != nil {
			close(o.ready)
			o.ready = nil
		}
	case *pb.StartExecutor:
		o.spawnExecutor(m)
	case *pb.TaskComplete:
		delete(o.executors, m.TaskId)
	case *actor.Stopping:
		// The executors are no children of the orchestrator's (see
		// startExecutor): stopped here, as its children are.
		for _, pid := range o.executors {
			o.sys.root.Stop(pid)
		}
	case *pb.CancelTask:
		// Not there: it finished between the scheduler's look and ours.
		if pid, ok := o.executors[m.TaskId]; ok {
			ctx.Send(pid, &pb.CancelRun{Reason: m.Reason})
		}
		respond(ctx, &pb.Done{})
	}
}

func (o *orchestrator) spawnChildren(ctx actor.Context) {
	s := o.sys
	// The PIDs were fixed in Start; spawning must produce exactly them.
	spawn := func(want *actor.PID, name string, producer actor.Producer) {
		props, count := counted(producer)
		pid, err := ctx.SpawnNamed(props, name)
		if err != nil || pid.Id != want.Id {
			panic(fmt.Errorf("actors: spawn %s: got %v, %v", name, pid, err)) // only a bug gets here
		}
		s.mailboxes.track(pid.Id, count)
	}
	heirs := &schedulerHeir{}
	spawn(s.schedulerPID, "scheduler", func() actor.Actor { return &schedulerActor{sys: s, heir: heirs} })
	for _, b := range s.opts.Backends {
		calls := map[uint64]context.CancelCauseFunc{}
		spawn(s.gatewayPIDs[b.Name()], "gateway-"+b.Name(), func() actor.Actor { return &gatewayHost{sys: s, backend: b, calls: calls} })
	}
	for _, m := range s.opts.Modules {
		spawn(s.modulePIDs[m.Name()], "module-"+m.Name(), func() actor.Actor { return &moduleHost{sys: s, mod: m} })
	}
	// Last: its first publish starts the scheduler's dispatching.
	heir := &slotHeir{}
	spawn(s.allocatorPID, "allocator", func() actor.Actor { return &allocatorActor{sys: s, heir: heir} })
}

func (o *orchestrator) spawnExecutor(m *pb.StartExecutor) {
	o.executors[m.Task.Id] = o.sys.execEnv.startExecutor(m.Task, m.Run)
}
