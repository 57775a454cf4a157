package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"fano/actors"
	fanoapp "fano/app"
	"fano/config"
	"fano/gateway"
	"fano/internal/procs"
	"fano/logging"
	"fano/modules"
	"fano/modules/pipeline"
	"fano/pb"
	"fano/wal"
)

// `fano pipeline`: a user's per-item LLM pipeline (modules/pipeline) on
// fano's core. A run directory (--data-dir, default runs/<name>) holds
// the WAL, a snapshot of the definition (pipeline.yaml), the logs, and
// output/results.jsonl, output/failures.jsonl, output/summary.json.

const (
	pipelineSnapshot = "pipeline.yaml"
	pipelineProgress = "progress.json"
)

func newPipelineCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pipeline",
		Short: "Run a per-item LLM pipeline durably (init, validate, run, status, verify, repair, revalidate, export)",
		Long: "A pipeline file names items (a JSONL or CSV file, a directory, permutations or a cross product)\n" +
			"and steps (llm, expression, group) with needs. Every (item, step, model) result is a WAL\n" +
			"event: a run killed at any moment resumes without redoing finished work.\n" +
			"Start with: fano pipeline init my.yaml",
	}
	cmd.AddCommand(pipelineInitCmd(), pipelineValidateCmd(g), pipelineRunCmd(g), pipelineStatusCmd(g),
		pipelineVerifyCmd(g, false), pipelineVerifyCmd(g, true), pipelineRevalidateCmd(g), pipelineExportCmd(g))
	return cmd
}

func pipelineInitCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "init FILE",
		Short: "Write a commented example pipeline (and its items file) to FILE",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			items := filepath.Join(filepath.Dir(path), "items.jsonl")
			for _, p := range []string{path, items} {
				if exists(p) {
					return fmt.Errorf("%s exists; not overwriting it", p)
				}
			}
			if err := os.WriteFile(items, pipeline.ExampleItems(), 0o644); err != nil {
				return err
			}
			if err := os.WriteFile(path, pipeline.ExampleDefinition(), 0o644); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s and %s; try: fano pipeline run %s\n", path, items, path)
			return nil
		},
	}
}

// loadDefinition reads a pipeline file, or the snapshot in a run directory.
func loadDefinition(arg string) (*pipeline.Definition, error) {
	if st, err := os.Stat(arg); err == nil && st.IsDir() {
		arg = filepath.Join(arg, pipelineSnapshot)
	}
	return pipeline.Load(arg)
}

func pipelineValidateCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "validate FILE",
		Short: "Check a pipeline file (schema, templates, expressions, needs, items, models); one line per problem",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			def, err := loadDefinition(args[0])
			if err == nil {
				_, err = pipelineSetup(g, def)
			}
			type out struct {
				OK       bool               `json:"ok"`
				Problems []pipeline.Problem `json:"problems"`
				Error    string             `json:"error,omitempty"`
			}
			var ps pipeline.Problems
			o := out{OK: err == nil, Problems: []pipeline.Problem{}}
			if errors.As(err, &ps) {
				o.Problems = ps
			} else if err != nil {
				o.Error = err.Error()
			}
			if g.json {
				if jerr := printJSON(cmd.OutOrStdout(), o); jerr != nil {
					return jerr
				}
			} else if err == nil {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: ok\n", args[0])
			} else {
				for _, p := range ps {
					fmt.Fprintln(cmd.ErrOrStderr(), p.Error())
				}
			}
			switch {
			case len(ps) > 0:
				return fmt.Errorf("%d problem(s) in %s", len(ps), args[0])
			default:
				return err
			}
		},
	}
	jsonFlag(cmd, g)
	return cmd
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// pipelineSession is a definition ready to run: its items, its fano
// config and its module.
type pipelineSession struct {
	def   *pipeline.Definition
	items []*pipeline.Item
	cfg   *config.Config
}

