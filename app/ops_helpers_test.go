package app

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"fano/actors"
	"fano/actors/allocator"
	"fano/actors/scheduler"
	"fano/gateway"
	"fano/gateway/sim"
	"fano/modules"
	"fano/modules/probe"
	"fano/pb"
	"fano/wal"
)

// opsSys is an in-process fano for the ops tests: a real WAL file, sim
// backends and the probe module on a fake clock, and a feed of notices.
type opsSys struct {
	t      *testing.T
	dir    string
	clock  *clockwork.FakeClock
	log    *wal.Log
	sys    *actors.System
	sims   []*sim.Backend
	events chan actors.Notice
}

type opsSysConfig struct {
	backends    []string
	latency     time.Duration // on the fake clock
	timeoutRate float64       // 1: every call hangs until cancelled
	probe       probe.Config
	wrap        func(*sim.Backend) gateway.Backend
}

func startOpsSys(t *testing.T, c opsSysConfig) *opsSys {
	t.Helper()
	if len(c.backends) == 0 {
		c.backends = []string{"alpha"}
	}
	dir := t.TempDir()
	log, err := wal.Open(filepath.Join(dir, "fano.db"), wal.Options{LockTimeout: time.Second, NoSync: true})
	require.NoError(t, err)
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	o := &opsSys{t: t, dir: dir, clock: clock, log: log, events: make(chan actors.Notice, 10000)}
	var backends []gateway.Backend
	ac := allocator.Config{BufferPercent: 10}
	for i, name := range c.backends {
		s := sim.New(sim.Config{Name: name, Style: "api", Seed: int64(i + 1), Latency: c.latency, HourlyLimit: 1000, TimeoutRate: c.timeoutRate}, clock)
		o.sims = append(o.sims, s)
		var b gateway.Backend = s
		if c.wrap != nil {
			b = c.wrap(s)
		}
		backends = append(backends, b)
		ac.Backends = append(ac.Backends, allocator.BackendConfig{Name: name, Kind: "sim", HourlyLimit: 1000, MaxConcurrency: 1})
	}
	opts := actors.Options{
		Log: log, Clock: clock, Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
		Scheduler: scheduler.Config{PreemptionThreshold: 20, MaxPending: 1000, MessageLimit: 50},
		Allocator: ac, Backends: backends, Modules: []modules.Module{probe.New(c.probe)},
		TickInterval: 100 * time.Millisecond, MaxRunning: 8, RequestTimeout: 100 * time.Hour,
		OutputDir: filepath.Join(dir, "output"),
	}
	sys, err := actors.Start(opts)
	require.NoError(t, err)
	o.sys = sys
	sys.Subscribe(func(n actors.Notice) {
		select {
		case o.events <- n:
		default:
		}
	})
	var once sync.Once
	t.Cleanup(func() {
		once.Do(func() { _ = sys.Stop() })
		_ = log.Close()
	})
	return o
}

// waitNotice waits for the first notice match accepts; the deadline only
// stops a broken test.
func (o *opsSys) waitNotice(what string, match func(actors.Notice) bool) actors.Notice {
	o.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case n := <-o.events:
			if match(n) {
				return n
			}
		case <-deadline:
			o.t.Fatalf("no %s", what)
		}
	}
}

// waitTask polls the system until the task satisfies ok (events before
// the test subscribed are not in o.events, the state has them).
func (o *opsSys) waitTask(id, what string, ok func(*pb.Task) bool) *pb.Task {
	o.t.Helper()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	for {
		if t, found := o.sys.Task(id); found && ok(t) {
			return t
		}
		select {
		case <-tick.C:
		case <-deadline:
			o.t.Fatalf("task %s: no %s", id, what)
		}
	}
}

func awaitingAnswer(t *pb.Task) bool {
	return t.State == pb.TaskState_TASK_STATE_RUNNING && t.Conversation.GetAwaitingResponse()
}

func isEvent(owner string, pick func(*pb.Event) bool) func(actors.Notice) bool {
	return func(n actors.Notice) bool { return n.Event != nil && n.Owner == owner && pick(n.Event) }
}

func isUpdate(updateType, kind string) func(actors.Notice) bool {
	return func(n actors.Notice) bool {
		return n.Update != nil && n.Update.Component == "health" && n.Update.UpdateType == updateType &&
			(kind == "" || n.Update.Data["kind"] == kind)
	}
}

// fakeDisk is a disk-usage source the test sets.
type fakeDisk struct{ free atomic.Uint64 }

func (d *fakeDisk) usage(string) (uint64, error) { return d.free.Load(), nil }

func within(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
