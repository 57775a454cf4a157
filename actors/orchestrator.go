package actors

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"fano/pb"
)

// orchestrator is the root supervisor: it spawns the scheduler, the
// allocator and a host per module and per backend, and restarts a child
// that panics (OneForOne, with a limit; see Start). A restarted child
// rebuilds its state from the WAL. The executors, one per running task,
// are started by the scheduler (they are processes, not actors: see
// newExecutor) and stopped here with the children.
type orchestrator struct {
	sys   *System
	ready chan struct{}
}

func (o *orchestrator) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		o.spawnChildren(ctx)
		if o.ready != nil {
			close(o.ready)
			o.ready = nil
		}
	case *actor.Stopping:
		o.sys.executors.each(func(e *executor) { e.Stop(nil) })
	case *pb.CancelTask:
		// The scheduler cancels a run itself (it started the executor);
		// this is for whoever else asks. None running: answered all the same.
		o.sys.executors.each(func(e *executor) {
			if e.taskID == m.TaskId {
				e.Receive(&pb.CancelRun{Reason: m.Reason})
			}
		})
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
		calls := s.gateways[b.Name()]
		spawn(s.gatewayPIDs[b.Name()], "gateway-"+b.Name(), func() actor.Actor { return &gatewayHost{sys: s, calls: calls} })
	}
	for _, m := range s.opts.Modules {
		offers := s.moduleOffers[m.Name()]
		spawn(s.modulePIDs[m.Name()], "module-"+m.Name(), func() actor.Actor { return &moduleHost{sys: s, mod: m, offers: offers} })
	}
	// Last: its first publish starts the scheduler's dispatching.
	heir := &slotHeir{}
	spawn(s.allocatorPID, "allocator", func() actor.Actor { return &allocatorActor{sys: s, heir: heir} })
}
