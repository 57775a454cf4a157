package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"fano/actors"
	"fano/actors/allocator"
	"fano/gateway"
	"fano/gateway/sim"
	"fano/modules"
	"fano/modules/probe"
	"fano/pb"
	"fano/wal"
)

const testToken = "test-token-0123456789abcdef"

// fixture is a real system (WAL in a temp dir, sim backend, the probe
// module and the notebook module below) behind a real panel served by
// httptest on 127.0.0.1. The clock is fake and the sim answers after
// simLatency on it: at start the probe's first task runs with its request
// in flight and the other two wait (one request at a time), and nothing
// moves until the test advances the clock.
type fixture struct {
	t       *testing.T
	clock   *clockwork.FakeClock
	sys     *actors.System
	srv     *Server
	ts      *httptest.Server
	backend *sim.Backend
	notices chan actors.Notice
	logBuf  *syncBuffer
	// notebook is the fixture's notebook module (read it only through
	// its atomics: its host actor owns the rest).
	notebook *notebook
	// cond is the condition the backend says it is in (nil: ready).
	cond *atomic.Pointer[gateway.Condition]
}

type fixtureOpts struct {
	clientBuffer int
	origins      []string
	health       HealthSource
	modules      []string
	storage      *actors.StorageWatch
	webhook      Webhook
	hosts        HostSource
}

func newFixture(t *testing.T, fo fixtureOpts) *fixture {
	t.Helper()
	dir := t.TempDir()
	log, err := wal.Open(filepath.Join(dir, "fano.db"), wal.Options{NoSync: true})
	require.NoError(t, err)
	nb := newNotebook()
	cond := &atomic.Pointer[gateway.Condition]{}
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	be := sim.New(sim.Config{Name: "simA", Seed: 7, HourlyLimit: 1000, DeepDailyLimit: 5, Latency: simLatency}, clock)
	logBuf := &syncBuffer{}
	logger := zerolog.New(logBuf)
	sys, err := actors.Start(actors.Options{
		Log: log, Clock: clock, Logger: logger,
		Allocator: allocator.Config{BufferPercent: 10, Backends: []allocator.BackendConfig{
			{Name: "simA", Kind: allocator.KindSim, HourlyLimit: 1000, DeepDailyLimit: 5, MaxConcurrency: 1}}},
		Backends: []gateway.Backend{circuitBackend{be, cond}},
		Modules: []modules.Module{
			probe.New(probe.Config{Questions: []string{"q zero?", "q one?", "q two?"}, Turns: 2}),
			nb,
		},
		TickInterval: time.Hour, // the test ticks
		OutputDir:    filepath.Join(dir, "output"),
		Storage:      fo.storage,
	})
	require.NoError(t, err)
	f := &fixture{t: t, clock: clock, sys: sys, backend: be, notices: make(chan actors.Notice, 10000), logBuf: logBuf, notebook: nb, cond: cond}
	unsub := sys.Subscribe(func(n actors.Notice) {
		select {
		case f.notices <- n:
		default:
		}
	})
	// The panel starts once the system runs, as in `fano run`; here once
	// q0's first request is in flight, so the counts below are exact.
	// Its quota use too: the request goes out once that is durable,
	// which may be before the allocator has applied it.
	f.waitFor("q0's request in flight, its quota used, q1 and q2 queued", func() bool {
		t, _ := f.sys.Task(q0)
		return t.GetState() == pb.TaskState_TASK_STATE_RUNNING && t.GetConversation().GetAwaitingResponse() &&
			f.sys.Quotas()[0].HourlyUsed == 1 &&
			f.state(q1) == pb.TaskState_TASK_STATE_PENDING && f.state(q2) == pb.TaskState_TASK_STATE_PENDING
	})
	f.srv, err = New(Options{Sys: sys, Token: testToken, Logger: logger, DataDir: dir, ClientBuffer: fo.clientBuffer,
		AllowedOrigins: fo.origins, Health: fo.health, Backends: []gateway.Backend{circuitBackend{be, cond}},
		WALStatsEvery: time.Nanosecond, Modules: fo.modules, AlertWebhook: fo.webhook, Hosts: fo.hosts})
	require.NoError(t, err)
	f.ts = httptest.NewServer(f.srv.Handler())
	t.Cleanup(func() {
		f.ts.Close()
		require.NoError(t, f.srv.Close())
		unsub()
		require.NoError(t, sys.Stop())
		require.NoError(t, log.Close())
		// No secret in any log line.
		require.NotContains(t, logBuf.String(), testToken)
	})
	return f
}

