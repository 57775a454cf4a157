package app

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
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
	"fano/gateway/ratelimit"
	"fano/gateway/refusal"
	"fano/gateway/sim"
	"fano/modules"
	"fano/modules/pipeline"
	"fano/modules/probe"
	"fano/pb"
	"fano/remote"
	"fano/wal"
)

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
	// Observe is actors.Options.Observe (nil: none).
	Observe func(owner string, e *pb.Event)
	// DispatchOnTick is actors.Options.DispatchOnTick.
	DispatchOnTick bool
	// Hub sends the requests of backends on gateway hosts (config host:)
	// to their hosts; nil when the config has no hosts.
	Hub *remote.Hub
}

// ActorOptions builds the actor system's options from the config.
func (w Wiring) ActorOptions() (actors.Options, error) {
	cfg := w.Config
	o := cfg.Orchestrator
	if w.Clock == nil {
		w.Clock = clockwork.NewRealClock()
	}
	backends, allocCfg, err := buildBackends(cfg, &backendEnv{Cfg: cfg, DataDir: w.DataDir, Clock: w.Clock, Logger: w.Logger,
		newBackend: w.NewBackend, hub: w.Hub})
	if err != nil {
		return actors.Options{}, err
	}
	mods, unbuilt, err := w.buildModules()
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
		Log: w.Log, Storage: w.Storage, Clock: w.Clock, Logger: w.Logger, OutputDir: filepath.Join(w.DataDir, "output"), Observe: w.Observe,
		DispatchOnTick:      w.DispatchOnTick,
		Scheduler:           scheduler.FromConfig(cfg),
		Allocator:           allocCfg,
		Backends:            backends,
		Modules:             mods,
		Unbuilt:             unbuilt,
		TickInterval:        time.Duration(o.Scheduler.TickIntervalMS) * time.Millisecond,
		CheckpointInterval:  time.Duration(o.State.CheckpointIntervalSeconds) * time.Second,
		CompactThreshold:    int64(o.State.WALCompactThresholdMB) << 20,
		MaxRunning:          o.Scheduler.MaxRunningTasks,
		MaxRequests:         cfg.MaxRequests,
		RequestTimeout:      time.Duration(o.Tasks.RequestTimeoutSeconds) * time.Second,
		RetryBackoff:        backoff,
		ValidationRetries:   cmp.Or(o.Recovery.MaxTaskRetries, -1), // max_task_retries 0 (none) is -1 there
		Refusals:            refusals,
		FinishedRetention:   time.Duration(o.State.FinishedTaskRetentionHours) * time.Hour,
		MaxFinishedInMemory: o.State.MaxFinishedTasksInMemory,
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
		if b.Host != "" {
			// Held by a gateway host on another machine: the host runs
			// it; quotas, priorities and conditions stay here.
			gw := remote.Unreached(name, b.Host) // a command that does not run the actors
			if env.hub != nil {
				gw = env.hub.Backend(name, b.Host)
			}
			// Not behind a breaker here: the host's breaker guards the
			// backend where it runs and its open circuit comes back as
			// the backend's condition; a lost host is no failure of the
			// backend to count.
			out = append(out, gw)
			ac.Backends = append(ac.Backends, allocator.BackendConfig{
				Name: name, Kind: b.Type, HourlyLimit: b.HourlyLimit, DeepDailyLimit: b.DeepModeDailyLimit, MaxConcurrency: b.MaxConcurrency,
			})
			continue
		}
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
			// Every backend sits behind a circuit breaker.
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
	// hub reaches the backends on gateway hosts.
	hub *remote.Hub
}

// registry is every module fano builds, by name, in build order. Each
// constructor returns nil when its module is not wanted here (disabled
// in the config, no pipeline in the data directory) and notBuilt when
// it is known but cannot be built, with why.
var registry = []struct {
	name  string
	build func(*moduleEnv) (modules.Module, error)
}{
	{"documenter", newDocumenterModule},
	{"explorer", newExplorerModule},
	{"researcher", newResearcherModule},
	{pipeline.Name, newPipelineModule},
}

// ModuleNames lists the modules fano can build.
func ModuleNames() []string {
	out := make([]string, 0, len(registry))
	for _, r := range registry {
		out = append(out, r.name)
	}
	return out
}

// BuildModules returns fresh modules: w.Modules, then those of the
// registry that are wanted here and not among them; with none, the probe
// module does the exploring. The modules of one call share one duplicate
// checker, so the documenter's sections and the explorer's insights are
// checked against each other (spec issue C4).
func (w Wiring) BuildModules() ([]modules.Module, error) {
	mods, _, err := w.buildModules()
	return mods, err
}

// buildModules is BuildModules, and the registry's modules that are not
// built here with why (for recovery to refuse their tasks by name).
func (w Wiring) buildModules() ([]modules.Module, map[string]string, error) {
	env := &moduleEnv{Cfg: w.Config, DataDir: w.DataDir, Logger: w.Logger, UntilIdle: w.UntilIdle, Checker: newChecker(w.Config)}
	given := map[string]bool{}
	for _, m := range w.Modules {
		given[m.Name()] = true
	}
	var out []modules.Module
	unbuilt := map[string]string{}
	for _, r := range registry {
		if given[r.name] {
			continue
		}
		m, err := r.build(env)
		var nb notBuilt
		if errors.As(err, &nb) {
			unbuilt[r.name] = nb.why
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		if m != nil {
			out = append(out, m)
		}
	}
	out = append(out, w.Modules...)
	if len(out) == 0 {
		out = append(out, probe.New(probe.Config{Turns: 3}))
	}
	return out, unbuilt, nil
}

// pipelineSimAnswer is a simulated answer to a pipeline step's prompt.
func pipelineSimAnswer(req gateway.Request, r *rand.Rand, _ string) string {
	return pipeline.SimAnswer(req.Prompt, r)
}
