package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"fano/actors"
	fanoapp "fano/app"
	"fano/config"
	"fano/gateway"
	"fano/gateway/api"
	"fano/gateway/breaker"
	"fano/modules/explorer"
	"fano/modules/researcher"
	"fano/simulate"
	"fano/verify"
	"fano/wal"
)

// `fano simulate`: days of operation on the virtual clock, with
// a fault schedule, on the real actor tree, modules and WAL; every backend
// is a simulated one with its config's limits.

type simulateFlags struct {
	days       int
	faultsPath string
	seed       int64
	quiet      bool
	step       time.Duration
}

func newSimulateCmd(g *globals) *cobra.Command {
	var f simulateFlags
	cmd := &cobra.Command{
		Use:   "simulate",
		Short: "Run days of operation with a fault schedule on a virtual clock, and report what they yield and cost",
		Long: "simulate runs fano as configured (modules, priorities, quotas, panels) for --days simulated days in\n" +
			"about a minute: every backend is replaced by a simulated one with the config's limits, and the fault\n" +
			"schedule (--faults, default: the built-in one, see `fano simulate --print-faults`) crashes browsers,\n" +
			"expires logins, storms with 429s, hangs, restarts and kills fano and fills the disk.\n\n" +
			"The data directory (--data-dir, default a new temporary one) holds the simulated state; the report is\n" +
			"DIR/simulation/report.md, report.json and a chart per day (day-NN.svg). Exit status 1 if a goal fails.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if p, _ := cmd.Flags().GetBool("print-faults"); p {
				_, err := cmd.OutOrStdout().Write(simulate.DefaultScheduleYAML())
				return err
			}
			return runSimulate(cmd.Context(), g, f, cmd.OutOrStdout())
		},
	}
	cmd.Flags().IntVar(&f.days, "days", 14, "simulated days")
	cmd.Flags().StringVar(&f.faultsPath, "faults", "", "fault schedule (YAML; default: the built-in one)")
	cmd.Flags().Int64Var(&f.seed, "seed", 1, "seed of the simulated answers and faults: the same seed gives the same report")
	cmd.Flags().BoolVar(&f.quiet, "quiet", false, "no line per simulated day")
	cmd.Flags().DurationVar(&f.step, "step", 5*time.Minute, "how often backend states are sampled, and the longest jump of the clock while nothing happens (1m..1h)")
	cmd.Flags().Bool("print-faults", false, "print the built-in fault schedule and exit")
	return cmd
}

// simulation is a simulate run's settings, shared with tests.
type simulation struct {
	cfg      *config.Config // the user's config, with the data directory
	cfgPath  string         // --config ("" = the built-in demo)
	simCfg   *config.Config // the same with every backend a sim one
	schedule *simulate.Schedule
	days     int
	seed     int64
	progress io.Writer
	// sampleEvery and maxIdleStep coarsen the driver (tests; 0 = defaults).
	sampleEvery, maxIdleStep time.Duration
	trace                    io.Writer // simulate.Options.Trace (tests)
}

