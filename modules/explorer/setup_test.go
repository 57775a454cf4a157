package explorer

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"fano/actors"
	"fano/actors/allocator"
	"fano/actors/scheduler"
	"fano/gateway"
	"fano/gateway/sim"
	"fano/modules"
	"fano/pb"
	"fano/wal"
)

// bundle is one test's fano: a real WAL in a temp dir, sim backends with
// no latency on the real clock, the explorer, and a feed of notices that
// wakes the waits.
type bundle struct {
	t      *testing.T
	dir    string
	log    *wal.Log
	opts   actors.Options
	cfg    Config
	mod    *Module
	sys    *actors.System
	wake   chan struct{}
	stopMu sync.Once
}

type setupOpts struct {
	backends  []string       // default chatgpt, claude, gemini
	deep      []string       // backends with deep mode (default: gemini)
	malformed float64        // sim malformed-answer rate of every backend
	explorer  func(*Config)  // adjusts the explorer's config
	maxReq    map[string]int // request budgets by task type
}

func setup(t *testing.T, so setupOpts) *bundle {
	t.Helper()
	if len(so.backends) == 0 {
		so.backends = []string{"chatgpt", "claude", "gemini"}
	}
	if so.deep == nil {
		so.deep = []string{"gemini"}
	}
	dir := t.TempDir()
	log, err := wal.Open(filepath.Join(dir, "fano.db"), wal.Options{LockTimeout: time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = log.Close() })

	clock := clockwork.NewRealClock()
	var backends []gateway.Backend
	ac := allocator.Config{BufferPercent: 10}
	for i, name := range so.backends {
		deep := 0
		for _, d := range so.deep {
			if d == name {
				deep = 100
			}
		}
		backends = append(backends, sim.New(sim.Config{Name: name, Style: "api", Seed: int64(i + 1),
			HourlyLimit: 10000, DeepDailyLimit: deep, MalformedRate: so.malformed}, clock))
		ac.Backends = append(ac.Backends, allocator.BackendConfig{Name: name, Kind: "sim", HourlyLimit: 10000, DeepDailyLimit: deep, MaxConcurrency: 1})
	}
	cfg := Config{
		Backends: so.backends, DeepBackends: so.deep, ExplorationTurns: 2, MaxActiveThreads: 4,
		Dedup: DedupConfig{Enabled: true, UseBatchLLM: true, BatchSize: 20, Threshold: 0.6, BorderlineLow: 0.4},
	}
	for _, d := range so.deep {
		if d == "gemini" {
			cfg.PreferDeep = "gemini"
		}
	}
	maxReq := func(tt string) int {
		if n, ok := so.maxReq[tt]; ok {
			return n
		}
		return 10
	}
	cfg.MaxRequests = maxReq
	if so.explorer != nil {
		so.explorer(&cfg)
	}
	b := &bundle{t: t, dir: dir, log: log, cfg: cfg, wake: make(chan struct{}, 1)}
	b.mod = b.newModule()
	b.opts = actors.Options{
		Log: log, Clock: clock, Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
		Scheduler: scheduler.Config{PreemptionThreshold: 20, MaxPending: 10000, MessageLimit: 50},
		Allocator: ac, Backends: backends, Modules: []modules.Module{b.mod},
		TickInterval: 5 * time.Millisecond, MaxRunning: 16, MaxRequests: maxReq,
		RetryBackoff: []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond},
		OutputDir:    filepath.Join(dir, "output"),
	}
	return b
}

func (b *bundle) newModule() *Module {
	b.t.Helper()
	m, err := New(b.cfg)
	require.NoError(b.t, err)
	return m
}

// start starts the system; every applied event wakes the waits.
func (b *bundle) start() *actors.System {
	b.t.Helper()
	sys, err := actors.Start(b.opts)
	require.NoError(b.t, err)
	b.sys = sys
	sys.Subscribe(func(actors.Notice) {
		select {
		case b.wake <- struct{}{}:
		default:
		}
	})
	b.t.Cleanup(b.stop)
	return sys
}

func (b *bundle) stop() {
	b.stopMu.Do(func() {
		if b.sys != nil {
			require.NoError(b.t, b.sys.Stop())
		}
	})
}

// addSeed adds a seed through the running module host.
func (b *bundle) addSeed(text string, priority int) {
	b.t.Helper()
	_, err := b.sys.Command(&pb.ModuleCommand{Module: Name,
		Command: &pb.ModuleCommand_AddSeed{AddSeed: &pb.AddSeed{Text: text, Priority: int32(priority)}}})
	require.NoError(b.t, err)
}

// waitFor waits until cond holds on the explorer's state (read inside its
// host), re-checking after every applied event; the deadline only
// catches a broken test.
func (b *bundle) waitFor(what string, cond func(m *Module) bool) {
	b.t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		ok := false
		require.NoError(b.t, b.sys.WithModule(Name, func(m modules.Module) { ok = cond(m.(*Module)) }))
		if ok {
			return
		}
		select {
		case <-b.wake:
		case <-deadline:
			b.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// settled: every seed's thread finished and no insight waits.
func settled(m *Module) bool {
	for _, s := range m.Seeds() {
		if s.Status != ThreadDone && s.Status != ThreadFailed {
			return false
		}
	}
	return m.Backlog() == 0
}

// state reads a copy of the module's snapshot inside its host.
func (b *bundle) snapshot() string {
	b.t.Helper()
	var snap []byte
	require.NoError(b.t, b.sys.WithModule(Name, func(m modules.Module) {
		var err error
		snap, err = m.Snapshot()
		require.NoError(b.t, err)
	}))
	return string(snap)
}

// walEvents lists the WAL's events of owner, in sequence order.
func walEvents(t *testing.T, log *wal.Log, owner string) []*pb.Event {
	t.Helper()
	var out []*pb.Event
	require.NoError(t, log.Replay(1, func(ent wal.Entry) error {
		if ent.Owner == owner {
			out = append(out, walEventsOf(t, ent))
		}
		return nil
	}))
	return out
}

// walEventsOf decodes one WAL entry.
func walEventsOf(t *testing.T, ent wal.Entry) *pb.Event {
	t.Helper()
	var e pb.Event
	require.NoError(t, proto.Unmarshal(ent.Payload, &e), "wal entry %d", ent.Seq)
	return &e
}

// replayModule builds a fresh explorer from the WAL's module events alone
// (no checkpoint).
func replayModule(t *testing.T, log *wal.Log, cfg Config) *Module {
	t.Helper()
	m, err := New(cfg)
	require.NoError(t, err)
	for _, e := range walEvents(t, log, "module/"+Name) {
		require.NoError(t, m.Apply(e.GetModuleEvent(), time.Unix(0, e.At)))
	}
	return m
}
