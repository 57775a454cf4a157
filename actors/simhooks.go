package actors

// QueuedMessages is the number of user messages waiting in (or being
// handled from) the mailboxes of the system's own actors: orchestrator,
// scheduler, allocator, module hosts and gateway hosts, not executors.
// `fano simulate` advances its virtual clock only when none wait. It reads
// the counters the mailbox middleware keeps (mailbox.go), so it sends no
// message and is cheap enough to call thousands of times a second.
func (s *System) QueuedMessages() int {
	select {
	case <-s.dead:
		return 0
	default:
	}
	n := s.queued(s.orchestratorPID.GetId()) + s.queued(s.schedulerPID.GetId()) + s.queued(s.allocatorPID.GetId())
	for _, pid := range s.modulePIDs {
		n += s.queued(pid.GetId())
	}
	for _, pid := range s.gatewayPIDs {
		n += s.queued(pid.GetId())
	}
	return n
}

func (s *System) queued(id string) int {
	if v, ok := s.mailboxes.Load(id); ok {
		return int(v.(*mailboxCount).n.Load())
	}
	return 0
}
