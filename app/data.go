package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"io"
	"math/rand/v2"

	"fano/actors"
	"fano/actors/allocator"
	"fano/actors/scheduler"
	"fano/config"
	"fano/gateway"
	"fano/gateway/ratelimit"
	"fano/gateway/refusal"
	"fano/gateway/sim"
	"fano/logging"
	"fano/modules"
	"fano/modules/pipeline"
	"fano/modules/probe"
	"fano/wal"
)

// Data is an opened data directory: config, logger and WAL. Main and the
// commands that work on a stopped fano build on it.
type Data struct {
	Config  *config.Config
	Dir     string
	Log     *wal.Log
	Storage *actors.StorageWatch // the WAL's write faults (writable opens)
	Logger  zerolog.Logger

	closeLog func() error
}

// OpenOptions say how the data directory is opened.
type OpenOptions struct {
	Console string // logging.console override ("" = the config's)
	// ConsoleOut is where console log lines go (nil: stderr).
	ConsoleOut io.Writer
	// ReadOnly is for a command that only reads (status and tasks
	// offline, verify, wal inspect, recover --dry-run): the WAL is opened
	// read-only (shared lock, no PID file) and no log file is written, so
	// the data directory's bytes stay as they were.
	ReadOnly bool
	// Fresh allows a new WAL where fano.db is missing or empty although
	// the directory holds the traces of earlier runs (`fano run --fresh`).
	Fresh bool
	// Clock stamps the WAL's write faults (nil: the real clock).
	Clock clockwork.Clock
	// WAL, if set, may change the WAL's options before it is opened (a
	// test injects write faults).
	WAL func(*wal.Options)
}

// OpenData checks cfg.DataDir and opens its WAL (for writing unless
// o.ReadOnly) and its logger. A locked, damaged or corrupt database is one
// clear error, and nothing is written.
func OpenData(cfg *config.Config, o OpenOptions) (*Data, error) {
	console, readOnly := o.Console, o.ReadOnly
	clock := o.Clock
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	if readOnly {
		// A reader creates nothing, not even the directory (a missing one
		// reads as no state yet, below).
		if fi, err := os.Stat(cfg.DataDir); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
		} else if err == nil && !fi.IsDir() {
			return nil, fmt.Errorf("data dir %s: exists but is not a directory", cfg.DataDir)
		}
	} else if err := config.CheckDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	// The WAL first: a locked or corrupt database stops us before we
	// write anything, not even a log line.
	path := filepath.Join(cfg.DataDir, "fano.db")
	// A reader only reads the PID file, to name the process that holds
	// the lock.
	opts := wal.Options{LockTimeout: time.Second, ReadOnly: readOnly, PIDFile: filepath.Join(cfg.DataDir, "fano.pid")}
	var storage *actors.StorageWatch
	if !readOnly {
		// A full disk or an I/O error does not fail the run: the WAL
		// retries, the system holds new work meanwhile (actors.StorageWatch).
		storage = actors.NewStorageWatch()
		opts.RetryWrites = 30 * time.Second
		opts.OnWriteFault = func(err error, attempt int) { storage.Failed(err, attempt, clock.Now()) }
		opts.OnWriteRecovered = storage.Recovered
	}
	if o.WAL != nil {
		o.WAL(&opts)
	}
	if !readOnly && !o.Fresh {
		if err := refuseLostState(cfg.DataDir, path); err != nil {
			return nil, err
		}
	}
	log, err := wal.Open(path, opts)
	var cleanup func()
	if readOnly && (errors.Is(err, os.ErrNotExist) || errors.Is(err, wal.ErrEmpty)) {
		// No state yet reads as an empty log: one made outside the data
		// directory, which a reader must not touch.
		log, cleanup, err = emptyLog()
	}
	if err != nil {
		return nil, walOpenError(path, err)
	}
	if console == "" {
		console = cfg.Logging.Console
	}
	logDir := filepath.Join(cfg.DataDir, "logs")
	if readOnly {
		logDir = ""
	}
	logger, closeLog, err := logging.New(logging.Options{Dir: logDir, Level: cfg.Logging.Level, Console: console, Out: o.ConsoleOut})
	if err != nil {
		log.Close()
		return nil, err
	}
	if pid := log.StalePID(); pid != 0 {
		logger.Warn().Int("pid", pid).Str("event", "cmd.fano.stale_pid").Msg("took over the data directory from a process that is gone")
	}
	if !readOnly {
		// Leftovers of a `wal compact --shrink` or a restore that was
		// killed: we hold the WAL's lock, so no one is writing them.
		for _, stray := range []string{path + ".compact", path + ".tmp"} {
			if err := os.Remove(stray); err == nil {
				logger.Warn().Str("event", "cmd.fano.stray_removed").Str("path", stray).Msg("removed the leftover of an interrupted WAL rewrite")
			}
		}
	}
	if cleanup != nil {
		inner := closeLog
		closeLog = func() error { cleanup(); return inner() }
	}
	return &Data{Config: cfg, Dir: cfg.DataDir, Log: log, Storage: storage, Logger: logger, closeLog: closeLog}, nil
}

