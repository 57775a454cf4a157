// Package app is fano's composition root: Main opens a data directory,
// builds the actor system, its backends, modules and run services from the
// config, runs it and shuts it down. All the wiring is here, in one
// explicit place; cmd/fano only parses flags and calls it.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/jonboulle/clockwork"

	"fano/actors"
	"fano/config"
	"fano/gateway"
	"fano/health"
	"fano/internal/procs"
	"fano/modules"
	"fano/pb"
	"fano/remote"
	"fano/wal"
)

// Options say what a Main runs on and what a caller puts in place of the
// real parts. Only Config is required.
type Options struct {
	// Config is the loaded config. Open does not change it.
	Config *config.Config
	// DataDir, if set, replaces Config.DataDir ("" in both: ./fano-data).
	DataDir string
	// Clock drives the actors, backends and services, and Run's own
	// checks (until-idle every 200 ms, credentials every 5 min): with a
	// fake clock the caller advances it (nil: the real clock).
	Clock clockwork.Clock
	// NewBackend builds the gateway of a config backend (nil: the real one
	// of its type). With it set, Open does not check browser profiles and
	// the Playwright driver: no real browser is started.
	NewBackend func(name string, b *config.Backend) (gateway.Backend, error)
	// WAL, if set, may change the WAL's options before it is opened for
	// writing (a test injects write faults).
	WAL func(*wal.Options)
	// Modules run beside those the config enables.
	Modules []modules.Module

	// Stdout is the console: the panel's address and token, and what a
	// run tells the person who started it (nil: discarded).
	Stdout io.Writer
	// Console overrides logging.console ("off", "json", ...; "" = the
	// config's); ConsoleOut is where console log lines go (nil: stderr).
	Console    string
	ConsoleOut io.Writer

	// UntilIdle: Run returns once no work is left (`fano run --until-idle`).
	UntilIdle bool
	// Fresh allows a new WAL beside earlier runs' output (`--fresh`).
	Fresh bool
	// Signals: Open catches SIGINT, SIGTERM (stop), SIGHUP (re-read keys)
	// and SIGUSR1 (state dump) for Run, and a second stop signal while
	// Close runs exits the process. Only the `fano run` command sets it:
	// signals belong to the process, not to one Main.
	Signals bool
	// NoPanel and NoBackups leave those services out although the config
	// enables them.
	NoPanel, NoBackups bool
	// HaltLimit is how long an until-idle run waits for held-back work to
	// start again before it stops with an error (0: 10 s).
	HaltLimit time.Duration
	// Disk reads the data directory's free space (nil: the file system's).
	Disk health.DiskUsage
	// Observe, if set, sees every event the actors apply, from the first
	// on (actors.Options.Observe; `fano simulate` counts them): it must
	// not block.
	Observe func(owner string, e *pb.Event)
	// DispatchOnTick: see actors.Options.DispatchOnTick (fano simulate).
	DispatchOnTick bool
	// Notices, if set, sees every notice the system publishes (alerts,
	// backend states), from the first on: it is subscribed before the
	// run services start, whose health monitor checks (and may alert) at
	// once. It must not block.
	Notices func(actors.Notice)

	// BeforeStart, if set, runs once the data directory is open and its
	// WAL locked, before recovery (a pipeline run keeps its definition
	// there): an error refuses the start.
	BeforeStart func(dataDir string) error
	// Until, if set, decides when an until-idle run is over in place of
	// the idle rule: it is asked at every check (every 200 ms, and when
	// Wake fires) whether the system has been idle since the last one;
	// a non-empty reason ends Run with err.
	Until func(idle bool) (reason string, err error)
	// Wake has Run ask Until at once (an event that may end the run).
	Wake <-chan struct{}
}

