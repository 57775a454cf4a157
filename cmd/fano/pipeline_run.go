package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"fano/actors"
	fanoapp "fano/app"
	"fano/modules"
	"fano/modules/pipeline"
	"fano/pb"
)

type runFlags struct {
	retryFailed bool
	retryStep   string
	progress    bool
	noWait      bool
	rerun       []string // steps to ask again (--rerun-changed)
	rerunItems  []string // items (keys) to ask again (--rerun-changed)
}

// run works the pipeline on app.Main: its WAL opening, recovery, panel
// (on a free port if the configured one is taken) and run loop; the
// pipeline only says when the run is over. Everything but --json's one
// document goes to stderr.
func (ps *pipelineSession) run(cmd *cobra.Command, g *globals, f runFlags) error {
	stderr := cmd.ErrOrStderr()
	mod := pipeline.New(pipeline.Config{Def: ps.def, Items: ps.items})
	var sys *actors.System
	// The end of the run: every item finished and the last tasks settled.
	// Once every item is finished, each applied event wakes the loop to
	// look, rather than idle ticks later.
	settled := make(chan struct{}, 1)
	var bar *progressBar
	if f.progress && isatty.IsTerminal(os.Stderr.Fd()) {
		bar = &progressBar{w: stderr, start: time.Now()}
	}
	dataDir := ps.cfg.DataDir
	watch := pipeline.RunWatch{NoWait: f.noWait}
	var counter stepCounter
	var partial partialWriter
	var logger zerolog.Logger
	lastDraw := time.Time{}
	budgetMsg := ""
	until := func(idle bool) (string, error) {
		if mod.AllFinished() && sys.Idle() {
			return pipeline.LoopFinished, nil
		}
		if !idle && time.Since(lastDraw) < 200*time.Millisecond {
			return "", nil // a wake, not a tick
		}
		lastDraw = time.Now()
		p := counter.look(sys, progressOf(sys), false)
		partial.write(sys, dataDir, logger)
		if bar != nil {
			bar.draw(p)
		}
		writeProgress(dataDir, p)
		switch watch.Observe(idle, p.waiting) {
		case pipeline.RunFinished:
			return pipeline.LoopIdle, nil
		case pipeline.RunBudgetExit:
			budgetMsg = fmt.Sprintf("%s; the next day's budget starts at %s: run again then (without --no-wait a run waits for it)",
				p.waitWhy, p.waitUntil.Format(time.RFC3339))
			return pipeline.LoopDailyBudget, nil
		}
		return "", nil
	}
	m := fanoapp.NewMain(fanoapp.Options{
		Config: ps.cfg, Modules: []modules.Module{mod}, Stdout: stderr,
		UntilIdle: true, Signals: true,
		// The definition this run used, beside its results: with it the
		// run directory alone rebuilds the module (fano recover, verify).
		// With steps to ask again, it is kept once that is recorded: a
		// crash between the two finds the change again.
		BeforeStart: func(dir string) error {
			if len(f.rerun) == 0 {
				if err := pipeline.SaveRun(dir, ps.def, g.configPath); err != nil {
					return err
				}
			}
			if len(f.rerunItems) == 0 {
				return ps.saveItemSums(dir)
			}
			return nil
		},
		Until: until, Wake: settled,
	})
	if err := m.Open(cmd.Context()); err != nil {
		return err
	}
	defer m.Close()
	sys = m.System()
	defer sys.Subscribe(func(n actors.Notice) {
		if n.Event != nil && mod.AllFinished() {
			select {
			case settled <- struct{}{}:
			default:
			}
		}
	})()
	logger = m.Data().Logger
	logger.Info().Str("event", "modules.pipeline.started").Str("pipeline", ps.def.Name).Int("items", len(ps.items)).
		Int("pid", os.Getpid()).Str("run_dir", dataDir).Msg("pipeline running")
	if len(f.rerun) > 0 || len(f.rerunItems) > 0 {
		if _, err := sys.Command(&pb.ModuleCommand{Module: pipeline.Name,
			Command: &pb.ModuleCommand_RerunSteps{RerunSteps: &pb.RerunSteps{Steps: f.rerun, Items: f.rerunItems}}}); err != nil {
			return err
		}
		if len(f.rerun) > 0 {
			if err := pipeline.SaveRun(dataDir, ps.def, g.configPath); err != nil {
				return err
			}
		}
		if len(f.rerunItems) > 0 {
			if err := ps.saveItemSums(dataDir); err != nil {
				return err
			}
		}
		logger.Info().Str("event", "modules.pipeline.rerun").Strs("steps", f.rerun).Int("items", len(f.rerunItems)).
			Msg("changed steps and items asked again")
	}
	if f.retryFailed {
		if _, err := sys.Command(&pb.ModuleCommand{Module: pipeline.Name,
			Command: &pb.ModuleCommand_RetryFailed{RetryFailed: &pb.RetryFailed{Step: f.retryStep}}}); err != nil {
			return err
		}
	}
	first := counter.look(sys, progressOf(sys), true)
	writeProgress(dataDir, first)
	if bar != nil {
		bar.first = first.done
	}
	runErr := m.Run(context.Background())
	reason := m.Result().Reason
	writeHeapProfile("idle")
	if bar != nil {
		bar.draw(counter.look(sys, progressOf(sys), true))
		fmt.Fprintln(bar.w)
	}
	// The output files, from the state, under a WAL intent and commit:
	// also after a Ctrl-C, so the partial results are there to read.
	if _, err := sys.Command(finishRun(reason)); err != nil {
		logger.Error().Err(err).Str("event", "modules.pipeline.export_failed").Msg("output files not written; fano pipeline export writes them")
	}
	var sum pipeline.Summary
	_ = sys.WithModule(pipeline.Name, func(m modules.Module) { sum = m.(*pipeline.Module).Summary() })
	logger.Info().Str("event", "modules.pipeline.stopped").Str("reason", reason).Int("items_done", sum.ItemsDone).
		Int("items_failed", sum.ItemsFailed).Float64("cost_usd", sum.CostUSD).Msg("pipeline stopped")
	if err := m.Close(); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	writeHeapProfile("stopped")
	_ = os.Remove(progressPath(dataDir))
	if runErr != nil {
		return runErr
	}
	if g.json {
		if err := printJSON(cmd.OutOrStdout(), sum); err != nil {
			return err
		}
	} else {
		printSummary(stderr, sum, dataDir)
	}
	return stopError(sum.Stop, budgetMsg)
}