// emptyLog opens a new, empty log in a temporary directory; cleanup
// removes it after the log is closed.
func emptyLog() (*wal.Log, func(), error) {
	dir, err := os.MkdirTemp("", "fano-empty-*")
	if err != nil {
		return nil, nil, fmt.Errorf("empty state: %w", err)
	}
	log, err := wal.Open(filepath.Join(dir, "fano.db"), wal.Options{NoSync: true})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("empty state: %w", err)
	}
	return log, func() { _ = os.RemoveAll(dir) }, nil
}

// walOpenError adds what to do to the errors of a damaged or missing WAL.
func walOpenError(path string, err error) error {
	switch {
	case errors.Is(err, wal.ErrDamaged):
		return fmt.Errorf("%w\nfano will not start on it. To go on: 'fano wal salvage --to FILE' copies every readable entry into FILE and reports what was lost (then stop fano and move FILE to %s), or 'fano wal restore BACKUP' puts a backup from the data directory's backup/ in its place", err, path)
	case errors.Is(err, os.ErrNotExist), errors.Is(err, wal.ErrEmpty):
		return fmt.Errorf("%w: there is no state to read; 'fano run' starts a new one", err)
	}
	return err
}

// NewData is an opened data directory made by a caller that opens the
// WAL and logger its own way (a pipeline run); closeLog closes the logger.
func NewData(cfg *config.Config, log *wal.Log, logger zerolog.Logger, closeLog func() error) *Data {
	return &Data{Config: cfg, Dir: cfg.DataDir, Log: log, Logger: logger, closeLog: closeLog}
}

// Close closes the WAL and the log file.
func (d *Data) Close() error {
	err := d.Log.Close()
	if cerr := d.closeLog(); err == nil {
		err = cerr
	}
	return err
}

// Wiring builds the actor system's options for d.
func (d *Data) Wiring(clock clockwork.Clock) Wiring {
	return Wiring{Config: d.Config, DataDir: d.Dir, Log: d.Log, Storage: d.Storage, Logger: d.Logger, Clock: clock}
}

// Wiring is everything the actor system is built from: the config, the
// open WAL, and what a caller may put in place of the real parts.
type Wiring struct {
	Config  *config.Config
	DataDir string
	Log     *wal.Log
	Storage *actors.StorageWatch
	Logger  zerolog.Logger
	Clock   clockwork.Clock
	// NewBackend builds the gateway of a config backend (nil: the real
	// one of its type). Each is put behind the circuit breaker.
	NewBackend func(name string, b *config.Backend) (gateway.Backend, error)
	// Modules run beside those the config enables (a pipeline run's
	// module; a test's).
	Modules []modules.Module
	// UntilIdle: the run ends when no work is left, so the researcher
	// does not open new questions from the document's gaps.
	UntilIdle bool
}

