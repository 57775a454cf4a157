package actors

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/gateway"
	"fano/pb"
)

// onHost is a backend held by a gateway host that may be lost, as the
// hub's backend reports it (gateway.Conditioner).
type onHost struct {
	gateway.Backend
	lost atomic.Bool
}

func (h *onHost) Condition() gateway.Condition {
	if h.lost.Load() {
		return gateway.Condition{State: gateway.StateHostLost, Reason: "host desk lost: its link ended"}
	}
	return gateway.Condition{State: gateway.StateReady}
}

// A backend whose gateway host is lost is parked; once the host holds it
// again it takes work at the next tick, without waiting for the re-check
// of a down backend half a minute on (the clock does not move here).
func TestBackendBackWithItsHost(t *testing.T) {
	b, _ := fakeRig(t)
	h := &onHost{}
	h.lost.Store(true)
	h.Backend = b.opts.Backends[0]
	b.opts.Backends[0] = h
	b.start()
	b.tickHandled()
	require.Equal(t, string(gateway.StateHostLost), b.sys.Quotas()[0].State)

	_, err := b.sys.Submit(probeTask(1, 0))
	require.NoError(t, err)
	b.tickHandled()
	b.tickHandled()
	require.Zero(t, b.logged(t, func(e *pb.Event) bool { return e.GetLlmRequestStarted() != nil }),
		"a request went to a backend whose host is lost")

	h.lost.Store(false)
	b.tickHandled()
	b.waitEvent("request started on the backend", func(n Notice) bool { return n.Event.GetLlmRequestStarted() != nil })
	assert.Equal(t, string(gateway.StateReady), b.sys.Quotas()[0].State)
}
