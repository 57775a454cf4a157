package actors

import (
	"context"
	"fmt"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"fano/gateway"
	"fano/pb"
)

// gatewayHost is the actor of one backend: it answers health queries and
// ends the backend's running calls when it stops. An executor starts and
// cancels its calls itself (gatewayCalls), not through this mailbox: that
// was one goroutine woken more a request, on the path every task waits
// on. Calls run in their own goroutines, each under a context the caller
// cancels, so the host keeps answering status while a request runs; the
// allocator's slots bound how many run at once.
type gatewayHost struct {
	sys   *System
	calls *gatewayCalls
}

// gatewayCalls runs one backend's calls. It is safe from any goroutine,
// and outlives a host instance that fails (the orchestrator's producer
// hands it on), so a call started before a restart can still be
// cancelled.
type gatewayCalls struct {
	sys     *System
	backend gateway.Backend
	running runningCalls
}

// start runs req as call id on a warm goroutine and answers replyTo with
// its pb.LLMResponse. The call is running (cancel finds it) once start
// returns. req is handed over whole, with its intent (IntentSeq), which
// the wire form of a request does not carry.
func (c *gatewayCalls) start(id uint64, req gateway.Request, replyTo *actor.PID) {
	callCtx, cancel := context.WithCancelCause(c.sys.callBase)
	c.running.add(id, cancel)
	if later, ok := c.backend.(answersLater); ok {
		// No goroutine of ours waits while the answer is on its way.
		c.sendThen(later, callCtx, req, func(resp gateway.Response, err error) {
			cancel(nil)
			c.running.done(id)
			c.sys.asks.respondLater(replyTo, llmResponseToWire(id, c.backend.Name(), resp, err))
		})
		return
	}
	// On a warm goroutine: a call goes deep (the backend, its limiter,
	// the answer's encoding), and a new goroutine grew its stack for
	// every call.
	warmDispatcher.Go(func() {
		resp, err := c.call(callCtx, req)
		cancel(nil)
		c.running.done(id)
		c.sys.asks.respondLater(replyTo, llmResponseToWire(id, c.backend.Name(), resp, err))
	})
}

// answersLater is a backend that tells its outcome through a callback
// instead of blocking a goroutine until it has it: a gateway host's,
// whose answers arrive on the link's reader.
type answersLater interface {
	SendThen(ctx context.Context, req gateway.Request, done func(gateway.Response, error))
}

// sendThen runs req on an answersLater backend and tells done the outcome
// as call would return it.
func (c *gatewayCalls) sendThen(b answersLater, ctx context.Context, req gateway.Request, done func(gateway.Response, error)) {
	name := c.backend.Name()
	var once sync.Once
	finish := func(resp gateway.Response, err error) {
		once.Do(func() {
			resp, err = c.outcome(ctx, resp, err)
			done(resp, err)
		})
	}
	defer func() {
		if r := recover(); r != nil {
			finish(gateway.Response{}, gateway.Permanent(name, "backend panicked: %v", r))
		}
	}()
	b.SendThen(ctx, req, finish)
}

// runningCalls holds the cancel of each running call by request id. A
// call's goroutine takes its own out as it ends, with no message to the
// host (one a call fewer).
type runningCalls struct {
	mu   sync.Mutex
	byID map[uint64]context.CancelCauseFunc
}

func (c *runningCalls) add(id uint64, cancel context.CancelCauseFunc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID == nil {
		c.byID = map[uint64]context.CancelCauseFunc{}
	}
	c.byID[id] = cancel
}

func (c *runningCalls) done(id uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byID, id)
}

// cancel cancels one call, if it is running.
func (c *runningCalls) cancel(id uint64, cause error) {
	c.mu.Lock()
	cancel, ok := c.byID[id]
	c.mu.Unlock()
	if ok {
		cancel(cause)
	}
}

func (c *runningCalls) cancelAll(cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cancel := range c.byID {
		cancel(cause)
	}
}

func (c *runningCalls) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byID)
}

func (g *gatewayHost) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Stopping:
		g.calls.running.cancelAll(errShutdown)
	case *pb.BackendHealthQuery:
		backend := g.calls.backend
		st := &pb.BackendHealthReply{Name: backend.Name(), Running: int32(g.calls.running.count()), Healthy: true}
		if err := backend.Health(context.Background()); err != nil {
			st.Healthy, st.Error = false, err.Error()
		}
		respond(ctx, st)
	}
}

// call runs one request; a panic in a backend becomes a permanent error
// of that request instead of taking the process down.
func (c *gatewayCalls) call(ctx context.Context, req gateway.Request) (resp gateway.Response, err error) {
	name := c.backend.Name()
	defer func() {
		if r := recover(); r != nil {
			err = gateway.Permanent(name, "backend panicked: %v", r)
		}
	}()
	resp, err = c.backend.Send(ctx, req)
	return c.outcome(ctx, resp, err)
}

// outcome is what a call returns for the backend's resp and err: a cut
// answer is an error, and the cause of a cancel is named.
func (c *gatewayCalls) outcome(ctx context.Context, resp gateway.Response, err error) (gateway.Response, error) {
	name := c.backend.Name()
	if err == nil {
		// A cut or failed answer is never recorded: it is a
		// transient fault of the backend, retried like one.
		if err = gateway.Whole(name, resp); err != nil {
			resp = gateway.Response{}
		}
	}
	if err != nil && ctx.Err() != nil && gateway.Kind(err) != "cancelled" && gateway.Kind(err) != "transient" {
		err = fmt.Errorf("%s: %w", name, context.Cause(ctx))
	}
	return resp, err
}
