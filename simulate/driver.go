// Package simulate runs fano for days on a virtual clock: the real actor
// tree, modules and WAL, every backend replaced by a simulated one with
// its limits, and a schedule of faults (`fano simulate`). The driver
// advances the clock whenever the system has nothing left to do before
// its next timer, and writes a report of what the days yielded and cost.
package simulate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"sync/atomic"
	"syscall"
	"time"

	"fano/actors"
	"fano/gateway/sim"
	"fano/pb"
)

// Fano is one running fano on the simulation's data directory.
type Fano interface {
	System() *actors.System
	// Stop shuts down as `fano run` does on SIGTERM, and closes the WAL.
	Stop() error
	// Kill stops without a shutdown, as a SIGKILL would: nothing more
	// reaches the WAL once it is called.
	Kill() error
	// Storage is the watch of the WAL's write faults: a full disk is
	// reported to it.
	Storage() *actors.StorageWatch
}

// Env is what a Starter gets: the virtual clock, the simulated backends
// (the starter wraps them as fano wraps any backend) and the free disk
// space the health monitor is to read.
type Env struct {
	Clock    *Clock
	Backends []*Backend
	DiskFree func(path string) (uint64, error)
	// Observe must see every event the actors apply, from the first on
	// (actors.Options.Observe): the report counts them.
	Observe func(owner string, e *pb.Event)
	// Turns lines up the calls of one instant: the starter has each
	// backend's circuit breaker wait there (breaker.Config.Turn).
	Turns *Turns
	// Notices must see every notice the system publishes from the first
	// on (the starter subscribes it before the health monitor's first
	// check, which alerts at once on a full disk): the report lists the
	// alerts.
	Notices func(actors.Notice)
}

// Starter starts fano on the data directory (recovering what is there).
type Starter func(Env) (Fano, error)

// BackendSpec is what the config says of one backend.
type BackendSpec struct {
	Name, Kind                        string // Kind: the config type (browser, api, sim)
	HourlyLimit, DeepDailyLimit       int
	Style                             string
	Latency, Jitter                   time.Duration // sim backends: the config's; others: by type
	HourlyResetMinute, DailyResetHour int
}

// Options of a simulation.
type Options struct {
	Days     int
	Seed     int64
	Schedule *Schedule
	Backends []BackendSpec
	Start    Starter
	// TickInterval is the config's scheduler tick: while the system works
	// the clock moves at most this far at a time.
	TickInterval time.Duration
	// MaxIdleStep bounds a jump of the clock while nothing happens
	// (default 1 min): time-based work (a window reset, a retry due) is
	// never noticed later than this.
	MaxIdleStep time.Duration
	// SampleEvery is how often backend states and budgets are sampled
	// (default 1 min; the clock always stops there).
	SampleEvery time.Duration
	// SeedModule takes the schedule's daily questions ("explorer").
	SeedModule string
	// Trace, if set, gets a line per applied event and per step of the
	// clock (FANO_SIMULATE_EVENTS=file does the same): for finding where
	// two runs of one seed part.
	Trace io.Writer
	// ConfigSeeds is how many questions the config itself gives the seed
	// module: they count toward day 1's questions, so every day starts
	// with the same number of them.
	ConfigSeeds int
	// Progress, if set, is called at the end of every simulated day.
	Progress func(day int, d DayReport)
}

// Epoch is the virtual midnight of day 1 (a Monday): fixed, so a seed
// gives the same run on any day it is run.
var Epoch = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

// latencyByKind is how long a real backend of each type takes to answer.
var latencyByKind = map[string][2]time.Duration{
	"browser": {40 * time.Second, 40 * time.Second},
	"api":     {6 * time.Second, 6 * time.Second},
}

type action struct {
	at    time.Time
	fault *Fault
	on    bool
	seeds int
	day   int
}

type driver struct {
	o        Options
	clock    *Clock
	backends []*Backend
	byName   map[string]*Backend
	fano     Fano
	unsub    func()
	col      *collector
	diskFull bool // the driver acted on a disk_full start, not yet on its end
	faults   []Fault

	sched *goroutineStates
	// syscallFloor: goroutines in a system call for good (see
	// goroutineStates.syscallFloor).
	syscallFloor uint64
	nap          *time.Timer // settle's sleep between two looks
	wakes        [3]int      // what ended those sleeps: the system, the clock, the nap (trace)
	// realTimeWakes counts what checkRealTime found.
	realTimeWakes int
	turns         *Turns
	// turnsGiven counts the calls let go in turn.
	turnsGiven int
	decided    progress // at the end of the last settle
	// settledChange: a settle between the steps (see advance) saw a change.
	settledChange bool
	timeouts      int
	steps         int64
	wallStart     time.Time
}

