package actors

import (
	"reflect"
	"sync"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"
)

// QueuedMessages is the number of messages waiting in the mailboxes of the
// system's own actors (orchestrator, scheduler, allocator, modules,
// gateways): `fano simulate` advances its virtual clock only when none
// wait. Unlike Mailboxes it reads only those few, through mailboxes
// looked up once, so it is cheap enough to call thousands of times a
// second.
func (s *System) QueuedMessages() int {
	select {
	case <-s.dead:
		return 0
	default:
	}
	if s.as == nil {
		return 0
	}
	v, _ := simMailboxes.Load(s)
	boxes, _ := v.([]actor.Mailbox)
	if boxes == nil {
		boxes = s.ownMailboxes()
		simMailboxes.Store(s, boxes)
	}
	n := 0
	for _, mb := range boxes {
		n += mb.UserMessageCount()
	}
	return n
}

// simMailboxes caches each system's mailboxes (a system's actors keep
// their mailbox across restarts by their supervisor).
var simMailboxes sync.Map // *System -> []actor.Mailbox

// ForgetQueuedMessages drops the cache of a stopped system.
func (s *System) ForgetQueuedMessages() { simMailboxes.Delete(s) }

func (s *System) ownMailboxes() []actor.Mailbox {
	pids := []*actor.PID{s.orchestratorPID, s.schedulerPID, s.allocatorPID}
	for _, pid := range s.modulePIDs {
		pids = append(pids, pid)
	}
	for _, pid := range s.gatewayPIDs {
		pids = append(pids, pid)
	}
	var out []actor.Mailbox
	for _, pid := range pids {
		if pid == nil {
			continue
		}
		p, ok := s.as.ProcessRegistry.GetLocal(pid.Id)
		if !ok {
			continue
		}
		ap, ok := p.(*actor.ActorProcess)
		if !ok {
			continue
		}
		if mb := mailboxOf(ap); mb != nil {
			out = append(out, mb)
		}
	}
	return out
}

// mailboxOf reads an actor's mailbox (see mailboxDepth); nil if
// protoactor's layout changed.
func mailboxOf(ap *actor.ActorProcess) (mb actor.Mailbox) {
	defer func() {
		if recover() != nil {
			mb = nil
		}
	}()
	f := reflect.ValueOf(ap).Elem().FieldByName("mailbox")
	if !f.IsValid() || f.Kind() != reflect.Interface {
		return nil
	}
	v := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
	mb, _ = v.Interface().(actor.Mailbox)
	return mb
}