// pipelineSetup loads the items and the fano config and checks that the
// steps' models are backends of it. Nothing is written.
func pipelineSetup(g *globals, def *pipeline.Definition) (*pipelineSession, error) {
	items, err := def.LoadItems()
	if err != nil {
		return nil, err
	}
	var cfg *config.Config
	switch {
	case g.configPath != "":
		cfg, err = config.Load(g.configPath)
	case def.Config != "":
		p := def.Config
		if !filepath.IsAbs(p) {
			p = filepath.Join(def.Dir, p)
		}
		cfg, err = config.Load(p)
	default:
		cfg, err = config.Parse(pipeline.DefaultFanoConfig, "built-in pipeline config")
	}
	if err != nil {
		return nil, err
	}
	// A pipeline run is the pipeline alone: the math modules stay off.
	cfg.Explorer.Enabled, cfg.Documenter.Enabled, cfg.Researcher.Enabled = false, false, false
	// Its module keeps a window of tasks queued ahead of the running ones
	// by design: a queue that deep is not a health problem.
	if d := &cfg.Orchestrator.Health.MaxQueueDepth; *d > 0 && *d < pipeline.DefaultWindow+cfg.Orchestrator.Scheduler.MaxRunningTasks {
		*d = pipeline.DefaultWindow + cfg.Orchestrator.Scheduler.MaxRunningTasks
	}
	cfg.DataDir = g.dataDir
	if cfg.DataDir == "" {
		cfg.DataDir = filepath.Join("runs", def.Name)
	}
	if err := def.CheckModels(cfg.EnabledBackends()); err != nil {
		return nil, err
	}
	return &pipelineSession{def: def, items: items, cfg: cfg}, nil
}

// open opens the run directory's WAL and logs (as openApp does, with the
// session's config).
func (ps *pipelineSession) open(console string) (*app, error) {
	cfg := ps.cfg
	if err := config.CheckDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, err
	}
	log, err := wal.Open(filepath.Join(cfg.DataDir, "fano.db"), wal.Options{
		LockTimeout: time.Second, PIDFile: filepath.Join(cfg.DataDir, "fano.pid"),
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
	return wrapData(fanoapp.NewData(cfg, log, logger, closeLog), nil), nil
}

// options builds the actor system around the session's module. held: no
// backends, so no task runs (maintenance commands change state only).
func (ps *pipelineSession) options(a *app, mod *pipeline.Module, held bool) (actors.Options, error) {
	w := a.wiring(clockwork.NewRealClock())
	w.Modules = []modules.Module{mod}
	opts, err := w.ActorOptions()
	if err != nil {
		return opts, err
	}
	if held {
		opts.Backends = nil
		opts.Allocator.Backends = nil
	}
	return opts, nil
}

func pipelineRunCmd(g *globals) *cobra.Command {
	var retryFailed bool
	var retryStep string
	var maxCost float64
	var noProgress, noWait bool
	cmd := &cobra.Command{
		Use:   "run FILE",
		Short: "Run (or resume) a pipeline until every item is done or a limit is reached",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			def, err := loadDefinition(args[0])
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("max-cost") {
				def.Limits.MaxCost = maxCost
			}
			stopProfile := startProfiles()
			defer stopProfile()
			ps, err := pipelineSetup(g, def)
			if err != nil {
				return err
			}
			if retryStep != "" {
				retryFailed = true
			}
			return ps.run(cmd, g, runFlags{retryFailed: retryFailed, retryStep: retryStep, progress: !noProgress, noWait: noWait})
		},
	}
	cmd.Flags().BoolVar(&retryFailed, "retry-failed", false, "ask the failed (item, model) pairs again, and only them")
	cmd.Flags().StringVar(&retryStep, "step", "", "with --retry-failed: only this step's failures")
	cmd.Flags().Float64Var(&maxCost, "max-cost", 0, "stop before the run's cost (USD, all runs of this directory) would pass this")
	cmd.Flags().BoolVar(&noProgress, "no-progress", false, "no progress bar")
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "when only the daily request budget holds work back, exit (status 1) instead of waiting for the next day's budget")
	jsonFlag(cmd, g)
	return cmd
}

type runFlags struct {
	retryFailed bool
	retryStep   string
	progress    bool
	noWait      bool
}

