//go:build !race

package remote

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/gateway"
)

// A request through a host on another actor system is answered as the
// backend answered it, carrying its intent to the host.
func TestCallThroughHost(t *testing.T) {
	hub := startTestHub(t, HubConfig{Transport: Transport{Plaintext: true}})
	s := newSim("s1")
	g := newGate()
	close(g.release)
	s.Inject(g.hook)
	startTestHost(t, hostOpts{orchestrator: hub.Address(), backends: []gateway.Backend{s}})
	hub.waitFor(t, "desk", HostConnected, 10*time.Second)

	b := hub.Backend("s1", "desk")
	resp, err := b.Send(context.Background(), request(41, "what is a Fano plane?"))
	require.NoError(t, err)
	local, err := newSim("s1").Send(context.Background(), request(41, "what is a Fano plane?"))
	require.NoError(t, err)
	assert.Equal(t, local.Content, resp.Content)
	assert.Equal(t, gateway.EndComplete, resp.Ended)
	got := <-g.arrived
	assert.EqualValues(t, 41, got.IntentSeq)
	assert.Equal(t, "what is a Fano plane?", got.Prompt)

	st := hub.Status()
	require.Len(t, st, 1)
	assert.Equal(t, []string{"s1"}, st[0].Backends)
	assert.Equal(t, "v-test", st[0].Version)
	assert.False(t, st[0].LastHeard.IsZero())
}

// An intent delivered twice (its answer was lost on the way) reaches the
// backend once: the second delivery is answered from what the host did.
func TestRepeatedIntentAnsweredFromBook(t *testing.T) {
	hub := startTestHub(t, HubConfig{Transport: Transport{Plaintext: true}})
	s := newSim("s1")
	startTestHost(t, hostOpts{orchestrator: hub.Address(), backends: []gateway.Backend{s}})
	hub.waitFor(t, "desk", HostConnected, 10*time.Second)
	b := hub.Backend("s1", "desk")

	first, err := b.Send(context.Background(), request(7, "prompt"))
	require.NoError(t, err)
	again, err := b.Send(context.Background(), request(7, "prompt"))
	require.NoError(t, err)
	assert.Equal(t, first.Content, again.Content)
	assert.EqualValues(t, 1, s.Stats().Requests, "the prompt reached the backend twice")

	// Another intent is another request.
	_, err = b.Send(context.Background(), request(8, "prompt"))
	require.NoError(t, err)
	assert.EqualValues(t, 2, s.Stats().Requests)
}

// A repeat of an intent whose answer was delivered already is answered
// at once as a permanent error (the answer itself was let go), and the
// backend is not asked again.
func TestRepeatAfterDeliveryAnsweredAtOnce(t *testing.T) {
	hub := startTestHub(t, HubConfig{Transport: Transport{Plaintext: true}})
	s := newSim("s1")
	host, _ := startTestHost(t, hostOpts{orchestrator: hub.Address(), backends: []gateway.Backend{s}})
	hub.waitFor(t, "desk", HostConnected, 10*time.Second)
	b := hub.Backend("s1", "desk")
	_, err := b.Send(context.Background(), request(9, "prompt"))
	require.NoError(t, err)
	host.book.delivered("ledger-1", []uint64{9}, nil) // as the next ping says

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = b.Send(ctx, request(9, "prompt"))
	require.Error(t, err)
	require.NoError(t, ctx.Err(), "the repeat's answer did not reach its call")
	assert.ErrorIs(t, err, gateway.ErrPermanent)
	assert.Contains(t, err.Error(), "delivered already")
	assert.EqualValues(t, 1, s.Stats().Requests, "the prompt reached the backend twice")
}

// A backend error crosses as the same kind and condition, so the
// orchestrator routes it as it would a local backend's.
func TestErrorsKeepTheirKindAndCondition(t *testing.T) {
	hub := startTestHub(t, HubConfig{Transport: Transport{Plaintext: true}})
	s := newSim("s1")
	until := time.Now().Add(time.Hour).Truncate(time.Second)
	faults := []error{
		&gateway.Fault{Backend: "s1", Condition: gateway.Condition{State: gateway.StateLogin, Reason: "login wall", Until: until}},
		&gateway.RateLimitedError{Backend: "s1", RetryAfter: 30 * time.Second, Cap: true, Reason: "cap"},
		gateway.Classified("s1", gateway.ErrBadAnswer, "refusal"),
		gateway.Permanent("s1", "400 on its prompt"),
	}
	next := 0
	s.Inject(func(context.Context, gateway.Request) error { next++; return faults[next-1] })
	startTestHost(t, hostOpts{orchestrator: hub.Address(), backends: []gateway.Backend{s}})
	hub.waitFor(t, "desk", HostConnected, 10*time.Second)
	b := hub.Backend("s1", "desk")
	for i, want := range faults {
		_, err := b.Send(context.Background(), request(uint64(100+i), "p"))
		require.Error(t, err)
		assert.Equal(t, gateway.Kind(want), gateway.Kind(err), "%v", want)
		wc, wok := gateway.ConditionOf(want)
		gc, gok := gateway.ConditionOf(err)
		assert.Equal(t, wok, gok)
		assert.Equal(t, wc.State, gc.State)
		assert.True(t, wc.Until.Equal(gc.Until))
	}
}