// Run simulates o.Days days and returns the report (not yet written).
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Days <= 0 {
		return nil, errors.New("simulate: days must be at least 1")
	}
	if o.TickInterval <= 0 {
		o.TickInterval = 100 * time.Millisecond
	}
	if o.MaxIdleStep <= 0 {
		o.MaxIdleStep = time.Minute
	}
	if o.SampleEvery <= 0 {
		o.SampleEvery = time.Minute
	}
	if o.Schedule == nil {
		o.Schedule = &Schedule{Name: "none"}
	}
	d := &driver{o: o, clock: NewClock(Epoch), byName: map[string]*Backend{}, wallStart: time.Now(), sched: newGoroutineStates(), nap: time.NewTimer(time.Hour), turns: NewTurns()}
	d.clock.WatchTickers(o.TickInterval)
	d.syscallFloor = d.sched.syscallFloor()
	var names []string
	for i, spec := range o.Backends {
		lat := [2]time.Duration{spec.Latency, spec.Jitter}
		if l, ok := latencyByKind[spec.Kind]; ok {
			lat = l
		}
		s := sim.New(sim.Config{
			Name: spec.Name, Style: spec.Style, Seed: o.Seed*1000 + int64(i) + 1,
			Latency: lat[0], Jitter: lat[1],
			HourlyLimit: spec.HourlyLimit, DeepDailyLimit: spec.DeepDailyLimit,
			HourlyResetMinute: spec.HourlyResetMinute, DailyResetHour: spec.DailyResetHour,
			OpenFacts: true, // a fortnight outlasts the built-in facts
		}, d.clock)
		b := NewBackend(s, spec.Kind, d.clock, o.Seed)
		d.backends = append(d.backends, b)
		d.byName[spec.Name] = b
		names = append(names, spec.Name)
	}
	sort.Strings(names)
	faults, err := o.Schedule.Expand(Epoch, o.Days, names)
	if err != nil {
		return nil, err
	}
	d.faults = faults
	end := Epoch.Add(time.Duration(o.Days) * 24 * time.Hour)
	var plan []action
	for i := range faults {
		f := &faults[i]
		if !f.Start.Before(end) {
			continue
		}
		plan = append(plan, action{at: f.Start, fault: f, on: true})
		if f.End.After(f.Start) && f.Kind != KindBrowserCrash {
			plan = append(plan, action{at: f.End, fault: f, on: false})
		}
	}
	if o.Schedule.SeedsPerDay > 0 && o.SeedModule != "" {
		for day := 1; day <= o.Days; day++ {
			n := o.Schedule.SeedsPerDay
			if day == 1 {
				n = max(0, n-o.ConfigSeeds)
			}
			if n > 0 {
				plan = append(plan, action{at: Epoch.Add(time.Duration(day-1) * 24 * time.Hour), seeds: n, day: day})
			}
		}
	}
	sort.SliceStable(plan, func(i, j int) bool { return plan[i].at.Before(plan[j].at) })

	d.col = newCollector(Epoch, o.Days, names, d.byName)
	if o.Trace != nil {
		d.col.trace = o.Trace
	} else if eventTrace != nil {
		d.col.trace = eventTrace
	}
	if err := d.start(); err != nil {
		return nil, err
	}
	defer func() {
		if d.fano != nil {
			d.unsub()
			_ = d.fano.Stop()
		}
	}()
	step := o.TickInterval
	nextMinute := Epoch
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		now := d.clock.Now()
		// What the clock fired is handled before a fault lands: a restart
		// in the middle of a tick's work would cut it where the OS
		// happened to be.
		changed := d.settle() || d.settledChange
		d.settledChange = false
		acted := false
		for len(plan) > 0 && !plan[0].at.After(now) {
			a := plan[0]
			plan = plan[1:]
			if err := d.do(a); err != nil {
				return nil, err
			}
			acted = true
		}
		if acted {
			changed = d.settle() || changed
		}
		if !now.Before(nextMinute) {
			d.col.sample(now, d.fano.System(), d.o.SampleEvery)
			if trace && now.Minute() == 0 {
				fmt.Fprintf(os.Stderr, "simulate: %s steps %d wall %.1fs timeouts %d\n", now.Format("01-02 15:04"), d.steps, time.Since(d.wallStart).Seconds(), d.timeouts)
			}
			if since := now.Sub(Epoch); since > 0 && since%(24*time.Hour) == 0 && o.Progress != nil {
				day := int(since / (24 * time.Hour))
				o.Progress(day, d.col.dayReport(day))
			}
			nextMinute = nextMinute.Add(o.SampleEvery)
		}
		if !now.Before(end) {
			break
		}
		// After a change one tick lets the scheduler and modules act on
		// it; once a tick changed nothing, jump to the next timer.
		if changed {
			step = o.TickInterval
		} else {
			step = o.MaxIdleStep
		}
		next := now.Add(step)
		d.col.traceStep(now, changed, acted, d.decided)
		if t, ok := d.clock.Next(); ok && t.Before(next) {
			next = t
		}
		if len(plan) > 0 && plan[0].at.Before(next) {
			next = plan[0].at
		}
		if nextMinute.Before(next) {
			next = nextMinute
		}
		if next.After(end) {
			next = end
		}
		// Ticks and timers due at once would race: the ticks that fall
		// before a timer's deadline go first, on their own.
		if tick, ok := d.clock.NextTick(); ok && next.After(now.Add(time.Nanosecond)) && !tick.After(next) {
			if t, ok := d.clock.Next(); ok && !t.After(next) {
				d.advance(next.Add(-time.Nanosecond))
				d.settledChange = d.settle() || d.settledChange
			}
		}
		d.advance(next)
		d.steps++
		if trace && d.steps%200 == 0 {
			fmt.Fprintf(os.Stderr, "simulate: step %d at %s wall %.1fs\n", d.steps, next.Format("01-02 15:04:05.000"), time.Since(d.wallStart).Seconds())
		}
	}
	return d.finish()
}

