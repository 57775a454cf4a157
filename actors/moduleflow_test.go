package actors

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/actors/allocator"
	"fano/actors/scheduler"
	"fano/gateway"
	"fano/internal/fanotest"
	"fano/modules"
	"fano/modules/dedup"
	"fano/modules/documenter"
	"fano/modules/explorer"
	"fano/modules/researcher"
	"fano/pb"
	"fano/wal"
)

// flowRig runs the explorer, documenter and researcher (those asked for)
// on a real WAL in dir. With llm, sim backends on the real clock do the
// modules' LLM work; without, no task runs and only the flows move.
type flowRig struct {
	t     testing.TB
	dir   string
	log   *wal.Log
	clock clockwork.Clock
	opts  Options
	sys   *System
	ex    *explorer.Module
	doc   *documenter.Module
	res   *researcher.Module
	wake  chan struct{}
}

type flowRigOpts struct {
	explorer, documenter, researcher bool
	llm                              bool
	clock                            clockwork.Clock // default: real
	observe                          func(owner string, e *pb.Event)
	logger                           *zerolog.Logger
}

var flowBackends = []string{"chatgpt", "claude", "gemini"}

const flowSeed = "How many points and lines does the Fano plane have?"

func newFlowRig(t testing.TB, dir string, o flowRigOpts) *flowRig {
	t.Helper()
	if o.clock == nil {
		o.clock = clockwork.NewRealClock()
	}
	// Restarts reopen dir: the rig keeps the real file.
	log := fanotest.OpenWAL(t, dir, false)
	var err error
	r := &flowRig{t: t, dir: dir, log: log, clock: o.clock, wake: make(chan struct{}, 1)}
	checker := dedup.New(dedup.Config{Threshold: 0.6, BorderlineLow: 0.4})
	var mods []modules.Module
	if o.explorer {
		r.ex, err = explorer.New(explorer.Config{
			Seeds: []explorer.SeedSpec{{Text: flowSeed, Priority: 1}}, Backends: flowBackends,
			DeepBackends: []string{"gemini"}, PreferDeep: "gemini", ExplorationTurns: 1, MaxActiveThreads: 2,
			MinBless: 1, MaxReject: 3, Checker: checker,
			Dedup:       explorer.DedupConfig{Enabled: true, Threshold: 0.6, BorderlineLow: 0.4},
			MaxRequests: func(string) int { return 10 },
		})
		require.NoError(t, err)
		mods = append(mods, r.ex)
	}
	if o.documenter {
		r.doc, err = documenter.New(documenter.Config{Backends: flowBackends, MinBless: 1, Checker: checker})
		require.NoError(t, err)
		mods = append(mods, r.doc)
	}
	if o.researcher {
		src := filepath.Join(dir, "sources")
		require.NoError(t, os.MkdirAll(src, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(src, "hamming.md"),
			[]byte("# Hamming code\n\nThe Hamming code of length 7 is built from the Fano plane: its codewords of weight 3 are the lines."), 0o644))
		sources, problems, err := researcher.LoadSources(src)
		require.NoError(t, err)
		require.Empty(t, problems)
		r.res, err = researcher.New(researcher.Config{Sources: sources, GapRounds: -1})
		require.NoError(t, err)
		mods = append(mods, r.res)
	}
	var backends []gateway.Backend
	var ac allocator.Config
	if o.llm {
		backends, _, ac = fanotest.Sims{Names: flowBackends, Hourly: 10000, DeepAll: 100}.Build(o.clock)
	}
	logger := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	if o.logger != nil {
		logger = *o.logger
	}
	r.opts = Options{
		Log: log, Clock: o.clock, Logger: logger,
		Scheduler: scheduler.Config{PreemptionThreshold: 20, MaxPending: 10000, MessageLimit: 50},
		Allocator: ac, Backends: backends, Modules: mods,
		TickInterval: 5 * time.Millisecond, MaxRunning: 16, MaxRequests: func(string) int { return 10 },
		RetryBackoff: []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond},
		OutputDir:    filepath.Join(dir, "output"),
		Observe: func(owner string, e *pb.Event) {
			if o.observe != nil {
				o.observe(owner, e)
			}
			select {
			case r.wake <- struct{}{}:
			default:
			}
		},
	}
	return r
}

func (r *flowRig) start() {
	r.t.Helper()
	sys, err := Start(r.opts)
	require.NoError(r.t, err)
	r.sys = sys
	r.t.Cleanup(func() { _ = sys.Stop() })
}