func (ps *pipelineSession) run(cmd *cobra.Command, g *globals, f runFlags) error {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGUSR1)
	defer signal.Stop(sigs)

	a, err := ps.open("")
	if err != nil {
		return err
	}
	defer a.close()
	// The run's heap stays under the configured soft limit, as fano run's.
	memLimit, memLimitFrom := fanoapp.SetMemoryLimit(a.cfg.Orchestrator.State.MemoryLimitMB)
	nprocs, nprocsFrom := procs.Set() // as fano run's: a spare P while the WAL writer is in fsync
	// The definition this run used, beside its results.
	if err := actors.WriteFileAtomic(filepath.Join(a.dataDir, pipelineSnapshot), ps.def.Source, 0o644); err != nil {
		return err
	}
	usage := &usageBook{}
	mod := pipeline.New(pipeline.Config{Def: ps.def, Items: ps.items, Usage: usage})
	opts, err := ps.options(a, mod, false)
	if err != nil {
		return err
	}
	usage.wrap(opts.Backends)
	sys, err := actors.Start(opts)
	if err != nil {
		return err
	}
	// The end of the run: every item finished and the last tasks settled.
	// Once every item is finished, each applied event (the last answers,
	// the last tasks' ends, in whichever order the actors apply them)
	// wakes the loop to look, rather than idle ticks later.
	settled := make(chan struct{}, 1)
	defer sys.Subscribe(func(n actors.Notice) {
		if n.Event != nil && mod.AllFinished() {
			select {
			case settled <- struct{}{}:
			default:
			}
		}
	})()
	over := func() bool { return mod.AllFinished() && sys.Idle() }
	stopReq, requestStop := fanoapp.StopRequests()
	svc, err := fanoapp.StartServices(fanoapp.ServiceEnv{Cfg: a.cfg, DataDir: a.dataDir, Sys: sys, Logger: a.logger, Clock: opts.Clock,
		Stop: requestStop, Out: os.Stdout})
	if err != nil {
		_ = sys.Stop()
		return err
	}
	defer svc.Stop()
	a.logger.Info().Str("event", "modules.pipeline.started").Str("pipeline", ps.def.Name).Int("items", len(ps.items)).
		Int64("memory_limit_mb", memLimit>>20).Str("memory_limit_from", memLimitFrom).
		Int("gomaxprocs", nprocs).Str("gomaxprocs_from", nprocsFrom).
		Int("pid", os.Getpid()).Str("run_dir", a.dataDir).Msg("pipeline running")
	if f.retryFailed {
		if _, err := sys.Command(&pb.ModuleCommand{Module: pipeline.Name,
			Command: &pb.ModuleCommand_RetryFailed{RetryFailed: &pb.RetryFailed{Step: f.retryStep}}}); err != nil {
			_ = sys.Stop()
			return err
		}
	}

	var bar *progressBar
	if f.progress && isatty.IsTerminal(os.Stderr.Fd()) {
		bar = &progressBar{w: cmd.ErrOrStderr(), start: time.Now()}
	}
	progress := func() runProgress {
		var p runProgress
		_ = sys.WithModule(pipeline.Name, func(m modules.Module) {
			pm := m.(*pipeline.Module)
			p.done, p.total = pm.Progress()
			p.waitWhy, p.waitUntil, p.waiting = pm.Waiting()
		})
		return p
	}
	first := progress()
	writeProgress(a.dataDir, first)
	if bar != nil {
		bar.first = first.done
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	watch := pipeline.RunWatch{NoWait: f.noWait}
	reason := ""
	var budgetErr error
loop:
	for {
		select {
		case sig := <-sigs:
			if sig == syscall.SIGUSR1 {
				if path, err := fanoapp.DumpState(a.dataDir, sys); err == nil {
					a.logger.Info().Str("event", "cmd.fano.stack_dump").Str("path", path).Msg("goroutine stacks written")
				}
				continue
			}
			reason = sig.String()
			break loop
		case r := <-stopReq:
			reason = r
			break loop
		case <-settled:
			if over() {
				reason = "finished"
				break loop
			}
		case <-tick.C:
			p := progress()
			if bar != nil {
				bar.draw(p)
			}
			writeProgress(a.dataDir, p)
			if over() {
				reason = "finished"
				break loop
			}
			switch watch.Observe(sys.Idle(), p.waiting) {
			case pipeline.RunFinished:
				reason = "idle"
				break loop
			case pipeline.RunBudgetExit:
				reason = "daily budget spent (--no-wait)"
				budgetErr = fmt.Errorf("%s; the next day's budget starts at %s: run again then (without --no-wait a run waits for it)",
					p.waitWhy, p.waitUntil.Format(time.RFC3339))
				break loop
			}
		}
	}
	writeHeapProfile("idle")
	go func() {
		for sig := range sigs {
			if sig != syscall.SIGUSR1 {
				os.Exit(130)
			}
		}
	}()
	if bar != nil {
		bar.draw(progress())
		fmt.Fprintln(bar.w)
	}
	var sum pipeline.Summary
	{
		// The output files, from the state, under a WAL intent and commit:
		// also after a Ctrl-C, so the partial results are there to read.
		if _, err := sys.Command(finishRun()); err != nil {
			a.logger.Error().Err(err).Str("event", "modules.pipeline.export_failed").Msg("output files not written; fano pipeline export writes them")
		}
	}
	_ = sys.WithModule(pipeline.Name, func(m modules.Module) { sum = m.(*pipeline.Module).Summary() })
	svc.Stop()
	stopErr := sys.Stop()
	writeHeapProfile("stopped")
	svc.Finish()
	_ = os.Remove(filepath.Join(a.dataDir, pipelineProgress))
	if stopErr != nil {
		return fmt.Errorf("stop: %w", stopErr)
	}
	a.logger.Info().Str("event", "modules.pipeline.stopped").Str("reason", reason).Int("items_done", sum.ItemsDone).
		Int("items_failed", sum.ItemsFailed).Float64("cost_usd", sum.CostUSD).Msg("pipeline stopped")
	if g.json {
		if err := printJSON(cmd.OutOrStdout(), sum); err != nil {
			return err
		}
	} else {
		printSummary(cmd.OutOrStdout(), sum, a.dataDir)
	}
	return budgetErr
}