// ActorOptions builds the actor system's options from the config.
func (w Wiring) ActorOptions() (actors.Options, error) {
	cfg := w.Config
	o := cfg.Orchestrator
	if w.Clock == nil {
		w.Clock = clockwork.NewRealClock()
	}
	backends, allocCfg, err := buildBackends(cfg, &backendEnv{Cfg: cfg, DataDir: w.DataDir, Clock: w.Clock, Logger: w.Logger,
		newBackend: w.NewBackend})
	if err != nil {
		return actors.Options{}, err
	}
	mods, err := w.BuildModules()
	if err != nil {
		return actors.Options{}, err
	}
	refusals, err := refusal.Load(cfg.LLM.RefusalPatternsFile)
	if err != nil {
		return actors.Options{}, fmt.Errorf("llm.refusal_patterns_file: %w", err)
	}
	var backoff []time.Duration
	for _, s := range o.Recovery.RetryBackoffSeconds {
		backoff = append(backoff, time.Duration(s)*time.Second)
	}
	return actors.Options{
		Log: w.Log, Storage: w.Storage, Clock: w.Clock, Logger: w.Logger, OutputDir: filepath.Join(w.DataDir, "output"),
		Scheduler: scheduler.Config{
			PreemptionThreshold: o.Scheduler.PreemptionThreshold,
			MaxPending:          o.Scheduler.MaxPendingTasks,
			BoostPerHour:        o.Scheduler.StarvationPrevention.PriorityBoostPerHour,
			MaxBoost:            o.Scheduler.StarvationPrevention.MaxBoost,
			MessageLimit:        o.Tasks.ConversationMessageLimit,
			ShareWindow:         time.Hour,
		},
		Allocator:          allocCfg,
		Backends:           backends,
		Modules:            mods,
		TickInterval:       time.Duration(o.Scheduler.TickIntervalMS) * time.Millisecond,
		CheckpointInterval: time.Duration(o.State.CheckpointIntervalSeconds) * time.Second,
		CompactThreshold:   int64(o.State.WALCompactThresholdMB) << 20,
		MaxRunning:         o.Scheduler.MaxRunningTasks,
		MaxRequests:        cfg.MaxRequests,
		RequestTimeout:     time.Duration(o.Tasks.RequestTimeoutSeconds) * time.Second,
		RetryBackoff:       backoff,
		Refusals:           refusals,
		FinishedRetention:  time.Duration(o.State.FinishedTaskRetentionHours) * time.Hour,
	}, nil
}

// buildBackends makes a gateway per enabled backend, in name order.
func buildBackends(cfg *config.Config, env *backendEnv) ([]gateway.Backend, allocator.Config, error) {
	ac := allocator.Config{
		HourlyResetMinute:   cfg.LLM.HourlyResetMinute,
		DailyResetHour:      cfg.LLM.DailyResetHour,
		BufferPercent:       cfg.LLM.QuotaBufferPercent,
		RecoveryCleanHours:  cfg.LLM.RateLimitRecovery.CleanHoursPerStep,
		RecoveryStepPercent: cfg.LLM.RateLimitRecovery.StepPercent,
	}
	if env.limiters == nil {
		env.limiters = ratelimit.NewRegistry(env.Clock)
	}
	names := cfg.EnabledBackends()
	sort.Strings(names)
	var out []gateway.Backend
	for _, name := range names {
		b, _ := cfg.Backend(name)
		if env.newBackend != nil {
			gw, err := env.newBackend(name, b)
			if err != nil {
				return nil, ac, fmt.Errorf("backend %s: %w", name, err)
			}
			out = append(out, wrapBreaker(gw, env))
			ac.Backends = append(ac.Backends, allocator.BackendConfig{
				Name: name, Kind: b.Type, HourlyLimit: b.HourlyLimit, DeepDailyLimit: b.DeepModeDailyLimit, MaxConcurrency: b.MaxConcurrency,
			})
			continue
		}
		var mk func(name string, b *config.Backend, env *backendEnv) (gateway.Backend, error)
		switch b.Type {
		case config.TypeAPI:
			mk = newAPIBackend
		case config.TypeBrowser:
			mk = newBrowserBackend
		}
		switch b.Type {
		case config.TypeSim:
			// The pipeline's task type has its own simulated answers
			// (gateway/sim keeps them by task type).
			sim.RegisterFormat(pipeline.TaskType, pipelineSimAnswer)
			s := b.Sim
			out = append(out, wrapBreaker(sim.New(sim.Config{
				Name: name, Style: s.Style, Seed: s.Seed,
				Latency: time.Duration(s.LatencyMS) * time.Millisecond, Jitter: time.Duration(s.LatencyJitterMS) * time.Millisecond,
				HourlyLimit: orDefault(s.HourlyLimit, b.HourlyLimit), DeepDailyLimit: orDefault(s.DeepModeDailyLimit, b.DeepModeDailyLimit),
				HourlyResetMinute: cfg.LLM.HourlyResetMinute, DailyResetHour: cfg.LLM.DailyResetHour,
				TimeoutRate: s.TimeoutRate, TransientRate: s.TransientRate, MalformedRate: s.MalformedRate,
			}, env.Clock), env))
		default:
			if mk == nil {
				return nil, ac, fmt.Errorf("backend %s: type %q is not supported by this build", name, b.Type)
			}
			gw, err := mk(name, b, env)
			if err != nil {
				return nil, ac, fmt.Errorf("backend %s: %w", name, err)
			}
			// Every backend sits behind a circuit breaker (spec §9.3).
			out = append(out, wrapBreaker(gw, env))
		}
		ac.Backends = append(ac.Backends, allocator.BackendConfig{
			Name: name, Kind: b.Type, HourlyLimit: b.HourlyLimit, DeepDailyLimit: b.DeepModeDailyLimit, MaxConcurrency: b.MaxConcurrency,
		})
	}
	return out, ac, nil
}

