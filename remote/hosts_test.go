package remote

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"fano/gateway"
	"fano/pb"
)

func hello(host, version, instance string) *pb.HostHello {
	return &pb.HostHello{Host: host, Version: version, Instance: instance, Address: "desk:7071",
		Backends: []*pb.HostBackend{{Name: "chatgpt", Type: "browser"}}}
}

func TestHostTable(t *testing.T) {
	now := time.Unix(1000, 0)
	tb := newHostTable("v2", map[string][]string{"desk": {"chatgpt"}})
	assert.Equal(t, gateway.StateHostLost, tb.condition("desk", "chatgpt").State, "never seen")

	out := tb.hello(hello("laptop", "v2", "a"), now)
	assert.False(t, out.welcome.Accepted, "not a configured host")
	out = tb.hello(hello("desk", "v1", "a"), now)
	assert.False(t, out.welcome.Accepted)
	assert.Contains(t, out.welcome.Reason, "host desk runs fano v1, the orchestrator fano v2")
	assert.Equal(t, HostRefused, tb.status()[0].State)

	out = tb.hello(hello("desk", "v2", "a"), now)
	assert.True(t, out.welcome.Accepted)
	assert.False(t, out.restart)
	assert.Equal(t, gateway.StateReady, tb.condition("desk", "chatgpt").State)
	assert.Equal(t, gateway.StateDown, tb.condition("desk", "gemini").State, "a backend the host does not hold")

	// Its own conditions come with its pongs.
	tb.heard("desk", "a", 2*time.Millisecond, &pb.HostPong{Conditions: []*pb.HostBackendCondition{{Backend: "chatgpt", State: "login", Reason: "login wall"}}}, now)
	assert.Equal(t, gateway.StateLogin, tb.condition("desk", "chatgpt").State)
	assert.InDelta(t, 2.0, tb.status()[0].RTTMillis, 0.001)

	// Silent for long: lost, then found again by a pong of the same process.
	assert.Equal(t, []string{"desk"}, tb.silent(now.Add(time.Second)))
	assert.True(t, tb.lose("desk", "not heard", now.Add(time.Second)))
	assert.False(t, tb.lose("desk", "again", now.Add(time.Second)), "lost once")
	assert.Equal(t, gateway.StateHostLost, tb.condition("desk", "chatgpt").State)
	assert.Equal(t, gateway.ClassTransient, tb.condition("desk", "chatgpt").Class())
	assert.False(t, tb.heard("desk", "b", 0, nil, now), "another process's pong says nothing")
	assert.True(t, tb.heard("desk", "a", 0, &pb.HostPong{}, now.Add(2*time.Second)))
	assert.Equal(t, HostConnected, tb.status()[0].State)

	// A new process of the host: a restart.
	out = tb.hello(hello("desk", "v2", "b"), now.Add(3*time.Second))
	assert.True(t, out.restart)
}
