package actors

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"fano/actors/allocator"
	"fano/actors/scheduler"
	"fano/gateway"
	"fano/gateway/sim"
	"fano/internal/fanotest"
	"fano/internal/memwal"
	"fano/modules"
	"fano/modules/probe"
	"fano/pb"
	"fano/wal"
)

// bundle is one test's fano: a real WAL file (or, for tests of logic, the
// in-memory store), sim backends, a probe module, and a feed of applied
// events. It is built from the pieces every package's tests share
// (internal/fanotest; modules use internal/testbundle, which this package
// cannot import).
type bundle struct {
	t      testing.TB
	dir    string
	log    Store
	file   *wal.Log // the bbolt WAL; nil with setupOpts.memory
	clock  clockwork.Clock
	opts   Options
	sys    *System
	probe  *probe.Module
	sims   []*sim.Backend
	events chan Notice
}

type setupOpts struct {
	clock     clockwork.Clock
	backends  []string
	hourly    int
	deep      int
	simHourly int // the simulated service's own limit (0 = hourly)
	conc      int
	latency   time.Duration
	probe     probe.Config
	mutate    func(*Options)
	noSync    bool          // benchmarks: the bbolt file without fsync
	walSlice  time.Duration // the WAL writer's slice (wal.Options.WriterSlice)
	memory    bool          // tests of logic, not storage: the in-memory store
}

func setup(t testing.TB, so setupOpts) *bundle {
	t.Helper()
	if so.clock == nil {
		so.clock = clockwork.NewRealClock()
	}
	dir := t.TempDir()
	b := &bundle{t: t, dir: dir, clock: so.clock}
	if so.memory {
		mem := memwal.New(so.clock.Now)
		t.Cleanup(func() { _ = mem.Close() })
		b.log = mem
	} else {
		b.file = fanotest.OpenWALWith(t, dir, wal.Options{NoSync: so.noSync, WriterSlice: so.walSlice})
		b.log = b.file
	}
	var (
		backends []gateway.Backend
		ac       allocator.Config
	)
	backends, b.sims, ac = fanotest.Sims{Names: so.backends, Hourly: so.hourly, SimHourly: so.simHourly,
		DeepAll: so.deep, Conc: so.conc, Latency: so.latency}.Build(so.clock)
	b.opts = Options{
		Log: b.log, Clock: so.clock, Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
		Scheduler: scheduler.Config{PreemptionThreshold: 20, MaxPending: 100000, MessageLimit: 50},
		Allocator: ac, Backends: backends,
		TickInterval: 10 * time.Millisecond, MaxRunning: 64,
		RetryBackoff: []time.Duration{time.Second, 2 * time.Second, 3 * time.Second},
		OutputDir:    filepath.Join(dir, "output"),
	}
	b.probe = probe.New(so.probe)
	b.opts.Modules = []modules.Module{b.probe}
	if so.mutate != nil {
		so.mutate(&b.opts)
	}
	return b
}

// start starts the system and subscribes the bundle to its events.
func (b *bundle) start() *System {
	b.t.Helper()
	// The feed is wired in before Start: a subscription made after Start
	// returns misses whatever the first ticks did meanwhile (on a busy
	// machine, the very events a test waits for).
	// Made here, not in setup: benchmarks that only Start measure fano's
	// memory, not 2.4 MB of feed they never read.
	b.events = make(chan Notice, 100000)
	opts := b.opts
	observe := opts.Observe
	opts.Observe = func(owner string, e *pb.Event) {
		if observe != nil {
			observe(owner, e)
		}
		select {
		case b.events <- Notice{Owner: owner, Event: e}:
		default:
		}
	}
	sys, err := Start(opts)
	require.NoError(b.t, err)
	b.sys = sys
	var once sync.Once
	b.t.Cleanup(func() { once.Do(func() { _ = sys.Stop() }) })
	return sys
}

// waitCompleted waits until n tasks have completed, or fails after a
// deadline that only a broken test reaches.
func (b *bundle) waitCompleted(n int) {
	b.t.Helper()
	deadline := time.After(30 * time.Second)
	done := 0
	for done < n {
		select {
		case e := <-b.events:
			if e.Event.GetTaskCompleted() != nil {
				done++
			}
		case <-deadline:
			b.t.Fatalf("only %d of %d tasks completed", done, n)
		}
	}
}

// waitEvent waits for the first event that match accepts.
func (b *bundle) waitEvent(what string, match func(Notice) bool) Notice {
	b.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case e := <-b.events:
			if match(e) {
				return e
			}
		case <-deadline:
			b.t.Fatalf("no %s", what)
		}
	}
}

// logged counts the events in the WAL that match.
func (b *bundle) logged(t testing.TB, match func(*pb.Event) bool) int {
	t.Helper()
	n := 0
	require.NoError(t, b.log.Replay(1, func(ent wal.Entry) error {
		e, err := decodeEvent(ent)
		if err != nil {
			return err
		}
		if match(e) {
			n++
		}
		return nil
	}))
	return n
}

// tickHandled runs one tick and returns once the scheduler has handled
// it. A tick goes to the allocator first, which hands it on (see
// System.tick): a barrier to the scheduler alone could pass it on the way.
func (b *bundle) tickHandled() {
	b.t.Helper()
	b.sys.Tick()
	b.sys.state.withAllocator(func(*allocator.Book) {})
	b.sys.state.withScheduler(func(*scheduler.State) {})
}

// replayOwner rebuilds one owner's state from the log, from sequence 1
// (ignoring checkpoints) or from its checkpoint.
func (b *bundle) rebuildScheduler(fromCheckpoint bool) *scheduler.State {
	b.t.Helper()
	s, err := newSystem(b.opts)
	require.NoError(b.t, err)
	if fromCheckpoint {
		st, err := s.recovery.recoverScheduler()
		require.NoError(b.t, err)
		return st.state
	}
	st := scheduler.New(b.opts.Scheduler)
	require.NoError(b.t, replay(b.log, map[string]*owned{ownerScheduler: {apply: st.Apply}}, nil))
	return st
}

func (b *bundle) rebuildAllocator(fromCheckpoint bool) *allocator.Book {
	b.t.Helper()
	s, err := newSystem(b.opts)
	require.NoError(b.t, err)
	if fromCheckpoint {
		st, err := s.recovery.recoverAllocator()
		require.NoError(b.t, err)
		return st.book
	}
	bk := allocator.New(b.opts.Allocator)
	require.NoError(b.t, replay(b.log, map[string]*owned{ownerAllocator: {apply: bk.Apply}}, nil))
	return bk
}

func questions(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("Question %d about the Fano plane", i)
	}
	return out
}

// benchTaskType makes the sim echo the prompt: benchmarks measure fano's
// cost per task, not the size of made-up answers.
const benchTaskType = "echo"

func benchTask(i int) *pb.Task {
	subject := fmt.Sprintf("b%06d", i)
	return &pb.Task{Id: modules.TaskKey(probe.Name, benchTaskType, subject), Module: probe.Name, TaskType: benchTaskType,
		Subject: subject, MaxRequests: 1, Context: map[string]string{"question": "bench " + subject}}
}
