package actors

import (
	"context"
	"fmt"

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
	// calls are the running calls by request id. The map outlives an
	// instance that fails (the orchestrator's producer hands it on), so a
	// call started before a restart can still be cancelled.
	calls map[uint64]context.CancelCauseFunc
}

func (g *gatewayHost) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Stopping:
		for _, cancel := range g.calls {
			cancel(errShutdown)
		}
	case *pb.LLMRequest:
		callCtx, cancel := context.WithCancelCause(withWaitCounter(context.Background(), &g.sys.callsWaiting))
		g.calls[m.RequestId] = cancel
		self, sender := ctx.Self(), ctx.Sender()
		// On a warm goroutine: a call goes deep (the backend, its
		// limiter, the answer's encoding), and a new goroutine grew its
		// stack for every call.
		warmDispatcher.Go(func() {
			resp, err := g.call(callCtx, llmRequestFromWire(m))
			cancel(nil)
			g.sys.asks.respondLater(sender, llmResponseToWire(m.RequestId, g.backend.Name(), resp, err))
			g.sys.root.Send(self, &pb.LLMCallDone{RequestId: m.RequestId})
		})
	case *pb.LLMCancel:
		if cancel, ok := g.calls[m.RequestId]; ok {
			cancel(causeFromWire(m.Cause))
		}
	case *pb.LLMCallDone:
		delete(g.calls, m.RequestId)
	case *pb.BackendHealthQuery:
		st := &pb.BackendHealthReply{Name: g.backend.Name(), Running: int32(len(g.calls)), Healthy: true}
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