func runSimulate(ctx context.Context, g *globals, f simulateFlags, out io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if f.days < 1 {
		return fmt.Errorf("--days: %d; simulate at least 1 day", f.days)
	}
	if f.step != 0 && (f.step < time.Minute || f.step > time.Hour || time.Hour%f.step != 0) {
		return fmt.Errorf("--step: %s; give a divisor of an hour between 1m and 1h (e.g. 1m, 5m, 15m)", f.step)
	}
	s, err := newSimulation(g, f)
	if err != nil {
		return err
	}
	if !f.quiet {
		s.progress = out
	}
	fmt.Fprintf(out, "fano simulate: %d days on %s, faults %s, seed %d\n", s.days, s.cfg.DataDir, s.schedule.Name, s.seed)
	if p := os.Getenv("FANO_SIMULATE_CPUPROFILE"); p != "" {
		// For tuning the simulator itself.
		if f, err := os.Create(p); err == nil {
			// 15 s by default (the first days); FANO_SIMULATE_CPUPROFILE_SECONDS
			// for longer, 0 for the whole run.
			secs := 15
			if v, err := strconv.Atoi(os.Getenv("FANO_SIMULATE_CPUPROFILE_SECONDS")); err == nil {
				secs = v
			}
			_ = pprof.StartCPUProfile(f)
			if secs > 0 {
				stop := time.AfterFunc(time.Duration(secs)*time.Second, pprof.StopCPUProfile)
				defer stop.Stop()
			}
			defer pprof.StopCPUProfile()
		}
	}
	rep, err := s.run(ctx)
	if err != nil {
		return err
	}
	s.checkAfter(rep)
	dir := filepath.Join(s.cfg.DataDir, "simulation")
	if err := rep.Write(dir); err != nil {
		return err
	}
	fmt.Fprintf(out, "fano simulate: %d days in %.1f s (%.0f simulated seconds per second); report %s\n",
		s.days, rep.Runtime.WallSeconds, rep.Runtime.SimSecondsPerWall, filepath.Join(dir, "report.md"))
	for _, gl := range rep.Goals {
		mark := "ok    "
		if !gl.OK {
			mark = "FAILED"
		}
		fmt.Fprintf(out, "  %s %s: %s\n", mark, gl.Name, gl.Detail)
	}
	if ok, failed := rep.GoalsMet(); !ok {
		return fmt.Errorf("simulate: %d goals failed (see %s)", len(failed), filepath.Join(dir, "report.md"))
	}
	return nil
}

// newSimulation loads the config (the built-in demo without --config) and
// the schedule, and settles the data directory: --data-dir, else a new
// temporary one (never the config's data_dir: a simulation must not touch
// a real fano's state).
func newSimulation(g *globals, f simulateFlags) (*simulation, error) {
	cfg, err := readConfig(g)
	if err != nil {
		return nil, err
	}
	if g.dataDir != "" {
		cfg.DataDir = g.dataDir
	} else {
		dir, err := os.MkdirTemp("", "fano-simulate-*")
		if err != nil {
			return nil, fmt.Errorf("simulate: %w", err)
		}
		cfg.DataDir = dir
	}
	if err := config.CheckDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	if exists(filepath.Join(cfg.DataDir, "fano.db")) {
		return nil, fmt.Errorf("simulate: %s already holds a fano state; simulate on an empty or new --data-dir", cfg.DataDir)
	}
	sched := simulate.DefaultSchedule()
	if f.faultsPath != "" {
		s, err := simulate.LoadSchedule(f.faultsPath)
		if err != nil {
			return nil, err
		}
		sched = s
	}
	return &simulation{cfg: cfg, cfgPath: g.configPath, simCfg: simulatedConfig(cfg), schedule: sched, days: f.days, seed: f.seed,
		sampleEvery: f.step, maxIdleStep: f.step}, nil
}

// simulatedConfig copies cfg with every enabled backend turned into a sim
// backend of the same limits; nothing else changes.
func simulatedConfig(cfg *config.Config) *config.Config {
	c := *cfg
	c.Backends = map[string]*config.Backend{}
	for name, b := range cfg.Backends {
		if b == nil {
			continue
		}
		nb := *b
		nb.Type, nb.Browser, nb.API = config.TypeSim, nil, nil
		nb.Sim = &config.SimOptions{Seed: 1, Style: simStyle(name, b)}
		if b.Sim != nil {
			so := *b.Sim
			nb.Sim = &so
		}
		c.Backends[name] = &nb
	}
	return &c
}

func simStyle(name string, b *config.Backend) string {
	if b.Sim != nil && b.Sim.Style != "" {
		return b.Sim.Style
	}
	if b.Type == config.TypeAPI {
		return "api"
	}
	for _, s := range []string{"chatgpt", "gemini", "claude"} {
		if name == s || (b.Browser != nil && b.Browser.Profile == s) {
			return s
		}
	}
	return "chatgpt"
}

