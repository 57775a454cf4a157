//go:build !race

package remote

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/gateway"
)

// frameCounter is a TCP proxy that reads the HTTP/2 frames it forwards
// (plaintext links) and counts them by type, both ways.
type frameCounter struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	counts map[string]int
	conns  []net.Conn
}

const http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

func newFrameCounter(t *testing.T, target string) *frameCounter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &frameCounter{ln: ln, target: target, counts: map[string]int{}}
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go p.pipe(c, up, true)
			go p.pipe(up, c, false)
		}
	}()
	return p
}

func (p *frameCounter) addr() string { return p.ln.Addr().String() }

// pipe forwards from to to, counting the frames it sees; the client's
// side opens with the connection preface.
func (p *frameCounter) pipe(from, to net.Conn, client bool) {
	defer to.Close()
	var pending []byte
	skip := 0
	if client {
		skip = len(http2Preface)
	}
	buf := make([]byte, 32<<10)
	counting := true
	for {
		n, err := from.Read(buf)
		if n > 0 {
			if _, werr := to.Write(buf[:n]); werr != nil {
				return
			}
			if counting {
				pending = append(pending, buf[:n]...)
			}
			if skip > 0 && len(pending) >= skip {
				if !bytes.HasPrefix(pending, []byte(http2Preface)) {
					counting, pending = false, nil // not HTTP/2: forwarded, not counted
				}
				pending, skip = pending[min(skip, len(pending)):], 0
			}
			for skip == 0 && len(pending) >= 9 {
				length := int(binary.BigEndian.Uint32(append([]byte{0}, pending[:3]...)))
				if len(pending) < 9+length {
					break
				}
				p.count(pending[3], pending[4], length)
				pending = pending[9+length:]
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *frameCounter) count(typ, flags byte, length int) {
	name := map[byte]string{0: "data", 1: "headers", 3: "rst", 4: "settings", 6: "ping", 7: "goaway", 8: "window_update"}[typ]
	if name == "" {
		name = "type" + strconv.Itoa(int(typ))
	}
	if typ == 6 && flags&1 != 0 {
		name = "ping_ack"
	}
	p.mu.Lock()
	p.counts[name]++
	if typ == 0 {
		p.counts["data_bytes"] += length
	}
	p.mu.Unlock()
}

func (p *frameCounter) snapshot() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.counts))
	for k, v := range p.counts {
		out[k] = v
	}
	return out
}

// A burst of calls costs the link its data frames and little else: the
// flow-control windows are fixed, so gRPC does not ping each batch to
// estimate the bandwidth (each ping an extra frame written, read and
// answered, both ways), nor update a window every few kilobytes.
func TestBurstCarriesNoFlowControlPings(t *testing.T) {
	hubAddr, hostAddr := freePort(t), freePort(t)
	toHub, toHost := newFrameCounter(t, hubAddr), newFrameCounter(t, hostAddr)
	hub := startTestHub(t, HubConfig{Transport: Transport{Plaintext: true, Listen: hubAddr, Advertise: toHub.addr()}})
	startTestHost(t, hostOpts{orchestrator: toHub.addr(), listen: hostAddr, advertise: toHost.addr(),
		backends: []gateway.Backend{newSim("s1")}})
	hub.waitFor(t, "desk", HostConnected, 10*time.Second)

	b := hub.Backend("s1", "desk")
	// One call first: both links are up before the counting starts.
	_, err := b.Send(context.Background(), request(1, "warm"))
	require.NoError(t, err)
	before := map[string]map[string]int{"to hub": toHub.snapshot(), "to host": toHost.snapshot()}

	const callers, each = 32, 40
	var wg sync.WaitGroup
	for c := 0; c < callers; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for k := 0; k < each; k++ {
				if _, err := b.Send(context.Background(), request(uint64(100+c*each+k), "a prompt "+strconv.Itoa(k))); err != nil {
					t.Error(err)
					return
				}
			}
		}(c)
	}
	wg.Wait()

	for name, p := range map[string]*frameCounter{"to hub": toHub, "to host": toHost} {
		after := p.snapshot()
		data := after["data"] - before[name]["data"]
		pings := after["ping"] - before[name]["ping"] + after["ping_ack"] - before[name]["ping_ack"]
		updates := after["window_update"] - before[name]["window_update"]
		dataBytes := after["data_bytes"] - before[name]["data_bytes"]
		t.Logf("%s: %d data frames (%d bytes), %d pings and acks, %d window updates", name, data, dataBytes, pings, updates)
		require.Positive(t, data, "%s: the calls did not cross this link", name)
		// Keepalive may ping a link that reads nothing while the burst
		// lasts, once a KeepaliveTime per direction.
		assert.LessOrEqual(t, pings, 4, "%s: the link was pinged as it carried the burst", name)
		// A window (the link's and the stream's) is given back once a
		// quarter of it was read.
		assert.LessOrEqual(t, updates, 2*(dataBytes/(streamWindow/4)+1), "%s: the windows were updated every few kilobytes", name)
	}
}
