package actors

import (
	"context"
	"fmt"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"fano/gateway"
	"fano/pb"
)

// gatewayHost wraps one backend. Calls run in their own goroutines, each
// under a context the host cancels on the caller's pb.LLMCancel, so the
// host keeps answering status while a request runs; the allocator's slots
// bound how many run at once.
type gatewayHost struct {
	sys     *System
	backend gateway.Backend
	// calls are the running calls. They outlive an instance that fails
	// (the orchestrator's producer hands them on), so a call started
	// before a restart can still be cancelled.
	calls *runningCalls
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
	switch m := ctx.Message().(type) {
	case *actor.Stopping:
		g.calls.cancelAll(errShutdown)
	case *pb.LLMRequest:
		callCtx, cancel := context.WithCancelCause(g.sys.callBase)
		g.calls.add(m.RequestId, cancel)
		sender := ctx.Sender()
		// On a warm goroutine: a call goes deep (the backend, its
		// limiter, the answer's encoding), and a new goroutine grew its
		// stack for every call.
		warmDispatcher.Go(func() {
			resp, err := g.call(callCtx, llmRequestFromWire(m))
			cancel(nil)
			g.calls.done(m.RequestId)
			g.sys.asks.respondLater(sender, llmResponseToWire(m.RequestId, g.backend.Name(), resp, err))
		})
	case *pb.LLMCancel:
		g.calls.cancel(m.RequestId, causeFromWire(m.Cause))
	case *pb.BackendHealthQuery:
		st := &pb.BackendHealthReply{Name: g.backend.Name(), Running: int32(g.calls.count()), Healthy: true}
		if err := g.backend.Health(context.Background()); err != nil {
			st.Healthy, st.Error = false, err.Error()
		}
		respond(ctx, st)
	}
}

// call runs one request; a panic in a backend becomes a permanent error
// of that request instead of taking the process down.
func (g *gatewayHost) call(ctx context.Context, req gateway.Request) (resp gateway.Response, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = gateway.Permanent(g.backend.Name(), "backend panicked: %v", r)
		}
	}()
	resp, err = g.backend.Send(ctx, req)
	if err != nil && ctx.Err() != nil && gateway.Kind(err) != "cancelled" && gateway.Kind(err) != "transient" {
		err = fmt.Errorf("%s: %w", g.backend.Name(), context.Cause(ctx))
	}
	return resp, err
}