func (s *simulation) specs() []simulate.BackendSpec {
	var out []simulate.BackendSpec
	for _, name := range s.cfg.EnabledBackends() {
		orig, _ := s.cfg.Backend(name)
		sb, _ := s.simCfg.Backend(name)
		out = append(out, simulate.BackendSpec{
			Name: name, Kind: orig.Type, Style: sb.Sim.Style,
			HourlyLimit: cmp.Or(sb.Sim.HourlyLimit, orig.HourlyLimit), DeepDailyLimit: cmp.Or(sb.Sim.DeepModeDailyLimit, orig.DeepModeDailyLimit),
			Latency: time.Duration(sb.Sim.LatencyMS) * time.Millisecond, Jitter: time.Duration(sb.Sim.LatencyJitterMS) * time.Millisecond,
			HourlyResetMinute: s.cfg.LLM.HourlyResetMinute, DailyResetHour: s.cfg.LLM.DailyResetHour,
		})
	}
	return out
}

// configSeeds is how many questions the explorer gets on day 1 without
// the simulated user: the config's (its seeds file, else the built-in
// seeds; 0 when they cannot be read: the start then says why) and those
// the researcher raises from the document's first sections.
func (s *simulation) configSeeds() int {
	n := len(explorer.DefaultSeeds())
	if f := s.cfg.Explorer.SeedsFile; f != "" {
		seeds, err := explorer.LoadSeeds(f)
		if err != nil {
			seeds = nil
		}
		n = len(seeds)
	}
	if s.cfg.Researcher.Enabled {
		n += researcher.GapQuestions()
	}
	return n
}

func (s *simulation) run(ctx context.Context) (*simulate.Report, error) {
	o := simulate.Options{
		Days: s.days, Seed: s.seed, Schedule: s.schedule, Backends: s.specs(), Start: s.start,
		TickInterval: time.Duration(s.cfg.Orchestrator.Scheduler.TickIntervalMS) * time.Millisecond,
		SeedModule:   "explorer", ConfigSeeds: s.configSeeds(),
		SampleEvery: s.sampleEvery, MaxIdleStep: s.maxIdleStep, Trace: s.trace,
	}
	if s.progress != nil {
		o.Progress = func(day int, d simulate.DayReport) { fmt.Fprintf(s.progress, "  %s\n", d) }
	}
	rep, err := simulate.Run(ctx, o)
	if err != nil {
		return nil, err
	}
	rep.Config = s.cfg.File()
	if rep.Config == "" {
		rep.Config = config.DemoName
	}
	return rep, nil
}

// checkAfter adds the goals checked on the stopped data directory:
// `fano verify` and `fano doc check` clean.
func (s *simulation) checkAfter(rep *simulate.Report) {
	var problems []string
	if vr, err := s.verify(); err != nil {
		problems = append(problems, "verify: "+err.Error())
	} else if !vr.Clean {
		for _, p := range vr.Problems {
			problems = append(problems, fmt.Sprintf("verify: %v", p))
		}
	}
	g := &globals{dataDir: s.cfg.DataDir, configPath: s.cfgPath}
	if dc, err := docCheck(g); err != nil {
		problems = append(problems, "doc check: "+err.Error())
	} else {
		for _, f := range dc.Findings {
			problems = append(problems, fmt.Sprintf("doc check: %s %s: %s", f.Kind, f.Section, f.Detail))
		}
	}
	detail := "both clean"
	if len(problems) > 0 {
		detail = fmt.Sprintf("%d problems, first: %s", len(problems), problems[0])
	}
	rep.AddGoal(simulate.GoalVerify, len(problems) == 0, detail)
}