// advance moves the clock to t. The timers due fire, and what they woke
// is handled before the tick of that instant is delivered: in one run the
// tick would come first, in the next the answer.
func (d *driver) advance(t time.Time) {
	// The actors' tick first, then the periodic checks (health, the
	// checkpoint), each once what came before it at this instant is done
	// (nothing, when no timer fired: the system was idle before the step).
	busy := d.clock.AdvanceTo(t) > 0
	for _, watched := range []bool{true, false} {
		if d.clock.TicksDue(watched) {
			if busy {
				d.settledChange = d.settle() || d.settledChange
			}
			busy = d.clock.DeliverTicks(watched) || busy
		}
	}
}

func (d *driver) start() error {
	for _, b := range d.backends {
		b.Reopen()
	}
	// Alerts are notices, not events: they come by subscription, from
	// this fano's start until the driver stops or kills it.
	var attached atomic.Bool
	attached.Store(true)
	notices := func(n actors.Notice) {
		if attached.Load() {
			d.col.update(n)
		}
	}
	f, err := d.o.Start(Env{Clock: d.clock, Backends: d.backends, DiskFree: d.diskFree, Observe: d.col.observe, Turns: d.turns, Notices: notices})
	if err != nil {
		return fmt.Errorf("simulate: start fano: %w", err)
	}
	d.fano = f
	if d.diskFull {
		// The disk is still full for the new process.
		f.Storage().Failed(errDiskFull, 1, d.clock.Now())
	}
	d.unsub = func() { attached.Store(false) }
	d.decided = progress{}
	return nil
}

// diskFree is what the health monitor reads: plenty, but nothing while
// the schedule has the disk full at the virtual now. It reads the
// schedule, not what the driver has acted on yet, so a check that runs at
// the instant a disk_full fault starts or ends reads the same in every
// run, however the OS orders the check and the driver.
func (d *driver) diskFree(string) (uint64, error) {
	if d.diskFullAt(d.clock.Now()) {
		return 0, nil
	}
	return 500 << 30, nil
}

