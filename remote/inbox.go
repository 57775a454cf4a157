package remote

import (
	"fmt"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"
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
// must not block. A handler that panics loses that message only (and
// says so through failed), not the link or the process.
type inbox struct {
	handle func(msg any, sender *actor.PID)
	failed func(msg any, panicked any)
}

var _ actor.Process = (*inbox)(nil)

func (p *inbox) SendUserMessage(_ *actor.PID, m any) {
	_, msg, sender := actor.UnwrapEnvelope(m)
	defer func() {
		if r := recover(); r != nil {
			p.failed(msg, r)
		}
	}()
	p.handle(msg, sender)
}

func (p *inbox) SendSystemMessage(*actor.PID, any) {}

func (p *inbox) Stop(*actor.PID) {}

// addInbox registers handle under name on sys; a panic in it is told
// to logger.
func addInbox(sys *actor.ActorSystem, name string, logger zerolog.Logger, handle func(msg any, sender *actor.PID)) (*actor.PID, bool) {
	failed := func(msg any, panicked any) {
		logger.Error().Str("event", "remote.inbox_panic").Str("inbox", name).Str("message", fmt.Sprintf("%T", msg)).
			Msg(fmt.Sprintf("a message to %s was dropped: its handling panicked: %v", name, panicked))
	}
	return sys.ProcessRegistry.Add(&inbox{handle: handle, failed: failed}, name)
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

// GoEach runs each of fns on a goroutine of its own, each goroutine
// handing the next fn on before it runs its own. A goroutine made
// runnable goes first when the one that readied it blocks, but only the
// last one readied does: started all at once, every fn but the last
// would wait behind whatever else the process has to run; handed on,
// they start one after another.
//
// then (nil: none) runs once every fn has returned or blocked: the last
// goroutine hands it on before it runs its fn.
func (w *warmPool) GoEach(fns []func(), then func()) {
	if len(fns) == 0 {
		if then != nil {
			then()
		}
		return
	}
	w.Go(func() { w.chain(fns, then) })
}

func (w *warmPool) chain(fns []func(), then func()) {
	switch {
	case len(fns) > 1:
		rest := fns[1:]
		w.Go(func() { w.chain(rest, then) })
	case then != nil:
		w.Go(then)
	}
	fns[0]()
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
