//go:build !race

package remote

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/gateway"
	"fano/gateway/sim"
)

// addressingSim is a sim backend that says it addresses its
// conversations, as a browser does.
type addressingSim struct{ *sim.Backend }

func (addressingSim) AddressesConversations() bool { return true }

// A host's backend tells the address of a new conversation while its
// answer is held: the report crosses to the orchestrator as its own
// message and reaches the caller before the answer does.
func TestConversationAddressCrossesBeforeTheAnswer(t *testing.T) {
	hub := startTestHub(t, HubConfig{Transport: Transport{Plaintext: true}})
	s := newSim("s1")
	g := newGate()
	s.Inject(func(ctx context.Context, req gateway.Request) error {
		if assert.NotNil(t, req.ConversationAddressed, "the host passes the report on to its backend") {
			req.ConversationAddressed("https://chat.test/c/41")
		}
		return g.hook(ctx, req)
	})
	startTestHost(t, hostOpts{orchestrator: hub.Address(), backends: []gateway.Backend{addressingSim{s}}})
	hub.waitFor(t, "desk", HostConnected, 10*time.Second)
	b := hub.Backend("s1", "desk")

	addressed := make(chan string, 1)
	req := request(41, "the first prompt of a conversation")
	req.ConversationAddressed = func(url string) { addressed <- url }
	done := make(chan error, 1)
	go func() {
		_, err := b.Send(context.Background(), req)
		done <- err
	}()
	<-g.arrived
	select {
	case url := <-addressed:
		assert.Equal(t, "https://chat.test/c/41", url)
	case <-time.After(10 * time.Second):
		t.Fatal("the address did not cross before the answer")
	}
	close(g.release)
	require.NoError(t, <-done)

	// A request that asks for no report gets its answer all the same.
	_, err := b.Send(context.Background(), request(42, "another"))
	require.NoError(t, err)
}

// The orchestrator asks a host's backend for a conversation's address
// (a channel and a report a request) only when the host said, as it
// registered, that the backend gives one; before the host has said, it
// may.
func TestOnlyAddressingBackendsAreAskedForAddresses(t *testing.T) {
	hub := startTestHub(t, HubConfig{Transport: Transport{Plaintext: true}, Routed: map[string][]string{"desk": {"s1", "s2"}}})
	addresses := func(name string) bool {
		a, ok := gateway.As[gateway.Addresser](hub.Backend(name, "desk"))
		require.True(t, ok)
		return a.AddressesConversations()
	}
	assert.True(t, addresses("s1"), "a host not registered yet may hold a browser")
	startTestHost(t, hostOpts{orchestrator: hub.Address(), backends: []gateway.Backend{addressingSim{newSim("s1")}, newSim("s2")}})
	hub.waitFor(t, "desk", HostConnected, 10*time.Second)
	assert.True(t, addresses("s1"), "the host said s1 addresses its conversations")
	assert.False(t, addresses("s2"), "s2 gives no address, as its host said")
}
