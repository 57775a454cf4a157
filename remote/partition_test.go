//go:build !race

package remote

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"fano/gateway"
)

// blackhole is a TCP proxy that can stop forwarding without closing
// anything: the links it carries go silent, as behind a dropped route.
// Links made after heal forward again; the silenced ones stay silent.
type blackhole struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	gen    int // links of an older generation are silent
	held   []net.Conn
}

func newBlackhole(t *testing.T, target string) *blackhole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &blackhole{ln: ln, target: target}
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.held {
			c.Close()
		}
		p.mu.Unlock()
	})
	go p.serve()
	return p
}

func (p *blackhole) addr() string { return p.ln.Addr().String() }

func (p *blackhole) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.held = append(p.held, c)
		cut, gen := p.cut, p.gen
		p.mu.Unlock()
		if cut {
			go io.Copy(io.Discard, c) // accepted, never answered
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.held = append(p.held, up)
		p.mu.Unlock()
		go p.pipe(c, up, gen)
		go p.pipe(up, c, gen)
	}
}

// pipe forwards while its link's generation is current, then swallows.
func (p *blackhole) pipe(from, to net.Conn, gen int) {
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			p.mu.Lock()
			live := gen == p.gen && !p.cut
			p.mu.Unlock()
			if live {
				if _, werr := to.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			p.mu.Lock()
			live := gen == p.gen && !p.cut
			p.mu.Unlock()
			if live {
				to.Close() // a close on a live link is passed on
			}
			return
		}
	}
}

func (p *blackhole) silence() {
	p.mu.Lock()
	p.cut = true
	p.gen++
	p.mu.Unlock()
}

func (p *blackhole) heal() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// A link that goes silent (no reset) is seen within 20 s and makes the
// host's backends host_lost. The answer the host gave meanwhile was lost
// on the way; once the link heals, the same intent goes again and is
// answered from the host's book: the prompt reached the backend once.
func TestSilentPartition(t *testing.T) {
	// Each side advertises the proxy in front of it, so all traffic, both
	// ways, goes through one of the two.
	hubAddr := freePort(t)
	toHub := newBlackhole(t, hubAddr)
	hub := startTestHub(t, HubConfig{Transport: Transport{Plaintext: true, Listen: hubAddr, Advertise: toHub.addr()}})
	hostAddr := freePort(t)
	toHost := newBlackhole(t, hostAddr)
	s := newSim("s1")
	g := newGate()
	s.Inject(g.hook)
	startTestHost(t, hostOpts{orchestrator: toHub.addr(), listen: hostAddr, advertise: toHost.addr(), backends: []gateway.Backend{s}})
	hub.waitFor(t, "desk", HostConnected, 10*time.Second)

	b := hub.Backend("s1", "desk")
	type result struct {
		resp gateway.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := b.Send(context.Background(), request(9, "the prompt"))
		done <- result{resp, err}
	}()
	<-g.arrived
	toHub.silence()
	toHost.silence()
	close(g.release) // the host answers into the silent link

	took := hub.waitFor(t, "desk", HostLost, 25*time.Second)
	t.Logf("lost after %s", took)
	assert.Less(t, took, 20*time.Second)
	assert.Equal(t, gateway.StateHostLost, b.(*hostBackend).Condition().State)
	select {
	case r := <-done:
		t.Fatalf("the call ended while its host was away: %v", r.err)
	default:
	}

	toHub.heal()
	toHost.heal()
	select {
	case r := <-done:
		require.NoError(t, r.err)
		want, err := newSim("s1").Send(context.Background(), request(9, "the prompt"))
		require.NoError(t, err)
		assert.Equal(t, want.Content, r.resp.Content)
	case <-time.After(40 * time.Second):
		t.Fatal("the call was not answered after the link healed")
	}
	assert.EqualValues(t, 1, s.Stats().Requests, "the prompt was sent twice")
	hub.waitFor(t, "desk", HostConnected, 10*time.Second)
}

// A message of a type the hub does not know (a newer peer's) ends that
// link, as protoactor-go does, but nothing else: the host registers
// again and a request goes through.
func TestUnknownMessageType(t *testing.T) {
	hub := startTestHub(t, HubConfig{Transport: Transport{Plaintext: true}})
	host, _ := startTestHost(t, hostOpts{orchestrator: hub.Address(), backends: []gateway.Backend{newSim("s1")}})
	hub.waitFor(t, "desk", HostConnected, 10*time.Second)

	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name: strPtr("future.proto"), Package: strPtr("fano.future"), Syntax: strPtr("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{Name: strPtr("HostNews"), Field: []*descriptorpb.FieldDescriptorProto{{
			Name: strPtr("text"), Number: i32Ptr(1), Type: descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(),
			Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), JsonName: strPtr("text"),
		}}}},
	}, nil)
	require.NoError(t, err)
	msg := dynamicpb.NewMessage(fd.Messages().Get(0))
	msg.Set(fd.Messages().Get(0).Fields().Get(0), protoreflectString("from a newer host"))
	host.sys.Root.Send(host.hub, msg)

	lines := hub.log.waitLines(t, "failed to deserialize", 1, 10*time.Second)
	require.NotEmpty(t, lines, "the hub did not say it dropped the message")
	_, err = hub.Backend("s1", "desk").Send(context.Background(), request(3, "p"))
	require.NoError(t, err)
}