// diskFullAt says whether a disk_full fault of the schedule lasts at t.
func (d *driver) diskFullAt(t time.Time) bool {
	for _, f := range d.faults {
		if f.Kind == KindDiskFull && !t.Before(f.Start) && t.Before(f.End) {
			return true
		}
	}
	return false
}

func (d *driver) do(a action) error {
	now := d.clock.Now()
	switch {
	case a.seeds > 0:
		return d.addSeeds(a.day, a.seeds, now)
	case a.fault.Kind == KindRestart || a.fault.Kind == KindKill:
		d.unsub()
		var err error
		if a.fault.Kind == KindRestart {
			err = d.fano.Stop()
		} else {
			err = d.fano.Kill()
		}
		d.fano = nil
		d.col.event(now, a.fault.Kind, "", err)
		return d.start()
	case a.fault.Kind == KindDiskFull:
		d.diskFull = a.on
		if a.on {
			d.fano.Storage().Failed(errDiskFull, 1, now)
		} else {
			d.fano.Storage().Recovered(now.Sub(a.fault.Start), 1)
		}
		d.col.event(now, a.fault.Kind, "", nil)
	default:
		for _, name := range a.fault.Backends {
			d.byName[name].Apply(*a.fault, a.on)
		}
		if a.on {
			d.col.event(now, a.fault.Kind, fmt.Sprint(a.fault.Backends), nil)
		}
		if a.fault.Kind == KindLogin || a.fault.Kind == KindKeyRestored || !a.on {
			// A person fixed it (`fano login`, a new key): fano is told, as
			// the login command and SIGHUP tell it.
			d.fano.System().RecheckBackends(a.fault.Backends...)
		}
	}
	return nil
}

var topics = []string{"projective planes of order 9", "the Fano plane's collineations", "Steiner triple systems", "affine planes",
	"difference sets", "ovals and hyperovals", "Latin squares", "the Hamming code", "block designs", "finite fields",
	"Desargues' theorem", "the octonions", "generalized quadrangles", "incidence matrices", "spreads and translation planes"}
var aspects = []string{"What is the smallest open case concerning", "How are automorphisms used to classify", "Which counting arguments bound",
	"What computational searches settled questions about", "How does coordinatization work for", "What is the link between codes and",
	"Which conjectures remain open about", "How do polarities act on"}

// addSeeds is the simulated user's new questions of the day.
func (d *driver) addSeeds(day, n int, now time.Time) error {
	r := rand.New(rand.NewPCG(uint64(d.o.Seed), uint64(day)))
	for i := 0; i < n; i++ {
		text := fmt.Sprintf("%s %s? (question %d of day %d)", aspects[r.IntN(len(aspects))], topics[r.IntN(len(topics))], i+1, day)
		// The host stamps the seed with the system's clock: this virtual now.
		_, err := d.fano.System().Command(&pb.ModuleCommand{Module: d.o.SeedModule,
			Command: &pb.ModuleCommand_AddSeed{AddSeed: &pb.AddSeed{Text: text}}})
		if err != nil {
			return fmt.Errorf("simulate: day %d: add question: %w", day, err)
		}
	}
	d.col.seeds(now, n)
	return nil
}

// pending is how much the system's own counters say is still to be
// handled at this instant: messages in mailboxes (and work handed off the
// actors: a WAL write in a system call), what the clock fired that nobody
// took yet, and running tasks not waiting inside a backend call (one
// between two calls is still working).
func (d *driver) pending() int {
	sys := d.fano.System()
	hooks := sys.Simulation()
	n := hooks.QueuedMessages() + d.clock.Undelivered()
	if busy := sys.Running() - hooks.WaitingCalls(); busy > 0 {
		n += busy
	}
	return n
}