// A host that stops is a condition of its backends (host_lost, a
// transient state) within 2 s, and a request to it is refused before it
// leaves; the host coming back makes them ready again.
func TestHostGoneIsConditionOfItsBackends(t *testing.T) {
	hub := startTestHub(t, HubConfig{Transport: Transport{Plaintext: true}})
	host, _ := startTestHost(t, hostOpts{orchestrator: hub.Address(), backends: []gateway.Backend{newSim("s1")}})
	hub.waitFor(t, "desk", HostConnected, 10*time.Second)
	b := hub.Backend("s1", "desk").(*hostBackend)
	assert.Equal(t, gateway.StateReady, b.Condition().State)

	addr := host.Address()
	host.Close()
	took := hub.waitFor(t, "desk", HostLost, 5*time.Second)
	assert.Less(t, took, 2*time.Second)
	c := b.Condition()
	assert.Equal(t, gateway.StateHostLost, c.State)
	assert.Equal(t, gateway.ClassTransient, c.Class())
	_, err := b.Send(context.Background(), request(1, "p"))
	assert.ErrorIs(t, err, gateway.ErrNotSent)
	assert.Equal(t, "transient", gateway.Kind(err))

	startTestHost(t, hostOpts{orchestrator: hub.Address(), listen: addr, backends: []gateway.Backend{newSim("s1")}})
	hub.waitFor(t, "desk", HostConnected, 10*time.Second)
	_, err = b.Send(context.Background(), request(2, "p"))
	require.NoError(t, err)
}

// A host of another version is refused, with both versions named, on
// both sides.
func TestVersionMismatchRefused(t *testing.T) {
	hub := startTestHub(t, HubConfig{Transport: Transport{Plaintext: true}, Version: "v1.4.0"})
	host, hostLog := startTestHost(t, hostOpts{version: "v1.3.9", orchestrator: hub.Address(), backends: []gateway.Backend{newSim("s1")}})
	select {
	case err := <-host.Refused():
		assert.Contains(t, err.Error(), "v1.3.9")
		assert.Contains(t, err.Error(), "v1.4.0")
	case <-time.After(10 * time.Second):
		t.Fatal("the host was not refused")
	}
	hub.waitFor(t, "desk", HostRefused, time.Second)
	assert.Len(t, hub.log.waitLines(t, "refused gateway host desk", 1, 5*time.Second), 1)
	assert.Len(t, hostLog.waitLines(t, "refused it", 1, 5*time.Second), 1)
	_, err := hub.Backend("s1", "desk").Send(context.Background(), request(1, "p"))
	assert.ErrorIs(t, err, gateway.ErrNotSent)
}

// A host whose name the orchestrator's config does not list is refused.
func TestUnknownHostRefused(t *testing.T) {
	hub := startTestHub(t, HubConfig{Transport: Transport{Plaintext: true}})
	host, _ := startTestHost(t, hostOpts{name: "laptop", orchestrator: hub.Address(), backends: []gateway.Backend{newSim("s1")}})
	select {
	case err := <-host.Refused():
		assert.Contains(t, err.Error(), `host "laptop" is not in the orchestrator's hosts (desk)`)
	case <-time.After(10 * time.Second):
		t.Fatal("the host was not refused")
	}
}

// Plaintext is refused anywhere but loopback.
func TestPlaintextOnlyOnLoopback(t *testing.T) {
	_, _, err := Transport{Listen: "0.0.0.0:0", Plaintext: true}.start()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "only on loopback")
	_, _, err = Transport{Listen: "127.0.0.1:0", Advertise: "192.0.2.1:7071", Plaintext: true}.start()
	require.Error(t, err)
	_, _, err = Transport{Listen: "127.0.0.1:0"}.start()
	require.Error(t, err, "TLS without a certificate")
}