func printSummary(w io.Writer, s pipeline.Summary, dir string) {
	fmt.Fprintf(w, "pipeline %s: %d of %d items done, %d failed; %d requests, cost $%.4f", s.Pipeline, s.ItemsDone, s.Items, s.ItemsFailed, s.Requests, s.CostUSD)
	if s.MaxCostUSD > 0 {
		fmt.Fprintf(w, " of max $%.4f", s.MaxCostUSD)
	}
	fmt.Fprintln(w)
	if s.Stopped != "" {
		fmt.Fprintf(w, "stopped: %s\n", s.Stopped)
	}
	if s.Waiting != "" {
		fmt.Fprintf(w, "waiting: %s; goes on at %s\n", s.Waiting, s.WaitingUntil)
	}
	for _, step := range sortedKeys(s.Steps) {
		for _, model := range sortedKeys(s.Steps[step]) {
			c := s.Steps[step][model]
			fmt.Fprintf(w, "  %-20s %-16s ok %6d  failed %6d  pending %6d  invalid %5d  $%.4f\n", step, model, c.OK, c.Failed, c.Pending, c.Invalid, c.CostUSD)
		}
	}
	if dir != "" {
		fmt.Fprintf(w, "results: %s\n", filepath.Join(dir, "output", pipeline.ResultsFile))
	}
}

// progressBar draws one line on a terminal: bar, count, rate, ETA.
type progressBar struct {
	w     io.Writer
	start time.Time
	first int
}

// runProgress is one look at a running pipeline.
type runProgress struct {
	done, total int
	waiting     bool // only the daily budget holds work back
	waitWhy     string
	waitUntil   time.Time
}

func (b *progressBar) draw(p runProgress) {
	done, total := p.done, p.total
	const width = 30
	frac := 0.0
	if total > 0 {
		frac = float64(done) / float64(total)
	}
	fill := int(frac * width)
	el := time.Since(b.start).Seconds()
	rate := 0.0
	if el > 0 {
		rate = float64(done-b.first) / el
	}
	eta := "--:--"
	if rate > 0 {
		eta = (time.Duration(float64(total-done)/rate) * time.Second).Round(time.Second).String()
	}
	if p.waiting {
		fmt.Fprintf(b.w, "\r[%s%s] %d/%d items  waiting for the daily budget until %s   ", strings.Repeat("#", fill), strings.Repeat(".", width-fill),
			done, total, p.waitUntil.Format("2006-01-02 15:04 MST"))
		return
	}
	fmt.Fprintf(b.w, "\r[%s%s] %d/%d items  %.1f/s  ETA %s   ", strings.Repeat("#", fill), strings.Repeat(".", width-fill), done, total, rate, eta)
}