// settle waits until the system has nothing left to do at this instant,
// the calls lined up for their turn (Turns) let go one at a time, each
// once the one before it was handled. It reports whether anything was
// decided since the last settle.
func (d *driver) settle() bool {
	start := time.Now()
	for {
		if !d.quiet() {
			if trace {
				fmt.Fprintf(os.Stderr, "simulate: settle timeout at %s: %+v pending %d\n", d.clock.Now().Format("01-02 15:04:05.000"), d.sched.read(), d.pending())
			}
			d.timeouts++
			if trace && d.timeouts == 1 {
				_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
			}
		}
		if realTimeCheck {
			d.checkRealTime()
		}
		if !d.turns.Next() {
			break
		}
		d.turnsGiven++
	}
	now := d.progress()
	changed := now != d.decided
	d.decided = now
	if sys := d.fano.System(); trace && sys.Simulation().WaitingCalls() > sys.Running() {
		// More waits than runs: a wait nobody ends lets the clock move
		// while a task works.
		fmt.Fprintf(os.Stderr, "simulate: at %s %d calls wait for %d running tasks\n", d.clock.Now().Format("01-02 15:04:05.000"), sys.Simulation().WaitingCalls(), sys.Running())
	}
	if trace && d.steps < 3 {
		fmt.Fprintf(os.Stderr, "settle %d at %s took %s\n", d.steps, d.clock.Now().Format("15:04:05.000"), time.Since(start))
	}
	return changed
}