// Main is one fano run: Open, then Run until the context is done (or
// until idle), then Close; or Kill to drop it as kill -9 would.
type Main struct {
	opts Options

	cfg      *config.Config
	data     *Data
	sys      *actors.System
	services *Services
	hub      *remote.Hub // gateway hosts; nil without any
	panelL   net.Listener
	sigs     chan os.Signal
	stopReq  <-chan string
	clock    clockwork.Clock

	dirExisted, dbExisted bool
	started               bool // the system ran: a failed start is not undone
	closed                bool
	result                Result
	memLimit              int64
	memLimitFrom          string
	procs                 int
	procsFrom             string
}

// Result is how a Run ended.
type Result struct {
	// Reason is why: "idle" (no work left), ReasonWaitingOnPerson (the
	// rest waits on a person), "halted" (work held back too long; Run
	// returned an error), a signal's name, a stop request's
	// reason (the panel), or "context" (the caller's context ended).
	Reason string
	// Completed counts the completed tasks when the run ended idle;
	// CompletedBefore those that were completed when it started.
	Completed, CompletedBefore int
	// Recovered counts the tasks recovered at start.
	Recovered int
	// Continued: the data directory held earlier runs' work.
	Continued bool
	// Blocked: with Reason ReasonWaitingOnPerson, the backends the rest
	// of the work waits on and what a person must do for each.
	Blocked []actors.BlockedBackend
}

// ReasonWaitingOnPerson ends an until-idle run whose remaining work may
// only use backends that wait on a person.
const ReasonWaitingOnPerson = "waiting_on_person"

// NewMain returns a Main for o; Open starts it.
func NewMain(o Options) *Main {
	return &Main{opts: o}
}

