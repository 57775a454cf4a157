package remote

import (
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// Names of the inboxes each side reaches the other's requests and
// answers at (beside the actors, which keep the registration, pings and
// link watching).
const (
	hubInboxName  = "fano-hub-answers"
	hostInboxName = "fano-gateway-calls"
)

// inbox is a process under a well-known name whose messages are handled
// on the goroutine that delivers them (a link's reader), with no mailbox
// between: the path each request and each answer takes. Its handler
// must not block.
type inbox struct {
	handle func(msg any, sender *actor.PID)
}

var _ actor.Process = (*inbox)(nil)

func (p *inbox) SendUserMessage(_ *actor.PID, m any) {
	_, msg, sender := actor.UnwrapEnvelope(m)
	p.handle(msg, sender)
}

func (p *inbox) SendSystemMessage(*actor.PID, any) {}

func (p *inbox) Stop(*actor.PID) {}

// addInbox registers handle under name on sys.
func addInbox(sys *actor.ActorSystem, name string, handle func(msg any, sender *actor.PID)) (*actor.PID, bool) {
	return sys.ProcessRegistry.Add(&inbox{handle: handle}, name)
}

// warmPool runs short work on goroutines that outlive it: a new
// goroutine starts with a small stack and grows it (copying) as a
// backend's call goes deep, on every call. Up to maxParked goroutines
// wait for more work; the rest end.
type warmPool struct {
	maxParked int32
	parked    atomic.Int32
	work      chan func() // unbuffered: a send succeeds only into a waiting goroutine
}

func newWarmPool(maxParked int32) *warmPool {
	return &warmPool{maxParked: maxParked, work: make(chan func())}
}

// Go runs fn on a waiting goroutine, or on a new one if none waits.
func (w *warmPool) Go(fn func()) {
	select {
	case w.work <- fn:
	default:
		go w.run(fn)
	}
}

func (w *warmPool) run(fn func()) {
	for {
		fn()
		fn = nil // what it held is garbage while the goroutine waits
		if w.parked.Add(1) > w.maxParked {
			w.parked.Add(-1)
			return
		}
		fn = <-w.work
		w.parked.Add(-1)
	}
}
