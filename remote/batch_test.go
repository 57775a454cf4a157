//go:build !race

package remote

import (
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"fano/gateway"
	"fano/pb"
)

// A batch of calls whose handling panics is lost, but the host's answers
// to that orchestrator still go: the batch let its hold on them go.
func TestPanickingBatchReleasesTheAnswers(t *testing.T) {
	hub := startTestHub(t, HubConfig{Transport: Transport{Plaintext: true}})
	host, log := startTestHost(t, hostOpts{orchestrator: hub.Address(), backends: []gateway.Backend{newSim("s1")}})
	hub.waitFor(t, "desk", HostConnected, 10*time.Second)

	in, ok := host.sys.ProcessRegistry.GetLocal(hostInboxName)
	require.True(t, ok)
	hubInbox := actor.NewPID(hub.Address(), hubInboxName)
	in.SendUserMessage(nil, &actor.MessageEnvelope{Message: &pb.RemoteCalls{Calls: []*pb.RemoteCall{nil}}, Sender: hubInbox})
	require.NotEmpty(t, log.lines("remote.inbox_panic"), "the broken batch did not panic")

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	_, err := hub.Backend("s1", "desk").Send(ctx, request(5, "after the broken batch"))
	require.NoError(t, err, "the answer was held by the batch that panicked")
}