func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// backendEnv is what a backend constructor may use.
type backendEnv struct {
	Cfg     *config.Config
	DataDir string
	Clock   clockwork.Clock
	Logger  zerolog.Logger
	// newBackend replaces the constructors by type (Wiring.NewBackend).
	newBackend func(name string, b *config.Backend) (gateway.Backend, error)
	// limiters are the API rate limiters these backends share.
	limiters *ratelimit.Registry
}

// BuildModules returns fresh modules: those the config enables, in a
// fixed order, then w.Modules; with none, the probe module does the
// exploring. The modules of one call share one duplicate checker, so the
// documenter's sections and the explorer's insights are checked against
// each other (spec issue C4).
func (w Wiring) BuildModules() ([]modules.Module, error) {
	env := &moduleEnv{Cfg: w.Config, DataDir: w.DataDir, Logger: w.Logger, UntilIdle: w.UntilIdle, Checker: newChecker(w.Config)}
	var out []modules.Module
	for _, mk := range []func(*moduleEnv) (modules.Module, error){
		newDocumenterModule,
		newExplorerModule,
		newResearcherModule,
	} {
		m, err := mk(env)
		if err != nil {
			return nil, err
		}
		if m != nil {
			out = append(out, m)
		}
	}
	out = append(out, w.Modules...)
	if len(out) == 0 {
		out = append(out, probe.New(probe.Config{Turns: 3}))
	}
	return out, nil
}

// pipelineSimAnswer is a simulated answer to a pipeline step's prompt.
func pipelineSimAnswer(req gateway.Request, r *rand.Rand, _ string) string {
	return pipeline.SimAnswer(req.Prompt, r)
}

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// refuseLostState refuses to start a new WAL where fano.db is missing or
// empty but the data directory holds what earlier runs left: that state
// was lost (a deleted or emptied file, a wrong --data-dir layout), and a
// new log would redo all the work, spend quota again and overwrite the
// output.
func refuseLostState(dataDir, path string) error {
	fi, err := os.Stat(path)
	if err == nil && fi.Size() > 0 {
		return nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil // wal.Open reports it
	}
	traces := priorRunTraces(dataDir)
	if len(traces) == 0 {
		return nil
	}
	what := "is missing"
	if err == nil {
		what = "is empty"
	}
	return fmt.Errorf("data dir %s: %s %s but the directory holds what earlier runs left (%s); starting anew would redo every task and overwrite the output. "+
		"Restore a backup ('fano wal restore %s/...'), or start anew on purpose with 'fano run --fresh'",
		dataDir, path, what, strings.Join(traces, ", "), BackupDir(dataDir))
}

// priorRunTraces names what earlier runs leave in a data directory.
func priorRunTraces(dataDir string) []string {
	var out []string
	nonEmpty := func(name string) {
		if ents, err := os.ReadDir(filepath.Join(dataDir, name)); err == nil && len(ents) > 0 {
			out = append(out, fmt.Sprintf("%s/ (%d entries)", name, len(ents)))
		}
	}
	nonEmpty("output")
	nonEmpty("logs")
	nonEmpty("backup")
	for _, name := range []string{"panel.token"} {
		if _, err := os.Stat(filepath.Join(dataDir, name)); err == nil {
			out = append(out, name)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(dataDir, "fano.db.before-restore-*")); len(m) > 0 {
		out = append(out, filepath.Base(m[0]))
	}
	return out
}
