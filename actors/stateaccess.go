package actors

import (
	"time"

	"context"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"fano/actors/allocator"
	"fano/actors/scheduler"
	"fano/pb"
)

// stateAccess is how the facade reaches the state of the scheduler and
// the allocator: it waits until the owner has handled every message sent
// to it before (barrier), then reads its state between two of its
// messages under the owner's desk guard; and it has the scheduler write
// task events (and a module host end a task) like any other request. The
// live instances are stored by the actors as they start; the methods are
// safe from any goroutine that is not the owner's own.
type stateAccess struct {
	asks                       *asker
	desks                      *desks
	schedulerPID, allocatorPID *actor.PID
	modulePIDs                 map[string]*actor.PID
	// scheduler is the live scheduler instance (see
	// schedulerActor.current); allocator the live allocator's.
	scheduler atomic.Pointer[schedulerActor]
	allocator atomic.Pointer[allocatorActor]
}

// persistTask has the scheduler write and apply task events; with
// wantTask it answers with the task as it is after them.
func (sa *stateAccess) persistTask(taskID string, events []*pb.Event, wantTask bool) ([]uint64, *pb.Task, error) {
	r, err := request[*pb.TaskEventsReply](sa.asks, context.Background(), sa.schedulerPID, &pb.TaskEvents{TaskId: taskID, Events: events, WantTask: wantTask})
	if err != nil {
		return nil, nil, err
	}
	return r.Seqs, r.Task, errorFromWire(r.Error)
}

func (sa *stateAccess) moduleEnd(t *pb.Task, failed bool, reason string) error {
	return sa.asks.requestDone(sa.modulePIDs[t.Module], &pb.ModuleEnd{Task: proto.Clone(t).(*pb.Task), Failed: failed, Reason: reason})
}

// barrier returns once pid has handled every message sent to it before.
func (sa *stateAccess) barrier(pid *actor.PID) error {
	_, err := request[*pb.BarrierReply](sa.asks, context.Background(), pid, &pb.Barrier{})
	return err
}

// withScheduler runs fn on the scheduler's state between two of its
// messages, after every message sent to it before.
func (sa *stateAccess) withScheduler(fn func(*scheduler.State)) {
	if sa.barrier(sa.schedulerPID) != nil {
		return
	}
	g := &sa.desks.desk(ownerScheduler).guard
	g.Lock()
	defer g.Unlock()
	if a := sa.scheduler.Load(); a != nil && a.state != nil {
		fn(a.state)
	}
}

// allocatorStatus is every backend's recorded state as the allocator's
// book holds it now, read between two of its messages without a round
// trip (the tick's sweep: a figure a message old is good enough).
func (sa *stateAccess) allocatorStatus(now time.Time) []allocator.BackendStatus {
	g := &sa.desks.desk(ownerAllocator).guard
	g.Lock()
	defer g.Unlock()
	if a := sa.allocator.Load(); a != nil && a.book != nil {
		return a.book.Status(now)
	}
	return nil
}

// withAllocator runs fn on the allocator's book between two of its
// messages, after every message sent to it before.
func (sa *stateAccess) withAllocator(fn func(*allocator.Book)) {
	if sa.barrier(sa.allocatorPID) != nil {
		return
	}
	g := &sa.desks.desk(ownerAllocator).guard
	g.Lock()
	defer g.Unlock()
	if a := sa.allocator.Load(); a != nil && a.book != nil {
		fn(a.book)
	}
}
