package actors

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"fano/gateway"
)

// gatewayHost wraps one backend. Calls run in their own goroutines bound
// to the caller's context, so the host keeps answering status while a
// request runs; the allocator's slots bound how many run at once.
type gatewayHost struct {
	sys     *System
	backend gateway.Backend
	running int
}

type gatewayCallDone struct{}

type gatewayStatus struct {
	reply chan gatewayState
}

type gatewayState struct {
	Name    string
	Running int
	Healthy bool
	Error   string
}

func (g *gatewayHost) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *gatewayCall:
		g.running++
		self := ctx.Self()
		go func() {
			resp, err := g.call(m)
			m.reply <- gatewayResult{resp: resp, err: err}
			g.sys.root.Send(self, &gatewayCallDone{})
		}()
	case *gatewayCallDone:
		g.running--
	case *gatewayStatus:
		st := gatewayState{Name: g.backend.Name(), Running: g.running, Healthy: true}
		if err := g.backend.Health(context.Background()); err != nil {
			st.Healthy, st.Error = false, err.Error()
		}
		m.reply <- st
	}
}

// call runs one request; a panic in a backend becomes a permanent error
// of that request instead of taking the process down.
func (g *gatewayHost) call(m *gatewayCall) (resp gateway.Response, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = gateway.Permanent(g.backend.Name(), "backend panicked: %v", r)
		}
	}()
	resp, err = g.backend.Send(m.ctx, m.req)
	if err != nil && m.ctx.Err() != nil && gateway.Kind(err) != "cancelled" && gateway.Kind(err) != "transient" {
		err = fmt.Errorf("%s: %w", g.backend.Name(), context.Cause(m.ctx))
	}
	return resp, err
}
