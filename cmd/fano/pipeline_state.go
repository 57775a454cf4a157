package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"fano/actors"
	"fano/modules"
	"fano/modules/pipeline"
	"fano/pb"
	"fano/wal"
)

// openRun opens the data directory of an existing run of the pipeline
// arg names; an error says when it has no run yet.
func openRun(g *globals, arg string, readOnly bool) (*pipelineSession, *app, error) {
	ps, err := loadSession(g, arg)
	if err != nil {
		return nil, nil, err
	}
	if !exists(filepath.Join(ps.cfg.DataDir, "fano.db")) {
		return nil, nil, fmt.Errorf("no run of pipeline %s in %s yet (fano pipeline run %s)", ps.def.Name, ps.cfg.DataDir, arg)
	}
	a, err := ps.open(readOnly)
	if err != nil {
		return nil, nil, err
	}
	return ps, a, nil
}

// withState recovers the run directory's state read-only (dry) and hands
// the module to fn. A running pipeline holds the WAL: wal.ErrLocked.
func withState(g *globals, arg string, fn func(ps *pipelineSession, mod *pipeline.Module) error) error {
	ps, a, err := openRun(g, arg, true)
	if err != nil {
		return err
	}
	defer a.close()
	mod := pipeline.New(pipeline.Config{Def: ps.def, Items: ps.items})
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
	ps, a, err := openRun(g, arg, false)
	if err != nil {
		return err
	}
	defer a.close()
	mod := pipeline.New(pipeline.Config{Def: ps.def, Items: ps.items, Hold: true})
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
			// Running: the live count the run leaves behind, read without
			// the items or the WAL (which the run holds).
			if name, p, ok := liveProgress(g, args[0]); ok {
				return printLive(cmd, g, name, p)
			}
			err := withState(g, args[0], func(ps *pipelineSession, mod *pipeline.Module) error {
				s := mod.Summary()
				if g.json {
					return printJSON(cmd.OutOrStdout(), s)
				}
				printSummary(cmd.OutOrStdout(), s, "")
				return nil
			})
			if errors.Is(err, wal.ErrLocked) {
				// A run started between the two looks.
				if name, p, ok := liveProgress(g, args[0]); ok {
					return printLive(cmd, g, name, p)
				}
			}
			return err
		},
	}
	jsonFlag(cmd, g)
	return cmd
}

// liveProgress reads the progress file of a run that is going on: the
// process that wrote it is alive. Only the definition is read (not its
// items), to find the run directory.
func liveProgress(g *globals, arg string) (name string, p progressFile, ok bool) {
	dir := g.dataDir
	var def *pipeline.Definition
	var err error
	if st, serr := os.Stat(arg); serr == nil && st.IsDir() {
		def, _, err = pipeline.LoadRun(arg)
		if dir == "" {
			dir = arg
		}
	} else {
		def, err = pipeline.Load(arg)
	}
	if err != nil {
		return "", p, false
	}
	if dir == "" {
		dir = filepath.Join("runs", def.Name)
	}
	b, err := os.ReadFile(progressPath(dir))
	if err != nil || json.Unmarshal(b, &p) != nil || p.PID <= 0 {
		return "", p, false
	}
	// Signal 0 checks the process exists; a file a killed run left
	// behind names a process that is gone.
	if err := syscall.Kill(p.PID, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return "", p, false
	}
	return def.Name, p, true
}

func printLive(cmd *cobra.Command, g *globals, name string, p progressFile) error {
	if g.json {
		return printJSON(cmd.OutOrStdout(), map[string]any{"running": true, "progress": p})
	}
	fmt.Fprintf(cmd.OutOrStdout(), "pipeline %s is running (pid %d): %d of %d items finished at %s\n", name, p.PID, p.Done, p.Total, p.Updated)
	if p.Waiting != "" {
		fmt.Fprintf(cmd.OutOrStdout(), "waiting: %s; goes on at %s\n", p.Waiting, p.WaitingUntil)
	}
	printStepProgress(cmd.OutOrStdout(), p.Steps)
	return nil
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
					_, err := sys.Command(finishRun(""))
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
				if err := pipeline.SaveRun(ps.cfg.DataDir, ps.def, ps.configPath); err != nil {
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
	var out, format string
	cmd := &cobra.Command{
		Use:   "export FILE|RUN_DIR",
		Short: "Print the results (or failures, summary with --what) as JSONL or CSV: from the state, after a crash too; while a run goes on, as of its latest write",
		Long: "Results list every item with a step done: finished items (status done or failed) and, with\n" +
			"the steps done so far, open ones. --format csv has one column per leaf of the JSON\n" +
			"(steps.<step>.<model>.<field>, failed.<step>.<model>), arrays as JSON text in one cell.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := map[string]string{"results": pipeline.ResultsFile, "failures": pipeline.FailuresFile, "summary": pipeline.SummaryFile}[out]
			if name == "" {
				return usageErrorf("--what %q: one of results, failures, summary", out)
			}
			if format != "jsonl" && format != "csv" {
				return usageErrorf("--format %q: jsonl or csv", format)
			}
			if format == "csv" && out == "summary" {
				return usageErrorf("--format csv: results or failures (the summary is one JSON document)")
			}
			write := func(b []byte) error {
				if format == "csv" {
					return pipeline.JSONLToCSV(b, cmd.OutOrStdout())
				}
				_, err := cmd.OutOrStdout().Write(b)
				return err
			}
			err := withState(g, args[0], func(ps *pipelineSession, mod *pipeline.Module) error {
				b, err := mod.Export(name)
				if err != nil {
					return err
				}
				return write(b)
			})
			if !errors.Is(err, wal.ErrLocked) {
				return err
			}
			// A run holds the WAL: what it last wrote (it rewrites the
			// files every little while).
			ps, serr := loadSession(g, args[0])
			if serr != nil {
				return err
			}
			path := filepath.Join(ps.cfg.DataDir, "output", name)
			b, rerr := os.ReadFile(path)
			if rerr != nil {
				return fmt.Errorf("%w; and the run has not written %s yet", err, path)
			}
			if st, serr := os.Stat(path); serr == nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "fano: a run is going: %s as of %s\n", name, st.ModTime().UTC().Format(time.RFC3339))
			}
			return write(b)
		},
	}
	cmd.Flags().StringVar(&out, "what", "results", "results | failures | summary")
	cmd.Flags().StringVar(&format, "format", "jsonl", "jsonl | csv")
	return cmd
}
