package remote

import (
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/gateway"
	"fano/pb"
)

// A batch's calls are handed on one by one, but each runs on its own
// goroutine: a call that blocks (a browser waiting for its answer) does
// not hold back the ones after it, nor what runs once all have started.
func TestGoEachRunsEveryCallOnItsOwnGoroutine(t *testing.T) {
	w := newWarmPool(4)
	const n = 6
	started := make(chan int, n)
	release := make(chan struct{})
	fns := make([]func(), n)
	for i := range fns {
		fns[i] = func() {
			started <- i
			<-release
		}
	}
	then := make(chan struct{})
	w.GoEach(fns, func() { close(then) })
	seen := map[int]bool{}
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for len(seen) < n {
		select {
		case i := <-started:
			seen[i] = true
		case <-deadline.C:
			t.Fatalf("only calls %v started while they blocked", seen)
		}
	}
	select {
	case <-then:
	case <-deadline.C:
		t.Fatal("what follows the batch did not run while its calls blocked")
	}
	close(release)
	assert.Len(t, seen, n)
	empty := false
	w.GoEach(nil, func() { empty = true })
	assert.True(t, empty, "an empty batch has started at once")
}

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