// Open checks everything that can refuse a start before the first write
// (the config's keys, browser profiles and driver, the data directory,
// the panel's port, then with the WAL open the backends), recovers the
// state and starts the actor system and the run services. On an error
// nothing is left running, and a data directory or fano.db the failed
// start created is removed.
func (m *Main) Open(ctx context.Context) (err error) {
	o := &m.opts
	if o.Config == nil {
		return errors.New("app: Options.Config is required")
	}
	cfg := *o.Config // a shallow copy: DataDir is ours to set
	if o.DataDir != "" {
		cfg.DataDir = o.DataDir
	}
	if cfg.DataDir == "" {
		cfg.DataDir = "./fano-data"
	}
	m.cfg = &cfg
	m.clock = o.Clock
	if m.clock == nil {
		m.clock = clockwork.NewRealClock()
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.Signals {
		// Caught from the start, so a signal during recovery is not the
		// default "die at once".
		m.sigs = make(chan os.Signal, 4)
		signal.Notify(m.sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGUSR1, syscall.SIGHUP)
	}
	defer func() {
		if err != nil {
			m.abortOpen()
		}
	}()
	if err := ctx.Err(); err != nil {
		return err
	}
	// Another fano on this data directory is the first thing to name:
	// its panel holds the port too, and the port would be refused first.
	if err := dataDirFree(m.cfg.DataDir, nil); err != nil {
		return err
	}
	if err := preflight(m.cfg, o.NewBackend == nil); err != nil {
		return err
	}
	if !o.NoPanel {
		if m.panelL, err = listenPanel(m.cfg, m.cfg.DataDir, o.UntilIdle, o.Stdout); err != nil {
			return err
		}
	}
	m.dirExisted = exists(m.cfg.DataDir)
	m.dbExisted = exists(filepath.Join(m.cfg.DataDir, "fano.db"))
	d, err := OpenData(m.cfg, OpenOptions{Fresh: o.Fresh, Console: o.Console, ConsoleOut: o.ConsoleOut, Clock: m.clock, WAL: o.WAL})
	if errors.Is(err, wal.ErrLocked) {
		if ferr := dataDirFree(m.cfg.DataDir, err); ferr != nil {
			return ferr
		}
		return &dataDirInUseError{dir: absDir(m.cfg.DataDir), err: err}
	}
	if err != nil {
		return err
	}
	m.data = d
	if o.BeforeStart != nil {
		if err := o.BeforeStart(d.Dir); err != nil {
			return err
		}
	}
	m.memLimit, m.memLimitFrom = memoryLimit(m.cfg.Orchestrator.State.MemoryLimitMB)
	m.procs, m.procsFrom = procs.Set()
	w := d.Wiring(m.clock)
	w.NewBackend, w.Modules, w.UntilIdle, w.Observe = o.NewBackend, o.Modules, o.UntilIdle, o.Observe
	w.DispatchOnTick = o.DispatchOnTick
	if m.hub, err = startHub(m.cfg, d.Dir, d.Logger, m.clock); err != nil {
		return err
	}
	w.Hub = m.hub
	opts, err := w.ActorOptions()
	if err != nil {
		return err
	}
	earlier := d.Log.LastSeq() // > 0: this data directory has earlier runs
	// Below the disk minimum already: no work starts, not even until the
	// health service's first check (a short batch could finish before it).
	opts.HoldWork = diskLow(m.cfg, d.Dir, o.Disk)
	sys, err := actors.Start(opts)
	if err != nil {
		return err
	}
	m.sys, m.started = sys, true
	if o.Notices != nil {
		sys.Subscribe(o.Notices) // ends with the system
	}
	stopReq, requestStop := stopRequests()
	m.stopReq = stopReq
	panelL := m.panelL
	m.panelL = nil // the panel service owns (and closes) the listener from here
	m.services, err = StartServices(ServiceEnv{Cfg: m.cfg, DataDir: d.Dir, Sys: sys, Log: d.Log, PanelListener: panelL,
		Logger: d.Logger, Clock: m.clock, Stop: requestStop, Out: o.Stdout, UntilIdle: o.UntilIdle, Disk: o.Disk,
		NoPanel: o.NoPanel, NoBackups: o.NoBackups, IntakeHeld: opts.HoldWork, Hub: m.hub})
	if err != nil {
		_ = sys.Stop()
		return err
	}
	rep := sys.Report()
	d.Logger.Info().Str("event", "cmd.fano.started").Int("pid", os.Getpid()).Str("data_dir", d.Dir).
		Int("tasks_recovered", rep.TasksRecovered).Int("entries_replayed", rep.EntriesReplayed).
		Int("tasks_paused", rep.TasksPaused).Strs("repairs", rep.Repairs).Strs("problems", rep.Problems).
		Int64("memory_limit_mb", m.memLimit>>20).Str("memory_limit_from", m.memLimitFrom).
		Int("gomaxprocs", m.procs).Str("gomaxprocs_from", m.procsFrom).
		Msg("fano is running")
	m.result = Result{Recovered: rep.TasksRecovered, CompletedBefore: rep.TaskStates["COMPLETED"], Continued: earlier > 0}
	if earlier > 0 {
		// A second `make run` finds the first one's data: say it goes on
		// from there rather than starting over.
		fmt.Fprintf(o.Stdout, "fano: continuing %s: %d tasks from earlier runs (%d completed); to start over, delete it or pass another --data-dir\n",
			d.Dir, rep.TasksRecovered, rep.TaskStates["COMPLETED"])
	}
	return nil
}

// abortOpen undoes a failed Open.
func (m *Main) abortOpen() {
	m.closeHub()
	if m.panelL != nil {
		m.panelL.Close()
		m.panelL = nil
	}
	if m.data != nil {
		_ = m.data.Close()
		// Only what this start created, once the data directory opened:
		// before that, nothing here was written.
		if !m.started {
			undoFailedStart(m.cfg.DataDir, m.dirExisted, m.dbExisted)
		}
		m.data = nil
	}
	m.stopSignals()
	m.closed = true
}

// closeHub stops listening for gateway hosts (after the actors: their
// last calls end first).
func (m *Main) closeHub() {
	if m.hub != nil {
		m.hub.Close()
		m.hub = nil
	}
}

// Hub is the gateway hosts' listener (nil without hosts).
func (m *Main) Hub() *remote.Hub { return m.hub }

func (m *Main) stopSignals() {
	if m.sigs != nil {
		signal.Stop(m.sigs)
	}
}

// System is the running actor system (nil before Open).
func (m *Main) System() *actors.System { return m.sys }

// Services are the run services (nil before Open).
func (m *Main) Services() *Services { return m.services }

// Data is the opened data directory (nil before Open).
func (m *Main) Data() *Data { return m.data }

// Result is how Run ended.
func (m *Main) Result() Result { return m.result }

// Run works until ctx is done, a stop signal or stop request comes, or
// (Options.UntilIdle) no work is left. It returns an error when an
// until-idle run stopped with work held back (Result.Reason "halted").
// Close then shuts down.
func (m *Main) Run(ctx context.Context) error {
	if m.sys == nil || m.closed {
		return errors.New("app: Run before a successful Open")
	}
	sys, d := m.sys, m.data
	if m.memLimitFrom == configMemoryLimit {
		stop := make(chan struct{})
		defer close(stop)
		go followLiveHeap(m.memLimit, os.Getenv("GOGC") == "", 2*time.Second, stop, func(live, limit int64) {
			d.Logger.Warn().Str("event", "cmd.fano.memory_limit_raised").Int64("live_heap_mb", live>>20).
				Int64("memory_limit_mb", limit>>20).Int64("configured_mb", m.memLimit>>20).
				Msg("the live heap outgrew orchestrator.state.memory_limit_mb: the soft limit follows it (raise memory_limit_mb to set it yourself)")
		})
	}
	var idle <-chan time.Time
	if m.opts.UntilIdle {
		t := m.clock.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		idle = t.Chan()
	}
	idleSeen, personSeen := 0, 0
	// Every few minutes a backend parked for its credentials is re-checked
	// with the environment file read again: a key fixed there is used
	// without a signal.
	recheck := m.clock.NewTicker(credentialsRecheckEvery)
	defer recheck.Stop()
	limit := m.opts.HaltLimit
	if limit == 0 {
		limit = untilIdleHaltLimit
	}
	halted := haltWatch{limit: limit}
	for {
		select {
		case <-ctx.Done():
			m.result.Reason = "context"
			return nil
		case <-recheck.Chan():
			if m.cfg.LLM.EnvFile != "" && anyCredentialsParked(sys) {
				m.ReloadKeys()
			}
		case sig := <-m.sigs:
			if sig == syscall.SIGHUP {
				m.ReloadKeys()
				continue
			}
			if sig == syscall.SIGUSR1 {
				path, err := DumpState(d.Dir, sys)
				if err != nil {
					d.Logger.Error().Err(err).Str("event", "cmd.fano.stack_dump_failed").Msg("stack dump")
				} else {
					d.Logger.Info().Str("event", "cmd.fano.stack_dump").Str("path", path).Msg("goroutine stacks written")
				}
				continue
			}
			m.result.Reason = sig.String()
			return nil
		case r := <-m.stopReq:
			m.result.Reason = r
			return nil
		case <-m.opts.Wake:
			if reason, err := m.opts.Until(false); reason != "" {
				m.result.Reason = reason
				return err
			}
		case <-idle:
			// New work held back (WAL writes fail, low disk) for a while:
			// a batch run stops and says why, rather than wait or claim
			// that no work is left.
			if why := halted.check(sys, m.clock.Now()); why != "" {
				m.result.Reason = "halted"
				return fmt.Errorf("stopped with work left: %s", why)
			}
			// Idle three times in a row: the modules had ticks to propose
			// more. Held-back work is not idle (modules propose nothing
			// meanwhile): the halt above says why once it lasts.
			if m.opts.Until != nil {
				if reason, err := m.opts.Until(sys.Idle() && sys.Accepting()); reason != "" {
					m.result.Reason = reason
					return err
				}
				continue
			}
			if sys.Idle() && sys.Accepting() {
				idleSeen++
			} else {
				idleSeen = 0
			}
			// The rest waits on a person (a login, credits, a key): a
			// batch run ends and says what to do; nothing is lost, the
			// next run continues.
			if blocked := sys.WaitingOnPerson(); len(blocked) > 0 && sys.Accepting() {
				personSeen++
				if personSeen >= 3 {
					m.result.Reason, m.result.Blocked = ReasonWaitingOnPerson, blocked
					return nil
				}
			} else {
				personSeen = 0
			}
			if idleSeen >= 3 {
				m.result.Reason = "idle"
				for _, byState := range sys.Counts() {
					m.result.Completed += byState[pb.TaskState_TASK_STATE_COMPLETED]
				}
				return nil
			}
		}
	}
}

// Close shuts down gracefully: running tasks are paused (the next run
// resumes them), the services and the system stop, a checkpoint is
// written and the WAL closed. Safe to call after a failed Open and again.
func (m *Main) Close() error {
	if m.closed {
		return nil
	}
	m.closed = true
	if m.sys == nil {
		m.abortOpen()
		return nil
	}
	d := m.data
	if m.sigs != nil {
		// A second signal while stopping ends the process at once.
		sigs := m.sigs
		go func() {
			for sig := range sigs {
				if sig != syscall.SIGUSR1 && sig != syscall.SIGHUP {
					d.Logger.Warn().Str("event", "cmd.fano.forced_exit").Msg("second signal: exiting now")
					os.Exit(130)
				}
			}
		}()
		defer func() { signal.Stop(sigs); close(sigs) }()
	}
	reason := m.result.Reason
	if reason == "" {
		reason = "close"
	}
	d.Logger.Info().Str("event", "cmd.fano.stopping").Str("reason", reason).Msg("stopping: pausing running tasks")
	if _, err := m.sys.StorageFault(); err != nil {
		// The disk still refuses writes: stop now; what could not be
		// written is redone after a restart (recovery pauses it).
		d.Log.StopRetrying()
	}
	m.services.Stop()
	stopErr := m.sys.Stop()
	m.closeHub()
	m.services.Finish() // the shutdown's own events reach logs/trace.log; it is closed
	closeErr := d.Close()
	if stopErr != nil {
		return fmt.Errorf("stop: %w", stopErr)
	}
	return closeErr
}

// Kill drops the run as kill -9 would, as nearly as one process can do
// it to itself: the WAL is closed first, so nothing the shutdown would
// write (pause events, a checkpoint) reaches it and the next Open on the
// same data directory recovers from what was durable at that moment.
// Then the actors, backends, services and log file are stopped, because
// their goroutines and ports live in this process. Unlike a real SIGKILL,
// the PID file and ops-status.json are removed, and writes that were
// already queued when Kill began may still land (as they could have
// before the signal).
func (m *Main) Kill() error {
	if m.closed {
		return nil
	}
	m.closed = true
	if m.sys == nil {
		m.abortOpen()
		return nil
	}
	d := m.data
	d.Log.StopRetrying()
	_ = d.Log.Close()
	m.services.Stop()
	_ = m.sys.Stop() // fails to write: the WAL is closed
	m.closeHub()
	m.services.Finish()
	_ = d.closeLog()
	m.stopSignals()
	return nil
}

// ReloadKeys (SIGHUP, and every few minutes while a backend waits for
// its credentials): read the environment file again (if configured)
// and re-check every parked backend, so a fixed key is used at once.
func (m *Main) ReloadKeys() {
	logger := m.data.Logger
	if f := m.cfg.LLM.EnvFile; f != "" {
		names, err := config.LoadEnvFile(f)
		if err != nil {
			logger.Error().Err(err).Str("event", "cmd.fano.env_reload_failed").Msg("environment file not reloaded")
		} else {
			logger.Info().Str("event", "cmd.fano.env_reloaded").Strs("variables", names).Msg("environment file reloaded")
		}
	}
	for _, r := range m.sys.RecheckBackends() {
		logger.Info().Str("event", "cmd.fano.backend_recheck").Str("backend", r.Backend).Str("state", r.State).Str("reason", r.Reason).Msg("backend re-checked")
	}
}

// credentialsRecheckEvery is how often a run re-reads llm.env_file while
// a backend waits for its credentials.
const credentialsRecheckEvery = 5 * time.Minute

func anyCredentialsParked(sys *actors.System) bool {
	for _, q := range sys.Quotas() {
		if q.State == "credentials" {
			return true
		}
	}
	return false
}

// diskLow says whether dir's file system has less free space than
// health.min_disk_space_gb (false when it cannot tell: the health checks
// report that).
func diskLow(cfg *config.Config, dir string, disk health.DiskUsage) bool {
	least := health.FromConfig(cfg, dir).MinFreeBytes
	if least == 0 {
		return false
	}
	if disk == nil {
		disk = health.StatFS
	}
	free, err := disk(dir)
	return err == nil && free < least
}

// untilIdleHaltLimit is how long an until-idle run waits for held-back
// work to start again before it stops with an error.
const untilIdleHaltLimit = 10 * time.Second

// haltWatch tells when new work has been held back longer than limit,
// and why.
type haltWatch struct {
	limit time.Duration
	since time.Time
}

func (h *haltWatch) check(sys *actors.System, now time.Time) string {
	if sys.Accepting() {
		h.since = time.Time{}
		return ""
	}
	if h.since.IsZero() {
		h.since = now
	}
	if now.Sub(h.since) < h.limit {
		return ""
	}
	if since, err := sys.StorageFault(); err != nil {
		return fmt.Sprintf("the WAL cannot be written since %s (%v); free disk space and run again", since.Format(time.RFC3339), err)
	}
	return "new work is held back (low disk space below health.min_disk_space_gb, see 'fano status'); free disk space and run again"
}

// undoFailedStart removes what a start that failed before the system ran
// created: the data directory, or a fano.db holding nothing but its empty
// buckets. What was there before is never touched.
func undoFailedStart(dataDir string, dirExisted, dbExisted bool) {
	switch {
	case !dirExisted:
		_ = os.RemoveAll(dataDir)
	case !dbExisted:
		_ = os.Remove(filepath.Join(dataDir, "fano.db"))
	}
}

// dataDirFree refuses a data directory whose WAL another process holds,
// naming the directory and the pid holding it; cause is the error that
// found it locked (nil: this check).
func dataDirFree(dir string, cause error) error {
	held, pid := wal.Holder(filepath.Join(dir, "fano.db"), filepath.Join(dir, "fano.pid"))
	if !held {
		return nil
	}
	if cause == nil {
		cause = wal.ErrLocked
	}
	return &dataDirInUseError{dir: absDir(dir), pid: pid, err: cause}
}

// dataDirInUseError is the refusal of a data directory another fano
// runs on. It matches wal.ErrLocked with errors.Is.
type dataDirInUseError struct {
	dir string
	pid int // 0: the holder's pid is not known
	err error
}

func (e *dataDirInUseError) Error() string {
	who := "another process"
	if e.pid > 0 {
		who = fmt.Sprintf("another fano (pid %d)", e.pid)
	}
	return fmt.Sprintf("data directory %s is in use by %s: stop it first, or pass another --data-dir", e.dir, who)
}

func (e *dataDirInUseError) Unwrap() error { return e.err }

// absDir is dir made absolute where it can be, for messages.
func absDir(dir string) string {
	if a, err := filepath.Abs(dir); err == nil {
		return a
	}
	return dir
}