// A cancelled request stops the host's call (no other delivery waits for
// it) and is not kept: the same intent asked again runs.
func TestCancelStopsTheHostsCall(t *testing.T) {
	hub := startTestHub(t, HubConfig{Transport: Transport{Plaintext: true}})
	s := newSim("s1")
	g := newGate()
	cancelled := make(chan error, 1)
	s.Inject(func(ctx context.Context, req gateway.Request) error {
		g.arrived <- req
		<-ctx.Done()
		cancelled <- context.Cause(ctx)
		return ctx.Err()
	})
	startTestHost(t, hostOpts{orchestrator: hub.Address(), backends: []gateway.Backend{s}})
	hub.waitFor(t, "desk", HostConnected, 10*time.Second)
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := hub.Backend("s1", "desk").Send(ctx, request(5, "p"))
		done <- err
	}()
	<-g.arrived
	cancel(gateway.ErrShutdown)
	require.ErrorIs(t, <-done, context.Canceled)
	select {
	case cause := <-cancelled:
		assert.ErrorIs(t, cause, gateway.ErrShutdown, "a shutdown reaches the host as one")
	case <-time.After(10 * time.Second):
		t.Fatal("the host's call was not cancelled")
	}
}

// /metrics shows each host up or not, with its address, version and
// state.
func TestHostsMetrics(t *testing.T) {
	hub := startTestHub(t, HubConfig{Transport: Transport{Plaintext: true}})
	host, _ := startTestHost(t, hostOpts{orchestrator: hub.Address(), backends: []gateway.Backend{newSim("s1")}})
	hub.waitFor(t, "desk", HostConnected, 10*time.Second)
	up := func() float64 {
		reg := prometheus.NewRegistry()
		reg.MustRegister(hub.Collector())
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() == "fano_gateway_host_up" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no fano_gateway_host_up")
		return 0
	}
	assert.Equal(t, 1.0, up())
	host.Close()
	hub.waitFor(t, "desk", HostLost, 5*time.Second)
	assert.Equal(t, 0.0, up())
}

// A host process that stopped with a browser's prompt in flight leaves
// it noted: the next process gets the task's next request of that prompt
// marked interrupted, so the browser reads the page before it types.
func TestRestartedHostReadsThePageFirst(t *testing.T) {
	hub := startTestHub(t, HubConfig{Transport: Transport{Plaintext: true}, ResendWithin: time.Minute})
	journal := filepath.Join(t.TempDir(), "prompts.jsonl")
	listen := freePort(t)
	browserish := map[string]string{"s1": "browser"}
	s := newSim("s1")
	g := newGate()
	s.Inject(g.hook)
	first, _ := startTestHost(t, hostOpts{orchestrator: hub.Address(), listen: listen, types: browserish, journal: journal,
		backends: []gateway.Backend{s}})
	hub.waitFor(t, "desk", HostConnected, 10*time.Second)
	b := hub.Backend("s1", "desk")
	done := make(chan error, 1)
	go func() {
		_, err := b.Send(context.Background(), request(10, "the prompt"))
		done <- err
	}()
	assert.False(t, (<-g.arrived).Interrupted)
	first.Close() // stops with the prompt on the page

	s2 := newSim("s1")
	g2 := newGate()
	close(g2.release)
	s2.Inject(g2.hook)
	startTestHost(t, hostOpts{orchestrator: hub.Address(), listen: listen, types: browserish, journal: journal,
		backends: []gateway.Backend{s2}})
	require.Error(t, <-done, "the call of the stopped process ends as host_lost")
	hub.waitFor(t, "desk", HostConnected, 10*time.Second)

	_, err := b.Send(context.Background(), request(11, "the prompt"))
	require.NoError(t, err)
	assert.True(t, (<-g2.arrived).Interrupted, "the page is read first")
	_, err = b.Send(context.Background(), request(12, "the next prompt"))
	require.NoError(t, err)
	assert.False(t, (<-g2.arrived).Interrupted)
}

// A hub and a host run on slim registries, and a call crosses.
func TestHubAndHostRunOnSlimRegistries(t *testing.T) {
	hub := startTestHub(t, HubConfig{Transport: Transport{Plaintext: true}})
	host, _ := startTestHost(t, hostOpts{orchestrator: hub.Address(), backends: []gateway.Backend{newSim("s1")}})
	hub.waitFor(t, "desk", HostConnected, 10*time.Second)
	_, err := hub.Backend("s1", "desk").Send(context.Background(), request(1, "p"))
	require.NoError(t, err)
	assert.Len(t, hub.sys.ProcessRegistry.LocalPIDs.LocalPIDs, registryBuckets)
	assert.Len(t, host.sys.ProcessRegistry.LocalPIDs.LocalPIDs, registryBuckets)
}