type progressFile struct {
	PID          int    `json:"pid"`
	Done         int    `json:"items_finished"`
	Total        int    `json:"items"`
	Updated      string `json:"updated"`
	Waiting      string `json:"waiting,omitempty"`
	WaitingUntil string `json:"waiting_until,omitempty"`
}

// writeProgress leaves the live count where `fano pipeline status` finds
// it while the run holds the WAL (best effort: the WAL is the truth).
func writeProgress(dir string, p runProgress) {
	f := progressFile{PID: os.Getpid(), Done: p.done, Total: p.total, Updated: time.Now().UTC().Format(time.RFC3339)}
	if p.waiting {
		f.Waiting, f.WaitingUntil = p.waitWhy, p.waitUntil.Format(time.RFC3339)
	}
	b, err := json.Marshal(f)
	if err != nil {
		return
	}
	// Renamed into place whole, but not synced: four times a second two
	// fsyncs would compete with the WAL's for the disk, and after a crash
	// the file is not read (the run no longer holds the WAL).
	path := filepath.Join(dir, pipelineProgress)
	tmp := path + ".tmp"
	if os.WriteFile(tmp, b, 0o644) == nil {
		_ = os.Rename(tmp, path)
	}
}

// withState recovers the run directory's state read-only (dry) and hands
// the module to fn. A running pipeline holds the WAL: wal.ErrLocked.
func withState(g *globals, arg string, fn func(ps *pipelineSession, mod *pipeline.Module) error) error {
	def, err := loadDefinition(arg)
	if err != nil {
		return err
	}
	ps, err := pipelineSetup(g, def)
	if err != nil {
		return err
	}
	if !exists(filepath.Join(ps.cfg.DataDir, "fano.db")) {
		return fmt.Errorf("no run of pipeline %s in %s yet (fano pipeline run %s)", def.Name, ps.cfg.DataDir, arg)
	}
	a, err := ps.open("off")
	if err != nil {
		return err
	}
	defer a.close()
	mod := pipeline.New(pipeline.Config{Def: def, Items: ps.items})
	mod.SetNow(time.Now()) // whether today's budget is spent
	opts, err := ps.options(a, mod, true)
	if err != nil {
		return err
	}
	opts.Dry = true
	if _, err := actors.Recover(opts); err != nil {
		return err
	}
	return fn(ps, mod)
}

// withSystem starts the actor system held (no backends, so no task runs)
// for a command that changes state, and stops it after fn.
func withSystem(g *globals, arg string, fn func(ps *pipelineSession, sys *actors.System) error) error {
	def, err := loadDefinition(arg)
	if err != nil {
		return err
	}
	ps, err := pipelineSetup(g, def)
	if err != nil {
		return err
	}
	if !exists(filepath.Join(ps.cfg.DataDir, "fano.db")) {
		return fmt.Errorf("no run of pipeline %s in %s yet (fano pipeline run %s)", def.Name, ps.cfg.DataDir, arg)
	}
	a, err := ps.open("off")
	if err != nil {
		return err
	}
	defer a.close()
	mod := pipeline.New(pipeline.Config{Def: def, Items: ps.items, Hold: true})
	opts, err := ps.options(a, mod, true)
	if err != nil {
		return err
	}
	sys, err := actors.Start(opts)
	if err != nil {
		return err
	}
	ferr := fn(ps, sys)
	if err := sys.Stop(); err != nil && ferr == nil {
		ferr = err
	}
	return ferr
}

func pipelineStatusCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status FILE|RUN_DIR",
		Short: "Show a pipeline run's progress per step and model, its cost and failures",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			err := withState(g, args[0], func(ps *pipelineSession, mod *pipeline.Module) error {
				s := mod.Summary()
				if g.json {
					return printJSON(cmd.OutOrStdout(), s)
				}
				printSummary(cmd.OutOrStdout(), s, "")
				return nil
			})
			if errors.Is(err, wal.ErrLocked) {
				// Running: the live count it leaves behind.
				def, derr := loadDefinition(args[0])
				if derr != nil {
					return err
				}
				dir := g.dataDir
				if dir == "" {
					dir = filepath.Join("runs", def.Name)
				}
				var p progressFile
				b, rerr := os.ReadFile(filepath.Join(dir, pipelineProgress))
				if rerr != nil || json.Unmarshal(b, &p) != nil {
					return err
				}
				if g.json {
					return printJSON(cmd.OutOrStdout(), map[string]any{"running": true, "progress": p})
				}
				fmt.Fprintf(cmd.OutOrStdout(), "pipeline %s is running (pid %d): %d of %d items finished at %s\n", def.Name, p.PID, p.Done, p.Total, p.Updated)
				if p.Waiting != "" {
					fmt.Fprintf(cmd.OutOrStdout(), "waiting: %s; goes on at %s\n", p.Waiting, p.WaitingUntil)
				}
				return nil
			}
			return err
		},
	}
	jsonFlag(cmd, g)
	return cmd
}

// pipelineVerifyCmd is verify (repair=false) or repair.
func pipelineVerifyCmd(g *globals, repair bool) *cobra.Command {
	use, short := "verify FILE|RUN_DIR", "Check a run's state and output files; exit 1 if anything is wrong"
	if repair {
		use, short = "repair FILE|RUN_DIR", "Fix what verify finds: invalid stored outputs become failures (run --retry-failed asks again); output files are rewritten"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var problems []modules.Problem
			err := withState(g, args[0], func(ps *pipelineSession, mod *pipeline.Module) error {
				problems = mod.Verify()
				for _, p := range mod.ExportPaths() {
					want, err := mod.Export(p)
					if err != nil {
						return err
					}
					got, err := os.ReadFile(filepath.Join(ps.cfg.DataDir, "output", p))
					if err != nil || string(got) != string(want) {
						problems = append(problems, modules.Problem{Kind: "output_stale", ID: "output/" + p, Detail: "the file does not match the state"})
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
			if repair && len(problems) > 0 {
				err = withSystem(g, args[0], func(ps *pipelineSession, sys *actors.System) error {
					for _, p := range problems {
						if p.Kind == "output_stale" {
							continue
						}
						if _, err := sys.Command(&pb.ModuleCommand{Module: pipeline.Name, Command: &pb.ModuleCommand_RepairProblem{
							RepairProblem: &pb.RepairProblem{Kind: p.Kind, Id: p.ID, Detail: p.Detail}}}); err != nil {
							return err
						}
					}
					_, err := sys.Command(finishRun())
					return err
				})
				if err != nil {
					return err
				}
			}
			if problems == nil {
				problems = []modules.Problem{}
			}
			if g.json {
				if err := printJSON(cmd.OutOrStdout(), map[string]any{"problems": problems, "repaired": repair && len(problems) > 0}); err != nil {
					return err
				}
			} else {
				for _, p := range problems {
					fmt.Fprintf(cmd.OutOrStdout(), "%s %s: %s\n", p.Kind, p.ID, p.Detail)
				}
				if len(problems) == 0 {
					fmt.Fprintln(cmd.OutOrStdout(), "ok")
				} else if repair {
					fmt.Fprintf(cmd.OutOrStdout(), "repaired %d problem(s)\n", len(problems))
				}
			}
			if !repair && len(problems) > 0 {
				return fmt.Errorf("%d problem(s); fano pipeline repair fixes them", len(problems))
			}
			return nil
		},
	}
	jsonFlag(cmd, g)
	return cmd
}

func pipelineRevalidateCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "revalidate FILE",
		Short: "Re-check failed answers against the file's current schema and rules, with no LLM call; those that pass become results",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var rv pipeline.Revalidation
			err := withSystem(g, args[0], func(ps *pipelineSession, sys *actors.System) error {
				if err := actors.WriteFileAtomic(filepath.Join(ps.cfg.DataDir, pipelineSnapshot), ps.def.Source, 0o644); err != nil {
					return err
				}
				r, err := sys.Command(&pb.ModuleCommand{Module: pipeline.Name, Command: &pb.ModuleCommand_Revalidate{Revalidate: &pb.Revalidate{}}})
				if res := r.GetResult().GetRevalidation(); res != nil {
					rv = pipeline.Revalidation{Checked: int(res.Checked), Promoted: res.Promoted}
				}
				return err
			})
			if err != nil {
				return err
			}
			if rv.Promoted == nil {
				rv.Promoted = []string{}
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), rv)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revalidated %d failed answer(s): %d now pass\n", rv.Checked, len(rv.Promoted))
			for _, p := range rv.Promoted {
				fmt.Fprintf(cmd.OutOrStdout(), "  %s\n", p)
			}
			return nil
		},
	}
	jsonFlag(cmd, g)
	return cmd
}