// circuitBackend gives the sim backend a circuit state, as the gateway
// hosts' breakers will.
type circuitBackend struct {
	*sim.Backend
	cond *atomic.Pointer[gateway.Condition] // what it says of itself; nil: ready
}

// Condition is what the backend says of itself (a login wall, say), as
// browser backends do.
func (c circuitBackend) Condition() gateway.Condition {
	if p := c.cond.Load(); p != nil {
		return *p
	}
	return gateway.Condition{State: gateway.StateReady}
}

func (circuitBackend) State() string { return "closed" }

// MemoryBytes: the fixture's backend reports a local process's memory, as
// a browser backend does.
func (circuitBackend) MemoryBytes() int64 { return fixtureMemory }

const fixtureMemory = 123456789

// simLatency is how long the sim takes to answer, on the fake clock.
const simLatency = time.Second

// inFlightWaiters is the number of fake-clock waiters while a request is
// in flight: the system's tick loop, the executor's request timeout and
// the sim's latency timer.
const inFlightWaiters = 3

// waitFor waits on the system's notices until cond holds.
func (f *fixture) waitFor(what string, cond func() bool) {
	f.t.Helper()
	deadline := time.After(10 * time.Second)
	// Notices wake it; the ticker re-checks too, since a notice dropped
	// from a full buffer must not leave it waiting on a quiet system.
	recheck := time.NewTicker(10 * time.Millisecond)
	defer recheck.Stop()
	for !cond() {
		select {
		case <-f.notices:
		case <-recheck.C:
		case <-deadline:
			f.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// drive lets the sim answer (advancing the fake clock whenever a request
// is in flight and the actors have nothing left to do) until cond holds.
func (f *fixture) drive(what string, cond func() bool) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for !cond() {
		bctx, bcancel := context.WithCancel(ctx)
		inFlight := make(chan error, 1)
		go func() { inFlight <- f.clock.BlockUntilContext(bctx, inFlightWaiters) }()
		select {
		case err := <-inFlight:
			bcancel()
			if err != nil {
				f.t.Fatalf("timed out driving to %s", what)
			}
			// cond may have come true while the goroutine waited: the
			// request now in flight is then the next task's (its
			// notice lost the select to inFlight), and advancing would
			// answer it behind the test's back.
			if cond() {
				return
			}
			if sim := f.sys.Simulation(); sim.QueuedMessages() > 0 {
				// The actors have work left that may meet cond (a
				// completion not yet applied while the next task's
				// request already waits): the clock moves once it is
				// done, as in `fano simulate`.
				select {
				case <-sim.Activity():
				case <-f.notices:
				case <-ctx.Done():
					f.t.Fatalf("timed out driving to %s", what)
				}
				continue
			}
			f.clock.Advance(simLatency)
		case <-f.notices:
			bcancel()
			<-inFlight
		case <-ctx.Done():
			bcancel()
			f.t.Fatalf("timed out driving to %s", what)
		}
	}
}

// state returns a task's state (UNSPECIFIED if unknown).
func (f *fixture) state(id string) pb.TaskState {
	t, _ := f.sys.Task(id)
	return t.GetState()
}

func (f *fixture) is(id string, st pb.TaskState) func() bool {
	return func() bool { return f.state(id) == st }
}

type response struct {
	code int
	body []byte
	hdr  http.Header
}

func (r response) json(t *testing.T, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(r.body, v), "body: %s", r.body)
}

func (r response) errorMessage(t *testing.T) string {
	t.Helper()
	var e apiError
	r.json(t, &e)
	require.NotEmpty(t, e.Error, "an error answer has a message")
	return e.Error
}

// do sends a request; token "" sends none.
func (f *fixture) do(method, path, token string, body string) response {
	f.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, f.ts.URL+path, rd)
	require.NoError(f.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := f.ts.Client().Do(req)
	require.NoError(f.t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(f.t, err)
	require.NotContains(f.t, string(data), testToken, "no response carries the token")
	return response{code: resp.StatusCode, body: data, hdr: resp.Header}
}

// syncBuffer is a concurrency-safe log sink.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// notebook is a small real module with every optional capability the
// panel uses: it takes seeds and comments, lists its sections and renders
// a document. Decide* never change state; Apply does.
type notebook struct {
	sections map[string][]string // section id -> comments
	seeds    []string
	// healed: a "doomed" task's check passes (until then it fails, so a
	// test has a FAILED task to retry).
	healed atomic.Bool
}

func newNotebook() *notebook {
	return &notebook{sections: map[string][]string{"intro": nil, "planes": nil}}
}

func (n *notebook) Name() string                 { return "notebook" }
func (n *notebook) TaskTypes() []string          { return []string{"address_comment", "doomed"} }
func (n *notebook) Propose(time.Time) []*pb.Task { return nil }
func (n *notebook) NextAction(t *pb.Task) (modules.Action, error) {
	if t.GetTaskType() == "doomed" && !n.healed.Load() {
		return modules.Action{}, errors.New("the order-10 check found no plane yet")
	}
	return modules.Action{Kind: modules.ActionDone}, nil
}

// doomedTask is a notebook task that fails until the notebook is healed.
func doomedTask(subject string) *pb.Task {
	return &pb.Task{Id: modules.TaskKey("notebook", "doomed", subject), Module: "notebook", TaskType: "doomed",
		Subject: subject, MaxRequests: 1}
}
func (n *notebook) DecideResponse(*pb.Task, string, time.Time) ([]*pb.ModuleEvent, error) {
	return nil, nil
}
func (n *notebook) DecideCompletion(*pb.Task, time.Time) ([]*pb.ModuleEvent, error) { return nil, nil }
func (n *notebook) DecideFailure(*pb.Task, string, time.Time) ([]*pb.ModuleEvent, error) {
	return nil, nil
}

func (n *notebook) DecideAddSeed(text string, priority int, now time.Time) ([]*pb.ModuleEvent, error) {
	if priority < 0 || priority > 100 {
		return nil, fmt.Errorf("notebook: priority %d: must be from 0 to 100", priority)
	}
	return []*pb.ModuleEvent{{Type: "seed_added", Data: []byte(text)}}, nil
}

func (n *notebook) DecideAddComment(section, text string, now time.Time) ([]*pb.ModuleEvent, error) {
	if _, ok := n.sections[section]; !ok {
		return nil, fmt.Errorf("unknown section %q", section)
	}
	return []*pb.ModuleEvent{{Type: "comment_added", Data: []byte(section + "\x00" + text)}}, nil
}

func (n *notebook) Apply(e *pb.ModuleEvent, at time.Time) error {
	switch e.GetType() {
	case "seed_added":
		n.seeds = append(n.seeds, string(e.GetData()))
	case "comment_added":
		sec, text, _ := strings.Cut(string(e.GetData()), "\x00")
		n.sections[sec] = append(n.sections[sec], text)
	default:
		return fmt.Errorf("notebook: unknown event %q", e.GetType())
	}
	return nil
}

func (n *notebook) Snapshot() ([]byte, error) {
	return json.Marshal(map[string]any{"sections": n.sections, "seeds": n.seeds})
}

func (n *notebook) Restore(data []byte) error {
	var s struct {
		Sections map[string][]string
		Seeds    []string
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	n.sections, n.seeds = s.Sections, s.Seeds
	return nil
}

func (n *notebook) SectionIDs() []string {
	ids := make([]string, 0, len(n.sections))
	for id := range n.sections {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func (n *notebook) DocumentMarkdown() string {
	var b strings.Builder
	b.WriteString("# Notebook\n")
	for _, id := range n.SectionIDs() {
		fmt.Fprintf(&b, "\n<a id=\"%s\"></a>\n\n## %s\n\nA plane of order $n$ has $n^2+n+1$ points.\n\n", id, id)
		for _, c := range n.sections[id] {
			fmt.Fprintf(&b, "- comment: %s\n", c)
		}
	}
	for _, s := range n.seeds {
		fmt.Fprintf(&b, "\nseed: %s\n", s)
	}
	return b.String()
}
