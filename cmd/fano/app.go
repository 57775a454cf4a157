package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
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

// openApp loads the config, checks the data directory and opens the WAL.
// A locked or corrupt database is one clear error, and nothing is written.
func openApp(g *globals, console string) (*app, error) {
	cfg, err := loadConfig(g)
	if err != nil {
		return nil, err
	}
	if err := config.CheckDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	// The WAL first: a locked or corrupt database stops us before we
	// write anything, not even a log line.
	log, err := wal.Open(filepath.Join(cfg.DataDir, "fano.db"), wal.Options{
		LockTimeout: time.Second,
		PIDFile:     filepath.Join(cfg.DataDir, "fano.pid"),
	})
	if err != nil {
		return nil, err
	}
	if console == "" {
		console = cfg.Logging.Console
	}
	logger, closeLog, err := logging.New(logging.Options{Dir: filepath.Join(cfg.DataDir, "logs"), Level: cfg.Logging.Level, Console: console})
	if err != nil {
		log.Close()
		return nil, err
	}
	if pid := log.StalePID(); pid != 0 {
		logger.Warn().Int("pid", pid).Str("event", "cmd.fano.stale_pid").Msg("took over the data directory from a process that is gone")
	}
	return &app{cfg: cfg, dataDir: cfg.DataDir, log: log, logger: logger, closeLog: closeLog}, nil
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
		Log: a.log, Clock: clock, Logger: a.logger, OutputDir: filepath.Join(a.dataDir, "output"),
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
