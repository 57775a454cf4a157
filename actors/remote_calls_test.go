//go:build !race

package actors

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/gateway"
	"fano/modules/probe"
	"fano/pb"
	"fano/remote"
)

// cutFirst answers its first request cut off (the page stopped before
// the answer was complete), then whole.
type cutFirst struct {
	gateway.Backend
	sent atomic.Int32
}

func (c *cutFirst) Send(ctx context.Context, req gateway.Request) (gateway.Response, error) {
	resp, err := c.Backend.Send(ctx, req)
	if c.sent.Add(1) == 1 && err == nil {
		resp.Ended = gateway.EndCut
	}
	return resp, err
}

// A gateway host's backend answers through a callback, with no goroutine
// of the orchestrator's waiting: the answer is judged as a local one's
// all the same. A cut answer from the host is not recorded; it is a
// transient fault, and the request asked again completes the task.
func TestCutAnswerFromAGatewayHostIsNotRecorded(t *testing.T) {
	hub := startTestHub(t)
	b := setup(t, setupOpts{backends: []string{"chatgpt"}, probe: probe.Config{NoPropose: true, Turns: 1}})
	be := &cutFirst{Backend: b.sims[0]}
	host, err := remote.StartHost(remote.HostConfig{Name: "desk", Version: "v-test", Orchestrator: hub.Address(),
		Transport: remote.Transport{Listen: "127.0.0.1:0", Plaintext: true}, Backends: []gateway.Backend{be},
		Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)})
	require.NoError(t, err)
	t.Cleanup(host.Close)
	hub.waitFor(t, remote.HostConnected)
	b.opts.Backends[0] = hub.Backend("chatgpt", "desk")
	b.start()
	_, err = b.sys.Submit(probeTask(1, 0))
	require.NoError(t, err)
	b.waitCompleted(1)

	assert.EqualValues(t, 2, be.sent.Load(), "asked again after the cut answer")
	assert.Equal(t, 1, b.logged(t, func(e *pb.Event) bool { return e.GetLlmResponseReceived() != nil }),
		"only the whole answer is recorded")
	assert.Equal(t, 1, b.logged(t, func(e *pb.Event) bool {
		f := e.GetLlmRequestFailed()
		return f != nil && f.Kind == "transient"
	}), "the cut answer is a transient fault")
}