// stopError is the exit status of a run that ended as s says (nil: 0),
// with its message; msg, if set, replaces the stop's detail.
func stopError(s *pipeline.Stop, msg string) error {
	if s == nil || s.ExitCode == 0 {
		return nil
	}
	if msg == "" {
		msg = s.Detail
	}
	return &exitError{code: s.ExitCode, msg: fmt.Sprintf("stopped (%s, exit %d): %s", s.Reason, s.ExitCode, msg)}
}

// progressOf is one look at the running pipeline.
func progressOf(sys *actors.System) runProgress {
	var p runProgress
	_ = sys.WithModule(pipeline.Name, func(m modules.Module) {
		pm := m.(*pipeline.Module)
		p.done, p.total = pm.Progress()
		p.waitWhy, p.waitUntil, p.waiting = pm.Waiting()
	})
	return p
}

// stepCounter counts each step and model's pairs for the progress line
// and file. A count walks every pair in the module's actor, so it is
// taken at most once a second and at most 2% of the time; between two
// counts the last one is shown.
type stepCounter struct {
	meter pipeline.RateMeter
	last  []pipeline.StepProgress
	next  time.Time
}

func (c *stepCounter) look(sys *actors.System, p runProgress, force bool) runProgress {
	now := time.Now()
	if force || !now.Before(c.next) {
		var counts []pipeline.StepProgress
		_ = sys.WithModule(pipeline.Name, func(m modules.Module) { counts = m.(*pipeline.Module).StepCounts() })
		took := time.Since(now)
		c.last = c.meter.Observe(now, counts)
		c.next = now.Add(max(time.Second, 50*took))
	}
	p.steps = c.last
	return p
}

// partialWriter rewrites the output files while a run goes on, so they
// can be read (and exported while the run holds the WAL) before it ends:
// every 2 s at most, and at most 2% of the time (a render walks every
// item in the module's actor). They are replaced whole; the run's end
// writes them under a WAL intent.
type partialWriter struct {
	next time.Time
}

func (w *partialWriter) write(sys *actors.System, dir string, logger zerolog.Logger) {
	now := time.Now()
	if now.Before(w.next) {
		return
	}
	var err error
	_ = sys.WithModule(pipeline.Name, func(m modules.Module) {
		pm := m.(*pipeline.Module)
		for _, name := range []string{pipeline.ResultsFile, pipeline.FailuresFile} {
			// Streamed to the file, through a buffer: a million items'
			// results are not held whole.
			full := filepath.Join(dir, "output", name)
			if err = actors.WriteFileAtomicFrom(full, 0o644, func(w io.Writer) error { return pm.ExportTo(name, w) }); err != nil {
				return
			}
		}
	})
	w.next = now.Add(max(2*time.Second, 50*time.Since(now)))
	if err != nil {
		logger.Warn().Err(err).Str("event", "modules.pipeline.partial_failed").Msg("partial output not written")
	}
}

// saveItemSums records the run's items in its directory (once the
// changes found in them are recorded as work, if any) and lets the record
// go.
func (ps *pipelineSession) saveItemSums(dir string) error {
	if ps.sums == nil {
		return nil
	}
	if err := ps.sums.Save(dir); err != nil {
		return err
	}
	ps.sums = nil
	return nil
}