// quiet waits until every goroutine but the driver's is blocked (the Go
// scheduler's count) and nothing is pending by the system's counters,
// seen twice in a row with a yield between (a goroutine leaving a system
// call is briefly in neither count). Meanwhile it sleeps until the system
// or the clock says a piece of work ended, or a short while passed (not
// every end is told). It reports false after settleTimeout.
func (d *driver) quiet() bool {
	deadline := time.Now().Add(settleTimeout)
	activity := d.fano.System().Simulation().Activity()
	var onlySyscalls time.Time // since when only system calls went on
	for looks, quiet := 1, 0; quiet < 2; looks++ {
		c := d.sched.read()
		// The floor follows what is seen: fewer in a system call than it
		// says, and the floor was too high (one counted in it ended).
		d.syscallFloor = min(d.syscallFloor, c.notInGo)
		pending := d.pending()
		if c.othersBlocked(d.syscallFloor) && pending == 0 {
			quiet++
			runtime.Gosched()
			continue
		}
		quiet = 0
		if c.running <= 1 && c.runnable == 0 && pending == 0 {
			// Only system calls: one that lasts (os/signal's receiver,
			// started after the floor was taken) joins the floor.
			if onlySyscalls.IsZero() {
				onlySyscalls = time.Now()
			} else if time.Since(onlySyscalls) > syscallForGood {
				d.syscallFloor = c.notInGo
			}
		} else {
			onlySyscalls = time.Time{}
		}
		// Others run or wait for a processor: sleep, so this one can run
		// them too (a yield would only run the driver again).
		d.nap.Reset(napFor)
		select {
		case <-activity:
			d.wakes[0]++
		case <-d.clock.Done():
			d.wakes[1]++
		case <-d.nap.C:
			d.wakes[2]++
		}
		if looks%64 == 0 && time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// syscallForGood is how long a system call must last, with nothing else
// going on, to count as one that never ends.
const syscallForGood = time.Second

// settleTimeout bounds a settle: work still going on after it is counted
// (Runtime.SettleTimeouts) and the clock moves on.
const settleTimeout = 10 * time.Second

// napFor is the longest the driver sleeps before it looks again without
// being told that a piece of work ended.
const napFor = 200 * time.Microsecond

// progress is what the system decided: the WAL's events and the alerts.
// Whether a step changed something picks the next step (one tick, or a
// jump to the next timer), so it must be the same in every run of a seed:
// the notices and timers of the periodic loops (metrics, health) also
// show activity, but not at the same steps in every run.
type progress struct {
	seq    uint64
	alerts int64
}

func (d *driver) progress() progress {
	return progress{seq: d.fano.System().Log().LastSeq(), alerts: d.col.raised.Load()}
}

// realTimeCheck (FANO_SIMULATE_REALTIME_CHECK=1) looks again a few
// milliseconds of real time after each settle: whatever happened then
// was woken by a real timer or real I/O, which one seed must not see
// (a run of a seed would depend on how fast the machine was).
var realTimeCheck = os.Getenv("FANO_SIMULATE_REALTIME_CHECK") != ""

// checkRealTime reports, with the goroutines' stacks, the first few times
// the system moved while the clock stood still.
func (d *driver) checkRealTime() {
	ops, before := d.clock.Ops(), d.progress()
	time.Sleep(3 * time.Millisecond)
	pending := d.pending()
	if d.clock.Ops() == ops && d.progress() == before && pending == 0 {
		return
	}
	d.realTimeWakes++
	sys := d.fano.System()
	fmt.Fprintf(os.Stderr, "simulate: at %s the system moved on real time (timer ops %d -> %d, progress %+v -> %+v, pending %d: queued %d, undelivered %d, running %d, waiting %d)\n",
		d.clock.Now().Format("01-02 15:04:05.000"), ops, d.clock.Ops(), before, d.progress(), pending,
		sys.Simulation().QueuedMessages(), d.clock.Undelivered(), sys.Running(), sys.Simulation().WaitingCalls())
	if d.realTimeWakes <= 3 {
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
	}
}

// trace prints the virtual time every hour (FANO_SIMULATE_TRACE=1).
var trace = os.Getenv("FANO_SIMULATE_TRACE") != ""

var errDiskFull = fmt.Errorf("write: %w (simulated full disk)", syscall.ENOSPC)

// markOutages flags the days a one-off fault touched: an entry for one
// day, or a login wall or revoked key until it was fixed.
func markOutages(days []DayReport, faults []Fault, dayOf func(time.Time) int) {
	mark := func(from, to int) {
		for i := max(from, 1); i <= min(to, len(days)); i++ {
			days[i-1].Outage = true
		}
	}
	walls := map[string]int{} // backend+kind -> day it began
	for _, f := range faults {
		switch f.Kind {
		case KindLoginExpired, KindKeyRevoked:
			for _, b := range f.Backends {
				walls[b+f.Kind] = dayOf(f.Start)
			}
			if f.End.After(f.Start) {
				mark(dayOf(f.Start), dayOf(f.End))
			}
		case KindLogin, KindKeyRestored:
			was := KindLoginExpired
			if f.Kind == KindKeyRestored {
				was = KindKeyRevoked
			}
			for _, b := range f.Backends {
				if from, ok := walls[b+was]; ok {
					mark(from, dayOf(f.Start))
					delete(walls, b+was)
				}
			}
		default:
			if f.Day != 0 {
				mark(dayOf(f.Start), dayOf(f.End))
			}
		}
	}
	for _, from := range walls {
		mark(from, len(days)) // never fixed
	}
}

// finish compacts the WAL, stops fano and assembles the report.
func (d *driver) finish() (*Report, error) {
	sys := d.fano.System()
	var wf WALFigures
	if err := sys.Checkpoint(); err != nil {
		return nil, fmt.Errorf("simulate: final checkpoint: %w", err)
	}
	res, err := sys.Log().Compact()
	if err != nil {
		return nil, fmt.Errorf("simulate: final compaction: %w", err)
	}
	wf.Dropped = res.EntriesDeleted
	if st, err := sys.Log().Stats(); err == nil {
		wf.Entries, wf.MB = st.Entries, float64(st.Bytes)/(1<<20)
	}
	d.col.sampleRuntime(d.clock.Now(), sys, d.o.Days)
	d.unsub()
	err = d.fano.Stop()
	d.fano = nil
	if err != nil {
		return nil, fmt.Errorf("simulate: stop fano: %w", err)
	}
	if trace {
		fmt.Fprintf(os.Stderr, "simulate: settle woken by the system %d, the clock %d, a nap %d; %d calls let go in turn\n", d.wakes[0], d.wakes[1], d.wakes[2], d.turnsGiven)
	}
	r := d.col.report()
	r.Seed, r.Start, r.Schedule, r.WAL = d.o.Seed, Epoch, d.o.Schedule.Name, wf
	markOutages(r.Days, d.faults, d.col.dayOf)
	wall := time.Since(d.wallStart).Seconds()
	r.Runtime.WallSeconds, r.Runtime.Steps, r.Runtime.SettleTimeouts = wall, d.steps, d.timeouts
	r.Runtime.SimSecondsPerWall = float64(d.o.Days*24*3600) / wall
	r.CheckGoals()
	return r, nil
}

// traceStep writes a step of the clock to the trace: whether it changed
// something and so which step comes next.
func (c *collector) traceStep(now time.Time, changed, acted bool, decided progress) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.trace != nil {
		fmt.Fprintf(c.trace, "%s step changed=%v acted=%v seq=%d alerts=%d\n", now.Format(traceTime), changed, acted, decided.seq, decided.alerts)
	}
}