func (s *simulation) verify() (*verify.Report, error) {
	g := &globals{dataDir: s.cfg.DataDir, configPath: s.cfgPath}
	a, err := openOffline(g, "verify", true)
	if err != nil {
		return nil, err
	}
	defer a.close()
	a.cfg, a.data.Config = s.simCfg, s.simCfg
	env, err := verifyEnv(a)
	if err != nil {
		return nil, err
	}
	return verify.Verify(env)
}

// simFano is one fano of the simulation: app.Main as `fano run` runs
// it, on the virtual clock, without the panel and the backups.
type simFano struct{ m *fanoapp.Main }

func (f simFano) System() *actors.System { return f.m.System() }

func (f simFano) Storage() *actors.StorageWatch { return f.m.Data().Storage }

func (f simFano) Stop() error {
	return f.m.Close()
}

func (f simFano) Kill() error {
	return f.m.Kill()
}

// start opens the data directory and starts fano on env's clock with the
// simulated backends in place of the config's (app puts each behind its
// circuit breaker, as for any backend).
func (s *simulation) start(env simulate.Env) (simulate.Fano, error) {
	byName := map[string]gateway.Backend{}
	for _, b := range env.Backends {
		byName[b.Name()] = b
		if b.Kind() == config.TypeAPI {
			gw, err := apiInFront(b, env)
			if err != nil {
				return nil, err
			}
			byName[b.Name()] = gw
		}
	}
	m := fanoapp.NewMain(fanoapp.Options{
		Config: s.simCfg, DataDir: s.cfg.DataDir, Clock: env.Clock,
		NewBackend: func(name string, _ *config.Backend) (gateway.Backend, error) {
			b, ok := byName[name]
			if !ok {
				return nil, fmt.Errorf("simulate: no simulated backend %s", name)
			}
			// The config's circuit breaker, as fano puts any backend
			// behind (app leaves one already wrapped as it is), with the
			// calls of one instant lined up in task order before it.
			cb := s.simCfg.LLM.CircuitBreaker
			return breaker.Wrap(b, breaker.Config{
				FailureThreshold: cb.FailureThreshold, HalfOpenRequests: cb.HalfOpenRequests,
				RecoveryTimeout: time.Duration(cb.RecoveryTimeoutSeconds) * time.Second,
				Clock:           env.Clock, Turn: env.Turns.Wait,
			}), nil
		},
		// A simulation's WAL need not survive a power cut: no fsync.
		WAL:     func(o *wal.Options) { o.NoSync = true },
		Console: "off", NoPanel: true, NoBackups: true, Disk: env.DiskFree, Observe: env.Observe, Notices: env.Notices,
		// One seed, one report: tasks start at ticks, not in the order
		// concurrent messages happened to reach the scheduler.
		DispatchOnTick: true,
	})
	if err := m.Open(context.Background()); err != nil {
		return nil, err
	}
	return simFano{m: m}, nil
}

// apiInFront puts the real API gateway in front of a simulated API
// service: its requests reach the service's handler in process, with no
// socket. The gateway sends without a rate limiter (the service's quota
// and the allocator pace it).
func apiInFront(b *simulate.Backend, env simulate.Env) (gateway.Backend, error) {
	gw, err := api.New(api.Config{
		Name: b.Name(), BaseURL: "http://simulated.invalid/v1", Model: "simulated", APIKey: "simulated-key",
		Client: &http.Client{Transport: simulate.Transport(simulate.Handler(b))}, Clock: env.Clock,
	})
	if err != nil {
		return nil, fmt.Errorf("simulate: backend %s: %w", b.Name(), err)
	}
	return apiSim{gw}, nil
}

// apiSim hands the gateway request to the simulated service beside the
// HTTP body, which carries only the messages.
type apiSim struct{ *api.Backend }

func (a apiSim) Send(ctx context.Context, req gateway.Request) (gateway.Response, error) {
	return a.Backend.Send(simulate.WithRequest(ctx, req), req)
}

func (a apiSim) Unwrap() gateway.Backend { return a.Backend }
