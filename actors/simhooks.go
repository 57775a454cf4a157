package actors

import "github.com/asynkron/protoactor-go/actor"

// QueuedMessages is the number of messages waiting in the mailboxes of the
// system's own actors (orchestrator, scheduler, allocator, modules,
// gateways): `fano simulate` advances its virtual clock only when none
// wait. Unlike Mailboxes it reads only those few, so it is cheap enough to
// call thousands of times a second.
func (s *System) QueuedMessages() int {
	select {
	case <-s.dead:
		return 0
	default:
	}
	if s.as == nil {
		return 0
	}
	n := 0
	count := func(pid *actor.PID) {
		if pid == nil {
			return
		}
		if p, ok := s.as.ProcessRegistry.GetLocal(pid.Id); ok {
			if ap, ok := p.(*actor.ActorProcess); ok {
				n += max(mailboxDepth(ap), 0)
			}
		}
	}
	count(s.orchestratorPID)
	count(s.schedulerPID)
	count(s.allocatorPID)
	for _, pid := range s.modulePIDs {
		count(pid)
	}
	for _, pid := range s.gatewayPIDs {
		count(pid)
	}
	return n
}
