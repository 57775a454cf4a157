package app

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"fano/config"
	"fano/control"
	"fano/gateway"
	"fano/remote"
)

// HostsStatusFile is where a running orchestrator leaves its gateway
// hosts' status for `fano status`.
const HostsStatusFile = "hosts-status.json"

// hostsGrace is how long a start waits for its gateway hosts to register.
const hostsGrace = 3 * time.Second

// startHub listens for the config's gateway hosts (nil when it has none):
// mTLS with the certificate of `fano remote init`, or plaintext on
// loopback when the config asks for it.
func startHub(cfg *config.Config, dataDir string, logger zerolog.Logger, clock clockwork.Clock) (*remote.Hub, error) {
	if len(cfg.Hosts) == 0 {
		return nil, nil
	}
	r := cfg.Remote
	t := remote.Transport{Listen: r.Listen, Advertise: r.Advertise, Plaintext: r.PlaintextLoopback}
	if !t.Plaintext {
		id, err := remote.OrchestratorIdentity(dataDir)
		if err != nil {
			return nil, err
		}
		t.Identity = id
	}
	ledger, err := remote.Ledger(dataDir)
	if err != nil {
		return nil, err
	}
	hub, err := remote.StartHub(remote.HubConfig{Transport: t, Version: remote.Version(), Routed: cfg.RemoteBackends(),
		Ledger: ledger, Clock: clock, Logger: logger, StatusFile: filepath.Join(dataDir, HostsStatusFile)})
	if err != nil {
		return nil, fmt.Errorf("remote.listen %s: %w", r.Listen, err)
	}
	// Hosts that waited for this orchestrator say hello within a second
	// or two; work is handed out after that.
	hub.AwaitHosts(hostsGrace)
	return hub, nil
}

// GatewayStatusFile is where `fano gateway serve` leaves the host's
// status for `fano gateway status`.
const GatewayStatusFile = "gateway-status.json"

// GatewayJournalFile is where a gateway host notes the prompts it hands
// to browser backends (see remote.HostConfig.JournalFile).
const GatewayJournalFile = "gateway-prompts.jsonl"

// GatewayOptions configure a gateway host (`fano gateway serve`).
type GatewayOptions struct {
	Config  *config.Config
	DataDir string
	Logger  zerolog.Logger
	Clock   clockwork.Clock
	// Version replaces this binary's version (a test's).
	Version string
	// NewBackend builds a backend in place of the real one of its type.
	NewBackend func(name string, b *config.Backend) (gateway.Backend, error)
}

// Gateway is a running gateway host with the backends it holds.
type Gateway struct {
	Host     *remote.Host
	Name     string
	backends []gateway.Backend
}

// Close stops serving, then closes the backends.
func (g *Gateway) Close() {
	g.Host.Close()
	for _, b := range g.backends {
		_ = b.Close()
	}
}

// StartGateway runs the config's enabled backends here and serves them to
// the orchestrator named in the gateway section (or its bundle).
func StartGateway(o GatewayOptions) (*Gateway, error) {
	cfg := o.Config
	g := cfg.Gateway
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	if o.Version == "" {
		o.Version = remote.Version()
	}
	name, orchestrator := g.Name, g.Orchestrator
	t := remote.Transport{Listen: g.Listen, Advertise: g.Advertise, Plaintext: g.PlaintextLoopback}
	if !g.PlaintextLoopback {
		if g.Bundle == "" {
			return nil, fmt.Errorf("gateway.bundle: missing; the file `fano remote enroll <host>` wrote on the orchestrator")
		}
		b, id, err := remote.LoadBundle(g.Bundle)
		if err != nil {
			return nil, fmt.Errorf("gateway.bundle: %w", err)
		}
		t.Identity = id
		if name == "" {
			name = b.Host
		}
		if name != b.Host {
			return nil, fmt.Errorf("gateway.name: %q, but the bundle's certificate is for %q", name, b.Host)
		}
		if orchestrator == "" {
			orchestrator = b.Orchestrator
		}
	}
	if name == "" {
		return nil, fmt.Errorf("gateway.name: missing")
	}
	if orchestrator == "" {
		return nil, fmt.Errorf("gateway.orchestrator: missing, and no bundle names it")
	}
	for _, name := range cfg.EnabledBackends() {
		if b, _ := cfg.Backend(name); b.Host != "" {
			return nil, fmt.Errorf("backends.%s.host: %q; a gateway host runs its backends itself (host is for the orchestrator's config)", name, b.Host)
		}
	}
	if err := preflight(cfg, o.NewBackend == nil); err != nil {
		return nil, err
	}
	if os.Getenv("GOMEMLIMIT") == "" && g.MemoryLimitMB > 0 {
		debug.SetMemoryLimit(int64(g.MemoryLimitMB) << 20)
	}
	backends, _, err := buildBackends(cfg, &backendEnv{Cfg: cfg, DataDir: o.DataDir, Clock: o.Clock, Logger: o.Logger, newBackend: o.NewBackend})
	if err != nil {
		return nil, err
	}
	closeAll := func() {
		for _, b := range backends {
			_ = b.Close()
		}
	}
	if len(backends) == 0 {
		return nil, fmt.Errorf("backends: none enabled: a gateway host serves the enabled backends of its config")
	}
	types := map[string]string{}
	for _, b := range backends {
		if bc, ok := cfg.Backend(b.Name()); ok {
			types[b.Name()] = bc.Type
		}
	}
	h, err := remote.StartHost(remote.HostConfig{Name: name, Transport: t, Orchestrator: orchestrator, Version: o.Version,
		Backends: backends, Types: types, Clock: o.Clock, Logger: o.Logger,
		StatusFile: filepath.Join(o.DataDir, GatewayStatusFile), JournalFile: filepath.Join(o.DataDir, GatewayJournalFile)})
	if err != nil {
		closeAll()
		return nil, err
	}
	return &Gateway{Host: h, Name: name, backends: backends}, nil
}

// panelCollectors are the panel's extra /metrics collectors: the run's
// own, and the gateway hosts' when there are any.
func panelCollectors(own prometheus.Collector, hub *remote.Hub) []prometheus.Collector {
	out := []prometheus.Collector{own}
	if hub != nil {
		out = append(out, hub.Collector())
	}
	return out
}

// panelHosts is the hub's host list for the panel (nil without hosts).
func panelHosts(hub *remote.Hub) control.HostSource {
	if hub == nil {
		return nil
	}
	return hubHosts{hub}
}

// hubHosts reads the hub's hosts into the panel's view.
type hubHosts struct{ hub *remote.Hub }

func (h hubHosts) Hosts() []control.HostView {
	st := h.hub.Status()
	out := make([]control.HostView, 0, len(st))
	for _, s := range st {
		out = append(out, control.HostView{Name: s.Name, Address: s.Address, Version: s.Version, Backends: s.Backends,
			State: string(s.State), Reason: s.Reason, Since: s.Since, LastHeard: s.LastHeard, RTTMillis: s.RTTMillis, Running: s.Running})
	}
	return out
}
