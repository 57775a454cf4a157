package explorer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"fano/internal/fanotest"
	"fano/internal/testbundle"
	"fano/modules"
	"fano/pb"
	"fano/wal"
)

// bundle is the shared test bundle with the explorer under test. The log
// is in memory: these tests are about the module's flow and its replay,
// not the file (crash_test.go runs fano on the real WAL and kills it).
type bundle struct {
	*testbundle.Bundle
	t   *testing.T
	cfg Config
	mod *Module
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
	deep := map[string]int{}
	for _, d := range so.deep {
		deep[d] = 100
	}
	maxReq := func(tt string) int {
		if n, ok := so.maxReq[tt]; ok {
			return n
		}
		return 10
	}
	cfg := Config{
		Backends: so.backends, DeepBackends: so.deep, ExplorationTurns: 2, MaxActiveThreads: 4,
		Dedup:       DedupConfig{Enabled: true, UseBatchLLM: true, BatchSize: 20, Threshold: 0.6, BorderlineLow: 0.4},
		MaxRequests: maxReq,
	}
	if deep["gemini"] > 0 {
		cfg.PreferDeep = "gemini"
	}
	if so.explorer != nil {
		so.explorer(&cfg)
	}
	b := &bundle{t: t, cfg: cfg}
	b.mod = b.newModule()
	b.Bundle = testbundle.Setup(t, testbundle.Options{
		Sims:   fanotest.Sims{Names: so.backends, Deep: deep, Malformed: so.malformed},
		Memory: true, MaxRequests: maxReq, Modules: []modules.Module{b.mod},
	})
	return b
}

func (b *bundle) newModule() *Module {
	b.t.Helper()
	m, err := New(b.cfg)
	require.NoError(b.t, err)
	return m
}

// start starts the system.
func (b *bundle) start() { b.t.Helper(); b.Start() }

// stop stops it.
func (b *bundle) stop() { b.t.Helper(); b.Stop() }

// restart starts a fresh explorer and system on the same WAL, after stop.
func (b *bundle) restart() {
	b.t.Helper()
	b.mod = b.newModule()
	b.Opts.Modules[0] = b.mod
	b.Start()
}

// addSeed adds a seed through the running module host.
func (b *bundle) addSeed(text string, priority int) {
	b.t.Helper()
	b.Command(&pb.ModuleCommand{Module: Name,
		Command: &pb.ModuleCommand_AddSeed{AddSeed: &pb.AddSeed{Text: text, Priority: int32(priority)}}})
}

// waitFor waits until cond holds on the explorer's state (read inside its
// host), re-checking after every applied event.
func (b *bundle) waitFor(what string, cond func(m *Module) bool) {
	b.t.Helper()
	b.WaitModule(Name, what, func(m modules.Module) bool { return cond(m.(*Module)) })
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
	require.NoError(b.t, b.Sys.WithModule(Name, func(m modules.Module) {
		var err error
		snap, err = m.Snapshot()
		require.NoError(b.t, err)
	}))
	return string(snap)
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
func replayModule(t *testing.T, log fanotest.Replayer, cfg Config) *Module {
	t.Helper()
	m, err := New(cfg)
	require.NoError(t, err)
	for _, e := range fanotest.Events(t, log, "module/"+Name) {
		require.NoError(t, m.Apply(e.GetModuleEvent(), time.Unix(0, e.At)))
	}
	return m
}
