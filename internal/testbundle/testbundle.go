// Package testbundle is one test's fano, in the manner of river's
// setup(t): Setup returns a bundle of real pieces (a WAL, sim backends,
// the actor system's options, the modules under test) and Options say
// what differs. Tests of modules use it; the actors package's own tests
// cannot import it (it imports actors) and build on the same pieces in
// internal/fanotest.
package testbundle

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"fano/actors"
	"fano/actors/scheduler"
	"fano/internal/fanotest"
	"fano/internal/memwal"
	"fano/modules"
	"fano/pb"
	"fano/wal"
)

// Options say what differs from the default bundle: three sim backends
// with room to spare, a bbolt WAL, the real clock, 5 ms ticks.
type Options struct {
	Sims fanotest.Sims
	// Memory puts the log in memory (internal/memwal): for tests whose
	// subject is not storage. Tests that reopen or inspect the file keep
	// the default bbolt WAL.
	Memory      bool
	Clock       clockwork.Clock           // default the real clock
	MaxRequests func(taskType string) int // default 10 for every type
	Modules     []modules.Module
	Mutate      func(*actors.Options) // last word on the system's options
}

// Bundle is one test's fano.
type Bundle struct {
	T     testing.TB
	Dir   string       // the data directory (output/ under it)
	Log   actors.Store // the WAL the system runs on
	File  *wal.Log     // the bbolt WAL; nil with Options.Memory
	Clock clockwork.Clock
	Opts  actors.Options // what Start passes to actors.Start
	Sys   *actors.System // set by Start

	wake chan struct{}
	stop *sync.Once
}

// Setup builds the bundle; Start starts its system.
func Setup(t testing.TB, o Options) *Bundle {
	t.Helper()
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	if o.Sims.Hourly == 0 {
		o.Sims.Hourly = 10000
	}
	if o.MaxRequests == nil {
		o.MaxRequests = func(string) int { return 10 }
	}
	b := &Bundle{T: t, Dir: t.TempDir(), Clock: o.Clock, wake: make(chan struct{}, 1)}
	if o.Memory {
		mem := memwal.New(o.Clock.Now)
		t.Cleanup(func() { _ = mem.Close() })
		b.Log = mem
	} else {
		b.File = fanotest.OpenWAL(t, b.Dir, false)
		b.Log = b.File
	}
	backends, _, ac := o.Sims.Build(o.Clock)
	b.Opts = actors.Options{
		Log: b.Log, Clock: o.Clock, Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
		Scheduler: scheduler.Config{PreemptionThreshold: 20, MaxPending: 10000, MessageLimit: 50},
		Allocator: ac, Backends: backends, Modules: o.Modules,
		TickInterval: 5 * time.Millisecond, MaxRunning: 16, MaxRequests: o.MaxRequests,
		RetryBackoff: []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond},
		OutputDir:    filepath.Join(b.Dir, "output"),
	}
	if o.Mutate != nil {
		o.Mutate(&b.Opts)
	}
	return b
}

// Start starts the system on b.Opts (a test restarting replaces the
// modules there first); every applied event wakes WaitFor. The system
// stops when the test ends, if Stop did not stop it before.
func (b *Bundle) Start() *actors.System {
	b.T.Helper()
	sys, err := actors.Start(b.Opts)
	require.NoError(b.T, err)
	b.Sys = sys
	sys.Subscribe(func(actors.Notice) {
		select {
		case b.wake <- struct{}{}:
		default:
		}
	})
	once := &sync.Once{}
	b.stop = once
	b.T.Cleanup(func() { b.stopOnce(sys, once) })
	return sys
}

// Stop stops the running system and fails the test if stopping fails.
func (b *Bundle) Stop() {
	b.T.Helper()
	if b.Sys != nil {
		b.stopOnce(b.Sys, b.stop)
	}
}

func (b *Bundle) stopOnce(sys *actors.System, once *sync.Once) {
	once.Do(func() { require.NoError(b.T, sys.Stop()) })
}

// WaitFor waits until cond holds, re-checking after every applied event;
// the deadline only catches a broken test.
func (b *Bundle) WaitFor(what string, cond func() bool) {
	b.T.Helper()
	deadline := time.After(60 * time.Second)
	for !cond() {
		select {
		case <-b.wake:
		case <-deadline:
			b.T.Fatalf("timed out waiting for %s", what)
		}
	}
}

// WaitModule waits until cond holds on module name's state, read inside
// its host.
func (b *Bundle) WaitModule(name, what string, cond func(modules.Module) bool) {
	b.T.Helper()
	b.WaitFor(what, func() bool {
		ok := false
		require.NoError(b.T, b.Sys.WithModule(name, func(m modules.Module) { ok = cond(m) }))
		return ok
	})
}

// Command sends cmd to its module's host and fails the test unless the
// module's events are durable and applied.
func (b *Bundle) Command(cmd *pb.ModuleCommand) *pb.ModuleCommandReply {
	b.T.Helper()
	r, err := b.Sys.Command(cmd)
	require.NoError(b.T, err)
	return r
}

// Events decodes the log's events of owner ("" = all), in seq order.
func (b *Bundle) Events(owner string) []*pb.Event {
	b.T.Helper()
	return fanotest.Events(b.T, b.Log, owner)
}