func pipelineExportCmd(g *globals) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "export FILE|RUN_DIR",
		Short: "Print results.jsonl from the state (or failures/summary with --what), even mid-run after a crash",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := map[string]string{"results": pipeline.ResultsFile, "failures": pipeline.FailuresFile, "summary": pipeline.SummaryFile}[out]
			if name == "" {
				return fmt.Errorf("--what %q: one of results, failures, summary", out)
			}
			return withState(g, args[0], func(ps *pipelineSession, mod *pipeline.Module) error {
				b, err := mod.Export(name)
				if err != nil {
					return err
				}
				_, err = cmd.OutOrStdout().Write(b)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&out, "what", "results", "results | failures | summary")
	return cmd
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// usageBook carries the token counts a backend reported for an answer
// to the pipeline module, which turns them into cost; a missing count
// falls back to an estimate from sizes. The counts are taken as the
// backend returns the answer (usageBackend): the module decides on an
// answer once the answer's event is queued, before it is applied, so a
// notice of that event would come too late (and its count would stay in
// the book for good).
type usageBook struct {
	mu sync.Mutex
	m  map[string][2]int64 // task id -> prompt, completion tokens
}

// wrap has every backend of a run note its answers' usage in the book.
func (u *usageBook) wrap(backends []gateway.Backend) {
	for i, b := range backends {
		backends[i] = &usageBackend{Backend: b, book: u}
	}
}

func (u *usageBook) put(taskID string, prompt, completion int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil {
		u.m = map[string][2]int64{}
	}
	u.m[taskID] = [2]int64{prompt, completion}
}

func (u *usageBook) Take(taskID string) (int64, int64, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	t, ok := u.m[taskID]
	delete(u.m, taskID)
	return t[0], t[1], ok
}

// usageBackend notes the usage of a pipeline task's answers. Optional
// interfaces of the backend stay reachable: through Unwrap (gateway.As),
// and Reconnect, which the system asks for directly.
type usageBackend struct {
	gateway.Backend
	book *usageBook
}

func (b *usageBackend) Send(ctx context.Context, req gateway.Request) (gateway.Response, error) {
	resp, err := b.Backend.Send(ctx, req)
	if err == nil && req.Module == pipeline.Name && resp.PromptTokens+resp.CompletionTokens > 0 {
		b.book.put(req.TaskID, resp.PromptTokens, resp.CompletionTokens)
	}
	return resp, err
}

func (b *usageBackend) Unwrap() gateway.Backend { return b.Backend }

func (b *usageBackend) Reconnect(ctx context.Context) error {
	if r, ok := b.Backend.(actors.Reconnector); ok {
		return r.Reconnect(ctx)
	}
	return nil
}

// startProfiles starts a CPU profile of the run into the file
// FANO_PIPELINE_CPUPROFILE names, if any (for tuning the pipeline path);
// the returned func stops it.
func startProfiles() func() {
	p := os.Getenv("FANO_PIPELINE_CPUPROFILE")
	if p == "" {
		return func() {}
	}
	f, err := os.Create(p)
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

// writeHeapProfile writes the heap as of now into the file
// FANO_PIPELINE_HEAPPROFILE names, if any, with the moment's name
// appended ("<file>.idle").
func writeHeapProfile(moment string) {
	p := os.Getenv("FANO_PIPELINE_HEAPPROFILE")
	if p == "" {
		return
	}
	if f, err := os.Create(p + "." + moment); err == nil {
		_ = pprof.WriteHeapProfile(f)
		f.Close()
	}
}

// finishRun has the pipeline write its output files from its state.
func finishRun() *pb.ModuleCommand {
	return &pb.ModuleCommand{Module: pipeline.Name, Command: &pb.ModuleCommand_FinishRun{FinishRun: &pb.FinishRun{}}}
}