// waitFor re-checks cond inside the hosts after every applied event; the
// deadline only catches a broken test.
func (r *flowRig) waitFor(what string, cond func() bool) {
	r.t.Helper()
	deadline := time.After(90 * time.Second)
	for !cond() {
		select {
		case <-r.wake:
		case <-deadline:
			r.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// in runs fn on a module's state inside its host.
func (r *flowRig) in(module string, fn func(modules.Module)) {
	r.t.Helper()
	require.NoError(r.t, r.sys.WithModule(module, fn))
}

func (r *flowRig) blessed() []explorer.Insight {
	var out []explorer.Insight
	r.in(explorer.Name, func(m modules.Module) { out = m.(*explorer.Module).Blessed() })
	return out
}

// allDelivered: at least one insight is blessed and the documenter
// acknowledged every one.
func (r *flowRig) allDelivered() bool {
	bl := r.blessed()
	for _, ins := range bl {
		if !ins.Delivered {
			return false
		}
	}
	return len(bl) > 0
}

func (r *flowRig) opportunities() map[string]documenter.Opportunity {
	out := map[string]documenter.Opportunity{}
	r.in(documenter.Name, func(m modules.Module) {
		for _, o := range m.(*documenter.Module).Opportunities() {
			out[o.Insight] = o
		}
	})
	return out
}

// moduleEvents lists the WAL's module events of module (with their
// times), of type typ when typ is not "".
func moduleEvents(t testing.TB, log fanotest.Replayer, module, typ string) []*pb.Event {
	t.Helper()
	var out []*pb.Event
	for _, e := range fanotest.Events(t, log, moduleOwner(module)) {
		if typ == "" || e.GetModuleEvent().GetType() == typ {
			out = append(out, e)
		}
	}
	return out
}

// field reads one JSON field of a module event's data.
func field(t testing.TB, e *pb.Event, name string) string {
	t.Helper()
	var d map[string]any
	require.NoError(t, json.Unmarshal(e.GetModuleEvent().GetData(), &d))
	s, _ := d[name].(string)
	return s
}

// countBy counts events by one data field.
func countBy(t testing.TB, evs []*pb.Event, name string) map[string]int {
	out := map[string]int{}
	for _, e := range evs {
		out[field(t, e, name)]++
	}
	return out
}

// assertReplayEqualsLive rebuilds each module from the WAL's events alone
// and compares it with the live module (the system is stopped).
func (r *flowRig) assertReplayEqualsLive() {
	r.t.Helper()
	fresh := newFlowRig(r.t, r.t.TempDir(), flowRigOpts{explorer: r.ex != nil, documenter: r.doc != nil, researcher: r.res != nil})
	pairs := map[string][2]modules.Module{}
	if r.ex != nil {
		pairs[explorer.Name] = [2]modules.Module{r.ex, fresh.ex}
	}
	if r.doc != nil {
		pairs[documenter.Name] = [2]modules.Module{r.doc, fresh.doc}
	}
	if r.res != nil {
		// The fresh researcher read the same source from its own dir.
		pairs[researcher.Name] = [2]modules.Module{r.res, fresh.res}
	}
	for name, p := range pairs {
		for _, e := range moduleEvents(r.t, r.log, name, "") {
			require.NoError(r.t, p[1].Apply(e.GetModuleEvent(), timeOf(e.At)), "replay %s", name)
		}
		live, err := p[0].Snapshot()
		require.NoError(r.t, err)
		replayed, err := p[1].Snapshot()
		require.NoError(r.t, err)
		assert.JSONEq(r.t, string(live), string(replayed), "%s: replay equals live", name)
	}
}

// The explorer blesses insights on the sim backends; each reaches the
// documenter through the module hosts (an insight_available event of the
// documenter's), once, and the explorer records the documenter's
// acknowledgment; replaying the WAL rebuilds both modules.
func TestFlowBlessedInsightReachesDocumenter(t *testing.T) {
	r := newFlowRig(t, t.TempDir(), flowRigOpts{explorer: true, documenter: true, llm: true})
	r.start()
	r.waitFor("every blessed insight delivered", r.allDelivered)
	bl := r.blessed()
	opps := r.opportunities()
	for _, ins := range bl {
		o, ok := opps[ins.ID]
		require.True(t, ok, "the documenter knows blessed insight %s", ins.ID)
		assert.Equal(t, ins.Text, o.Text)
		assert.Equal(t, ins.Tags, o.Tags)
		assert.Equal(t, flowSeed, o.Seed)
	}
	require.NoError(t, r.sys.Stop())

	avail := countBy(t, moduleEvents(t, r.log, documenter.Name, "insight_available"), "insight")
	delivered := countBy(t, moduleEvents(t, r.log, explorer.Name, "insight_delivered"), "insight")
	for _, ins := range bl {
		assert.Equal(t, 1, avail[ins.ID], "insight %s noted once", ins.ID)
		assert.Equal(t, 1, delivered[ins.ID], "insight %s acknowledged once", ins.ID)
	}
	r.assertReplayEqualsLive()
}

// The chain on the sim backends: blessed insights reach the documenter,
// whose new sections reach the researcher (section_noted), each
// acknowledged once.
func TestFlowSectionReachesResearcher(t *testing.T) {
	r := newFlowRig(t, t.TempDir(), flowRigOpts{explorer: true, documenter: true, researcher: true, llm: true})
	r.start()
	var sec documenter.Section
	r.waitFor("a section delivered to the researcher", func() bool {
		ok := false
		r.in(documenter.Name, func(m modules.Module) {
			for _, s := range m.(*documenter.Module).Sections() {
				if s.Delivered {
					sec, ok = s, true
				}
			}
		})
		return ok
	})
	var known map[string]string
	r.in(researcher.Name, func(m modules.Module) { known = m.(*researcher.Module).Sections() })
	assert.Equal(t, sec.Title, known[sec.ID], "the researcher knows the section's title")
	require.NoError(t, r.sys.Stop())
	assert.Equal(t, 1, countBy(t, moduleEvents(t, r.log, researcher.Name, "section_noted"), "id")[sec.ID], "noted once")
	assert.Equal(t, 1, countBy(t, moduleEvents(t, r.log, documenter.Name, "section_delivered"), "section")[sec.ID], "acknowledged once")
	r.assertReplayEqualsLive()
}

// A research finding's question becomes an explorer seed through the
// module hosts, recorded with the message it came from, and the
// researcher records it delivered.
func TestFlowFindingBecomesExplorerSeed(t *testing.T) {
	r := newFlowRig(t, t.TempDir(), flowRigOpts{explorer: true, researcher: true, llm: true})
	r.start()
	var finding researcher.Finding
	r.waitFor("a delivered finding", func() bool {
		ok := false
		r.in(researcher.Name, func(m modules.Module) {
			for _, f := range m.(*researcher.Module).Findings() {
				if f.Delivered {
					finding, ok = f, true
				}
			}
		})
		return ok
	})
	var seed explorer.SeedView
	r.in(explorer.Name, func(m modules.Module) {
		for _, s := range m.(*explorer.Module).Seeds() {
			if s.From == "researcher/finding/"+finding.ID {
				seed = s
			}
		}
	})
	assert.Equal(t, strings.TrimSpace(finding.Question), seed.Text, "the finding's question is a seed")
	require.NoError(t, r.sys.Stop())

	from := countBy(t, moduleEvents(t, r.log, explorer.Name, "seed_added"), "from")
	assert.Equal(t, 1, from["researcher/finding/"+finding.ID], "the finding is added once")
	r.assertReplayEqualsLive()
}

// Facts recorded while their receiver was not configured are sent when
// it is (the outbox is derived from the sender's state), and the
// receiver's events carry the time of the system's injected clock.
func TestFlowReceiverUsesInjectedClockAndCatchesUp(t *testing.T) {
	dir := t.TempDir()
	// 1. The explorer alone blesses; the researcher alone finds. Nothing
	// is sent: the receivers are not configured.
	r1 := newFlowRig(t, dir, flowRigOpts{explorer: true, llm: true})
	r1.start()
	r1.waitFor("a blessed insight", func() bool { return len(r1.blessed()) > 0 })
	require.NoError(t, r1.sys.Stop())
	assert.Empty(t, moduleEvents(t, r1.log, explorer.Name, "insight_delivered"), "no documenter, nothing delivered")
	require.NoError(t, r1.log.Close())

	r2 := newFlowRig(t, dir, flowRigOpts{researcher: true, llm: true})
	r2.start()
	r2.waitFor("a finding", func() bool {
		n := 0
		r2.in(researcher.Name, func(m modules.Module) { n = len(m.(*researcher.Module).Findings()) })
		return n > 0
	})
	require.NoError(t, r2.sys.Stop())
	require.NoError(t, r2.log.Close())

	// 2. All three on a fake clock, no LLM work: only the flows move.
	at := time.Date(2031, 2, 3, 4, 5, 6, 0, time.UTC)
	r3 := newFlowRig(t, dir, flowRigOpts{explorer: true, documenter: true, researcher: true, clock: clockwork.NewFakeClockAt(at)})
	r3.start()
	r3.waitFor("every blessed insight delivered", r3.allDelivered)
	r3.waitFor("every finding delivered", func() bool {
		var fs []researcher.Finding
		r3.in(researcher.Name, func(m modules.Module) { fs = m.(*researcher.Module).Undelivered() })
		return len(fs) == 0
	})
	for id, o := range r3.opportunities() {
		assert.True(t, o.AvailableAt.Equal(at), "opportunity %s available at the fake clock's time, not %v", id, o.AvailableAt)
	}
	var fromFindings []explorer.SeedView
	r3.in(explorer.Name, func(m modules.Module) {
		for _, s := range m.(*explorer.Module).Seeds() {
			if s.From != "" {
				fromFindings = append(fromFindings, s)
			}
		}
	})
	require.NotEmpty(t, fromFindings)
	for _, s := range fromFindings {
		assert.True(t, s.AddedAt.Equal(at), "seed %s added at the fake clock's time, not %v", s.ID, s.AddedAt)
	}
	require.NoError(t, r3.sys.Stop())
	for _, typ := range []string{"insight_available"} {
		for _, e := range moduleEvents(t, r3.log, documenter.Name, typ) {
			assert.Equal(t, at.UnixNano(), e.At, "%s event time", typ)
		}
	}
	for _, e := range moduleEvents(t, r3.log, explorer.Name, "insight_delivered") {
		assert.Equal(t, at.UnixNano(), e.At, "insight_delivered event time")
	}
	r3.assertReplayEqualsLive()
}

// A fano killed (SIGKILL) between the sender's event and the receiver's,
// or between the receiver's event and the sender's record of it, delivers
// the insight exactly once after the restart: the explorer's outbox still
// lists it, and the documenter takes an insight it knows as already
// taken.
func TestFlowCrashBetweenSenderAndReceiverDeliversOnce(t *testing.T) {
	for _, at := range []string{
		"module/explorer:insight_decided",     // the blessing is durable, the documenter has nothing
		"module/documenter:insight_available", // the documenter has it, the explorer's record of that is missing
	} {
		t.Run(at, func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			child := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestFlowCrashWorker$", "-test.count=1")
			child.Env = append(os.Environ(), "FANO_FLOW_CRASH_DIR="+dir, "FANO_FLOW_CRASH_AT="+at)
			out, err := child.CombinedOutput()
			var exit *exec.ExitError
			require.True(t, errors.As(err, &exit), "the worker must be killed, got %v:\n%s", err, out)
			ws, ok := exit.Sys().(syscall.WaitStatus)
			require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "the worker must die by SIGKILL: %v\n%s", err, out)
			insight := strings.TrimSpace(string(readFile(t, filepath.Join(dir, "crashed-at"))))
			require.NotEmpty(t, insight)

			// The WAL is as the crash left it.
			check, err := wal.Open(filepath.Join(dir, "fano.db"), wal.Options{LockTimeout: 5 * time.Second})
			require.NoError(t, err)
			before := countBy(t, moduleEvents(t, check, documenter.Name, "insight_available"), "insight")[insight]
			acked := countBy(t, moduleEvents(t, check, explorer.Name, "insight_delivered"), "insight")[insight]
			require.NoError(t, check.Close())
			assert.Zero(t, acked, "the crash came before the explorer recorded the delivery")
			if strings.HasPrefix(at, "module/explorer") {
				assert.Zero(t, before, "the crash came before the documenter's event")
			} else {
				assert.Equal(t, 1, before, "the crash came after the documenter's event")
			}

			// Restart with no LLM work: only the flows move.
			r := newFlowRig(t, dir, flowRigOpts{explorer: true, documenter: true})
			r.start()
			r.waitFor("insight "+insight+" delivered", func() bool {
				var ins explorer.Insight
				r.in(explorer.Name, func(m modules.Module) { ins, _ = m.(*explorer.Module).Insight(insight) })
				return ins.Delivered
			})
			_, ok = r.opportunities()[insight]
			assert.True(t, ok, "the documenter has the insight")
			require.NoError(t, r.sys.Stop())
			assert.Equal(t, 1, countBy(t, moduleEvents(t, r.log, documenter.Name, "insight_available"), "insight")[insight], "noted exactly once")
			assert.Equal(t, 1, countBy(t, moduleEvents(t, r.log, explorer.Name, "insight_delivered"), "insight")[insight], "acknowledged exactly once")
			r.assertReplayEqualsLive()
		})
	}
}

// TestFlowCrashWorker is the process the crash test kills: it runs the
// explorer and the documenter on the sims and SIGKILLs itself as soon as
// the event FANO_FLOW_CRASH_AT ("<owner>:<type>"; a blessing for
// insight_decided) is applied, which is after it is durable and before
// anything follows from it. It writes the insight's id to "crashed-at".
func TestFlowCrashWorker(t *testing.T) {
	dir, at := os.Getenv("FANO_FLOW_CRASH_DIR"), os.Getenv("FANO_FLOW_CRASH_AT")
	if dir == "" {
		t.Skip("run by TestFlowCrashBetweenSenderAndReceiverDeliversOnce")
	}
	owner, typ, _ := strings.Cut(at, ":")
	quiet := zerolog.Nop()
	r := newFlowRig(t, dir, flowRigOpts{explorer: true, documenter: true, llm: true, logger: &quiet,
		observe: func(o string, e *pb.Event) {
			me := e.GetModuleEvent()
			if o != owner || me.GetType() != typ {
				return
			}
			var d struct{ Insight, Outcome string }
			if json.Unmarshal(me.Data, &d) != nil || (typ == "insight_decided" && d.Outcome != "blessed") {
				return
			}
			if err := os.WriteFile(filepath.Join(dir, "crashed-at"), []byte(d.Insight), 0o644); err != nil {
				panic(err)
			}
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal ends the process
		}})
	r.start()
	r.waitFor("the crash point", func() bool { return false })
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// crashingDocumenter is the documenter whose host fails (panics) on the
// first message it gets: the supervisor restarts the host and that
// message is gone, as in a crash of the receiver alone.
type crashingDocumenter struct {
	*documenter.Module
	once    sync.Once
	crashed chan string
}

func (c *crashingDocumenter) DecideReceive(msg *pb.ModuleMessage, now time.Time) ([]*pb.ModuleEvent, error) {
	c.once.Do(func() {
		c.crashed <- msg.Id
		panic("crashingDocumenter: the first message fails its host")
	})
	return c.Module.DecideReceive(msg, now)
}

// A message lost with its receiver's host (restarted by its supervisor)
// is sent again once it has waited resendAfter unacknowledged, and taken
// once.
func TestFlowLostMessageIsResent(t *testing.T) {
	dir := t.TempDir()
	r1 := newFlowRig(t, dir, flowRigOpts{explorer: true, llm: true})
	r1.start()
	r1.waitFor("a blessed insight", func() bool { return len(r1.blessed()) > 0 })
	require.NoError(t, r1.sys.Stop())
	require.NoError(t, r1.log.Close())

	clock := clockwork.NewFakeClockAt(time.Date(2031, 2, 3, 4, 5, 6, 0, time.UTC))
	quiet := zerolog.Nop() // the supervisor logs the panic
	r := newFlowRig(t, dir, flowRigOpts{explorer: true, documenter: true, clock: clock, logger: &quiet})
	crashing := &crashingDocumenter{Module: r.doc, crashed: make(chan string, 1)}
	for i, m := range r.opts.Modules {
		if m == modules.Module(r.doc) {
			r.opts.Modules[i] = crashing
		}
	}
	r.start()
	var lost string
	select {
	case lost = <-crashing.crashed:
	case <-time.After(90 * time.Second):
		t.Fatal("no message reached the documenter")
	}
	insight := strings.TrimPrefix(lost, "explorer/insight/")
	delivered := func() bool {
		var ins explorer.Insight
		r.in(explorer.Name, func(m modules.Module) { ins, _ = m.(*explorer.Module).Insight(insight) })
		return ins.Delivered
	}
	assert.False(t, delivered(), "the lost message is not acknowledged")
	// Before resendAfter nothing is resent; then a tick resends it. (The
	// system's ticker is the clock's only waiter here.)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	require.NoError(t, clock.BlockUntilContext(ctx, 1))
	clock.Advance(resendAfter - time.Second)
	assert.False(t, delivered())
	clock.Advance(time.Second)
	r.waitFor("the lost message resent and taken", delivered)
	require.NoError(t, r.sys.Stop())
	assert.Equal(t, 1, countBy(t, moduleEvents(t, r.log, documenter.Name, "insight_available"), "insight")[insight], "taken once")
	assert.Equal(t, 1, countBy(t, moduleEvents(t, r.log, explorer.Name, "insight_delivered"), "insight")[insight], "acknowledged once")
}
