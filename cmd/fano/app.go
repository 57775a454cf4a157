package main

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"fano/actors"
	"fano/actors/allocator"
	"fano/actors/scheduler"
	"fano/config"
	"fano/gateway"
	"fano/gateway/refusal"
	"fano/gateway/sim"
	"fano/logging"
	"fano/modules"
	"fano/modules/probe"
	"fano/wal"
)

// app is an opened data directory: config, logger and WAL. Commands and
// end-to-end tests build on it.
type app struct {
	cfg      *config.Config
	dataDir  string
	log      *wal.Log
	storage  *actors.StorageWatch // the WAL's write faults (writable opens)
	logger   zerolog.Logger
	closeLog func() error
}

// loadConfig reads --config (or the built-in demo) and applies --data-dir.
func loadConfig(g *globals) (*config.Config, error) {
	var cfg *config.Config
	if g.configPath == "" {
		cfg = config.Default()
	} else {
		c, err := config.Load(g.configPath)
		if err != nil {
			return nil, err
		}
		cfg = c
	}
	if g.dataDir != "" {
		cfg.DataDir = g.dataDir
	}
	if cfg.DataDir == "" {
		cfg.DataDir = "./fano-data"
	}
	if cfg.LLM.EnvFile != "" {
		if _, err := config.LoadEnvFile(cfg.LLM.EnvFile); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// openApp loads the config, checks the data directory and opens the WAL
// for writing. A locked, damaged or corrupt database is one clear error,
// and nothing is written.
func openApp(g *globals, console string) (*app, error) {
	return openData(g, openOpts{console: console})
}

// openAppReadOnly opens the data directory for a command that only reads
// (status and tasks offline, verify, wal inspect, recover --dry-run): the
// WAL is opened read-only (shared lock, no PID file) and no log file is
// written, so the data directory's bytes stay as they were.
func openAppReadOnly(g *globals) (*app, error) {
	return openData(g, openOpts{console: "off", readOnly: true})
}

// openOpts say how a command opens the data directory.
type openOpts struct {
	console  string // logging.console override ("" = the config's)
	readOnly bool   // see openAppReadOnly
	// fresh allows a new WAL where fano.db is missing or empty although
	// the directory holds the traces of earlier runs (`fano run --fresh`).
	fresh bool
}

func openData(g *globals, o openOpts) (*app, error) {
	console, readOnly := o.console, o.readOnly
	cfg, err := loadConfig(g)
	if err != nil {
		return nil, err
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
		opts.OnWriteFault = func(err error, attempt int) { storage.Failed(err, attempt, time.Now()) }
		opts.OnWriteRecovered = storage.Recovered
	}
	if !readOnly && !o.fresh {
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
	logger, closeLog, err := logging.New(logging.Options{Dir: logDir, Level: cfg.Logging.Level, Console: console})
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
	return &app{cfg: cfg, dataDir: cfg.DataDir, log: log, storage: storage, logger: logger, closeLog: closeLog}, nil
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

func (a *app) close() error {
	err := a.log.Close()
	if cerr := a.closeLog(); err == nil {
		err = cerr
	}
	return err
}

// options builds the actor system's options from the config.
func (a *app) options(clock clockwork.Clock) (actors.Options, error) {
	cfg := a.cfg
	o := cfg.Orchestrator
	backends, allocCfg, err := buildBackends(cfg, &backendEnv{Cfg: cfg, DataDir: a.dataDir, Clock: clock, Logger: a.logger})
	if err != nil {
		return actors.Options{}, err
	}
	mods, err := buildModules(&moduleEnv{Cfg: cfg, DataDir: a.dataDir, Logger: a.logger})
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
		Log: a.log, Storage: a.storage, Clock: clock, Logger: a.logger, OutputDir: filepath.Join(a.dataDir, "output"),
		Scheduler:          scheduler.FromConfig(cfg),
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
		ValidationRetries:  cmp.Or(o.Recovery.MaxTaskRetries, -1), // max_task_retries 0 (none) is -1 there
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
	names := cfg.EnabledBackends()
	sort.Strings(names)
	var out []gateway.Backend
	for _, name := range names {
		b, _ := cfg.Backend(name)
		switch b.Type {
		case config.TypeSim:
			s := b.Sim
			out = append(out, wrapBreaker(sim.New(sim.Config{
				Name: name, Style: s.Style, Seed: s.Seed,
				Latency: time.Duration(s.LatencyMS) * time.Millisecond, Jitter: time.Duration(s.LatencyJitterMS) * time.Millisecond,
				HourlyLimit: orDefault(s.HourlyLimit, b.HourlyLimit), DeepDailyLimit: orDefault(s.DeepModeDailyLimit, b.DeepModeDailyLimit),
				HourlyResetMinute: cfg.LLM.HourlyResetMinute, DailyResetHour: cfg.LLM.DailyResetHour,
				TimeoutRate: s.TimeoutRate, TransientRate: s.TransientRate, MalformedRate: s.MalformedRate,
			}, env.Clock), env))
		default:
			mk, ok := backendFactories[b.Type]
			if !ok {
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

// buildModules returns the configured modules; with none registered, the
// probe module does the exploring.
func buildModules(env *moduleEnv) ([]modules.Module, error) {
	var out []modules.Module
	for _, mk := range moduleFactories {
		m, err := mk(env)
		if err != nil {
			return nil, err
		}
		if m != nil {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		out = append(out, probe.New(probe.Config{Turns: 3}))
	}
	return out, nil
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
		dataDir, path, what, strings.Join(traces, ", "), backupDir(dataDir))
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
