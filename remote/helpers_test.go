package remote

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/reflect/protoreflect"

	"fano/gateway"
	"fano/gateway/sim"
)

// logBuffer is a zerolog sink a test reads.
type logBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{}
}

func newLogBuffer() *logBuffer { return &logBuffer{wrote: make(chan struct{}, 1)} }

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case l.wrote <- struct{}{}:
	default:
	}
	return l.buf.Write(p)
}

// waitLines waits until n lines hold substr (a line written after is
// not waited for) and returns them.
func (l *logBuffer) waitLines(t *testing.T, substr string, n int, within time.Duration) []string {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		if got := l.lines(substr); len(got) >= n {
			return got
		}
		select {
		case <-l.wrote:
		case <-deadline.C:
			return l.lines(substr)
		}
	}
}

func (l *logBuffer) lines(substr string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.buf.String(), "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return out
}

func (l *logBuffer) logger() zerolog.Logger { return zerolog.New(l) }

// watchedHub is a hub whose host state changes a test can wait for.
type watchedHub struct {
	*Hub
	changes chan HostStatus
	log     *logBuffer
}

func startTestHub(t *testing.T, cfg HubConfig) *watchedHub {
	t.Helper()
	w := &watchedHub{changes: make(chan HostStatus, 1024), log: newLogBuffer()}
	if cfg.Transport.Listen == "" {
		cfg.Transport.Listen = "127.0.0.1:0"
	}
	if cfg.Version == "" {
		cfg.Version = "v-test"
	}
	if cfg.Routed == nil {
		cfg.Routed = map[string][]string{"desk": {"s1"}}
	}
	if cfg.Ledger == "" {
		cfg.Ledger = "ledger-1"
	}
	cfg.Logger = w.log.logger()
	cfg.OnChange = func(st HostStatus) {
		select {
		case w.changes <- st:
		default:
		}
	}
	h, err := StartHub(cfg)
	require.NoError(t, err)
	w.Hub = h
	t.Cleanup(h.Close)
	return w
}

// waitFor waits until host is in state, and returns how long it took.
func (w *watchedHub) waitFor(t testing.TB, host string, state HostState, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		for _, st := range w.Status() {
			if st.Name == host && st.State == state {
				return time.Since(start)
			}
		}
		select {
		case <-w.changes:
		case <-deadline.C:
			t.Fatalf("host %s not %s within %s: %+v", host, state, within, w.Status())
		}
	}
}

// gate holds a sim backend's answers until released, and tells when a
// request has reached it.
type gate struct {
	arrived chan gateway.Request
	release chan struct{}
}

func newGate() *gate {
	return &gate{arrived: make(chan gateway.Request, 64), release: make(chan struct{})}
}

func (g *gate) hook(ctx context.Context, req gateway.Request) error {
	g.arrived <- req
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func newSim(name string) *sim.Backend {
	return sim.New(sim.Config{Name: name, Seed: 1}, clockwork.NewRealClock())
}

type hostOpts struct {
	name, version, orchestrator, listen, advertise string
	identity                                       *Identity
	backends                                       []gateway.Backend
	types                                          map[string]string // default: all sim
	journal                                        string
}

func startTestHost(t *testing.T, o hostOpts) (*Host, *logBuffer) {
	t.Helper()
	log := newLogBuffer()
	if o.name == "" {
		o.name = "desk"
	}
	if o.version == "" {
		o.version = "v-test"
	}
	if o.listen == "" {
		o.listen = "127.0.0.1:0"
	}
	if o.types == nil {
		o.types = map[string]string{"s1": "sim", "s2": "sim", "s3": "sim"}
	}
	h, err := StartHost(HostConfig{Name: o.name, Version: o.version, Orchestrator: o.orchestrator,
		Transport: Transport{Listen: o.listen, Advertise: o.advertise, Identity: o.identity, Plaintext: o.identity == nil},
		Backends:  o.backends, Types: o.types, JournalFile: o.journal, Logger: log.logger()})
	require.NoError(t, err)
	t.Cleanup(h.Close)
	return h, log
}

func request(intent uint64, prompt string) gateway.Request {
	return gateway.Request{TaskID: "explorer/t/1", Module: "explorer", TaskType: "thread", Prompt: prompt, IntentSeq: intent}
}

func strPtr(s string) *string { return &s }
func i32Ptr(i int32) *int32   { return &i }

func protoreflectString(s string) protoreflect.Value { return protoreflect.ValueOfString(s) }

func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}
