package documenter

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"fano/actors"
	"fano/actors/allocator"
	"fano/actors/scheduler"
	"fano/gateway"
	"fano/gateway/sim"
	"fano/modules"
	"fano/modules/dedup"
	"fano/pb"
	"fano/wal"
)

// bundle is one test's fano: a real WAL in a temp dir, sim backends with
// no latency, the documenter alone (insights are fed by command here; in
// fano they come from the explorer as module messages), and a feed of
// notices that wakes the waits.
type bundle struct {
	t    *testing.T
	dir  string
	log  *wal.Log
	cfg  Config
	mod  *Module
	sys  *actors.System
	wake chan struct{}
}

func setup(t *testing.T, cfg Config) *bundle {
	t.Helper()
	dir := t.TempDir()
	log, err := wal.Open(filepath.Join(dir, "fano.db"), wal.Options{LockTimeout: time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = log.Close() })
	names := []string{"chatgpt", "claude", "gemini"}
	clock := clockwork.NewRealClock()
	var backends []gateway.Backend
	ac := allocator.Config{BufferPercent: 10}
	for i, name := range names {
		backends = append(backends, sim.New(sim.Config{Name: name, Style: "api", Seed: int64(i + 1), HourlyLimit: 10000, DeepDailyLimit: 100}, clock))
		ac.Backends = append(ac.Backends, allocator.BackendConfig{Name: name, Kind: "sim", HourlyLimit: 10000, DeepDailyLimit: 100, MaxConcurrency: 1})
	}
	cfg.Backends, cfg.Title = names, "Finite Projective Planes"
	cfg.MinBless = 1 // the sim's verdicts are random: the flow is under test
	cfg.Checker = dedup.New(dedup.Config{Threshold: 0.6, BorderlineLow: 0.4})
	m, err := New(cfg)
	require.NoError(t, err)
	b := &bundle{t: t, dir: dir, log: log, cfg: cfg, mod: m, wake: make(chan struct{}, 1)}
	sys, err := actors.Start(actors.Options{
		Log: log, Clock: clock, Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
		Scheduler: scheduler.Config{PreemptionThreshold: 20, MaxPending: 10000, MessageLimit: 50},
		Allocator: ac, Backends: backends, Modules: []modules.Module{m},
		TickInterval: 5 * time.Millisecond, MaxRunning: 16, MaxRequests: func(string) int { return 5 },
		RetryBackoff: []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond},
		OutputDir:    filepath.Join(dir, "output"),
	})
	require.NoError(t, err)
	b.sys = sys
	sys.Subscribe(func(actors.Notice) {
		select {
		case b.wake <- struct{}{}:
		default:
		}
	})
	t.Cleanup(func() { require.NoError(t, sys.Stop()) })
	return b
}

// note hands the documenter a blessed insight as the explorer's host would.
func (b *bundle) note(id, text string) {
	b.t.Helper()
	require.NoError(b.t, b.sys.Deliver(&pb.ModuleMessage{Id: "explorer/insight/" + id, From: "explorer", To: Name,
		Body: &pb.ModuleMessage_InsightBlessed{InsightBlessed: &pb.InsightBlessed{InsightId: id, Text: text}}}))
}

// waitFor waits until cond holds inside the documenter's host.
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

func settled(m *Module) bool {
	if m.Backlog() > 0 {
		return false
	}
	for _, c := range m.Comments() {
		if c.Status == CommentOpen {
			return false
		}
	}
	return true
}

func walEvents(t *testing.T, log *wal.Log, owner string) []*pb.Event {
	t.Helper()
	var out []*pb.Event
	require.NoError(t, log.Replay(1, func(ent wal.Entry) error {
		if owner == "" || ent.Owner == owner {
			var e pb.Event
			require.NoError(t, proto.Unmarshal(ent.Payload, &e), "wal entry %d", ent.Seq)
			out = append(out, &e)
		}
		return nil
	}))
	return out
}

// A comment added while incorporation work waits is started before any
// of that work (spec §6.5: unresolved comments first), and the document
// files are written after every change; replaying the WAL rebuilds the
// same state.
func TestCommentAddressedBeforePendingIncorporation(t *testing.T) {
	b := setup(t, Config{})
	b.note("in-1", factPoints)
	b.waitFor("the first section", func(m *Module) bool { return len(m.SectionIDs()) == 1 && settled(m) })
	var sec string
	require.NoError(t, b.sys.WithModule(Name, func(m modules.Module) { sec = m.(*Module).SectionIDs()[0] }))

	// Pending work and a comment arrive while no new work starts.
	b.sys.SetAccepting(false)
	b.note("in-2", factGroup)
	b.note("in-3", factOrder6)
	_, err := b.sys.Command(&pb.ModuleCommand{Module: Name,
		Command: &pb.ModuleCommand_AddComment{AddComment: &pb.AddComment{SectionId: sec, Text: "Please add a picture of the plane."}}})
	require.NoError(t, err)
	b.sys.SetAccepting(true)
	b.waitFor("everything incorporated and the comment addressed", func(m *Module) bool {
		return settled(m) && len(m.Opportunities()) == 3 // each in a section of its own or extending one
	})

	var order []string
	for _, e := range walEvents(t, b.log, "scheduler") {
		if ts := e.GetTaskStarted(); ts != nil {
			order = append(order, ts.TaskId)
		}
	}
	ci := slices.IndexFunc(order, func(id string) bool { return strings.Contains(id, "/"+TypeAddressComment+"/") })
	require.GreaterOrEqual(t, ci, 0, "the comment task started: %v", order)
	for i, id := range order {
		if strings.Contains(id, "/in-2/") || strings.Contains(id, "/in-3/") {
			assert.Less(t, ci, i, "the comment started before %s (order %v)", id, order)
		}
	}

	var md string
	var snap []byte
	require.NoError(t, b.sys.WithModule(Name, func(mm modules.Module) {
		m := mm.(*Module)
		md = m.DocumentMarkdown()
		snap, _ = m.Snapshot()
		assert.Equal(t, CommentAddressed, m.Comments()[0].Status)
	}))
	b.waitFor("DOCUMENT.md written", func(m *Module) bool {
		disk, err := os.ReadFile(filepath.Join(b.dir, "output", DocumentMD))
		return err == nil && string(disk) == md
	})

	// Replay of the module's WAL events alone rebuilds the same state.
	r, err := New(Config{Backends: b.cfg.Backends, Title: b.cfg.Title, MinBless: 1, Checker: dedup.New(dedup.Config{})})
	require.NoError(t, err)
	for _, e := range walEvents(t, b.log, "module/"+Name) {
		require.NoError(t, r.Apply(e.GetModuleEvent(), time.Unix(0, e.At)))
	}
	assert.JSONEq(t, string(snap), snapshot(t, r))
}
