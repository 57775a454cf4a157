package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/jonboulle/clockwork"
	"github.com/spf13/cobra"

	"fano/actors"
	fanoapp "fano/app"
	"fano/config"
	"fano/modules"
	"fano/modules/pipeline"
)

// `fano pipeline`: a user's per-item LLM pipeline (modules/pipeline) on
// fano's core. A run directory (--data-dir, default runs/<name>) holds
// the WAL, a snapshot of the definition (pipeline.yaml), the logs, and
// output/results.jsonl, output/failures.jsonl, output/summary.json.

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

// loadSession reads a pipeline file, or the definition kept in a run
// directory (whose run it then is, with the config it was started with
// unless --config names another), and sets it up.
func loadSession(g *globals, arg string) (*pipelineSession, error) {
	configPath, dataDir := g.configPath, g.dataDir
	var def *pipeline.Definition
	var err error
	if st, serr := os.Stat(arg); serr == nil && st.IsDir() {
		var origin pipeline.Origin
		def, origin, err = pipeline.LoadRun(arg)
		if configPath == "" {
			configPath = origin.Config
		}
		if dataDir == "" {
			dataDir = arg
		}
	} else {
		def, err = pipeline.Load(arg)
	}
	if err != nil {
		return nil, err
	}
	return pipelineSetup(def, configPath, dataDir)
}

func pipelineValidateCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "validate FILE",
		Short: "Check a pipeline file (schema, templates, expressions, needs, items, models); one line per problem",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := loadSession(g, args[0])
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
	// sums record the items as this run loaded them (run only), until
	// saved in the run directory.
	sums *pipeline.ItemSums
	cfg  *config.Config
	// configPath is the --config the run uses ("": the definition's).
	configPath string
}

// pipelineSetup loads the items and the fano config (configPath, or the
// definition's) and checks that the steps' models are backends of it.
// Nothing is written.
func pipelineSetup(def *pipeline.Definition, configPath, dataDir string) (*pipelineSession, error) {
	items, err := def.LoadItems()
	if err != nil {
		return nil, err
	}
	cfg, err := fanoapp.PipelineConfig(def, configPath, dataDir)
	if err != nil {
		return nil, err
	}
	return &pipelineSession{def: def, items: items, cfg: cfg, configPath: configPath}, nil
}

// open opens the run directory's WAL and logs (read-only: no log file,
// nothing written).
func (ps *pipelineSession) open(readOnly bool) (*app, error) {
	d, err := fanoapp.OpenData(ps.cfg, fanoapp.OpenOptions{Console: "off", ReadOnly: readOnly})
	if err != nil {
		return nil, err
	}
	return wrapData(d, nil), nil
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
	var rerunChanged, keep bool
	var maxItems int
	var itemsFile string
	cmd := &cobra.Command{
		Use:   "run FILE",
		Short: "Run (or resume) a pipeline until every item is done or a limit is reached",
		Long: "Run (or resume) a pipeline until every item is done or a limit is reached.\n\n" +
			"The items of a JSONL file are read back from it as the run reaches them: keep the file as it is\n" +
			"until the run ends (a line that no longer holds its item's key is refused, naming the file, line\n" +
			"and item; other edits are read as they are then). Between runs, an item whose line changed is\n" +
			"refused with the steps' changes: --rerun-changed asks it again, --keep keeps its answers.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("max-items") && maxItems <= 0 {
				return usageErrorf("--max-items %d: give a positive count", maxItems)
			}
			ps, err := loadSession(g, args[0])
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("max-cost") {
				ps.def.Limits.MaxCost = maxCost
			}
			if err := ps.selectItems(maxItems, itemsFile); err != nil {
				return err
			}
			if rerunChanged && keep {
				return usageErrorf("--rerun-changed and --keep: give one")
			}
			rerun, err := ps.changedSteps(rerunChanged, keep)
			if err != nil {
				return err
			}
			rerunItems, err := ps.changedItems(rerunChanged, keep)
			if err != nil {
				return err
			}
			stopProfile := startProfiles()
			defer stopProfile()
			if retryStep != "" {
				retryFailed = true
			}
			return ps.run(cmd, g, runFlags{retryFailed: retryFailed, retryStep: retryStep, progress: !noProgress, noWait: noWait,
				rerun: rerun, rerunItems: rerunItems})
		},
	}
	cmd.Flags().BoolVar(&retryFailed, "retry-failed", false, "ask the failed (item, model) pairs again, and only them")
	cmd.Flags().StringVar(&retryStep, "step", "", "with --retry-failed: only this step's failures")
	cmd.Flags().Float64Var(&maxCost, "max-cost", 0, "stop before the run's cost (USD, all runs of this directory) would pass this")
	cmd.Flags().IntVar(&maxItems, "max-items", 0, "only the first N items of the source (overrides limits.max_items); a later run with more goes on")
	cmd.Flags().StringVar(&itemsFile, "items", "", "only the items whose keys FILE lists, one a line")
	cmd.Flags().BoolVar(&rerunChanged, "rerun-changed", false, "the steps whose prompt, schema, rules or models changed since the last run are asked again, with the steps that need them, and so are the items whose line changed")
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the answers given to changed steps' earlier definition and to changed items' earlier lines")
	cmd.Flags().BoolVar(&noProgress, "no-progress", false, "no progress bar")
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "when only the daily request budget holds work back, exit (status 1) instead of waiting for the next day's budget")
	jsonFlag(cmd, g)
	return cmd
}

// selectItems narrows the run to the first maxItems items (0: as the
// definition says) and to those keysFile lists ("": all).
func (ps *pipelineSession) selectItems(maxItems int, keysFile string) error {
	if maxItems > 0 {
		ps.def.Limits.MaxItems = maxItems
		all, err := ps.def.LoadItems()
		if err != nil {
			return err
		}
		ps.items = all
	}
	if keysFile != "" {
		items, err := pipeline.SelectItems(ps.items, keysFile)
		if err != nil {
			return err
		}
		ps.items = items
	}
	return nil
}

// changedItems compares the items with what the run directory recorded
// at the last run's start. An item whose line changed since has answers
// given to what it said then: refused, naming the items, unless rerun
// (their keys are returned: all their pairs are asked again) or keep.
func (ps *pipelineSession) changedItems(rerun, keep bool) ([]string, error) {
	sums, err := pipeline.ItemSumsOf(ps.items)
	if err != nil {
		return nil, err
	}
	ps.sums = sums
	dir := ps.cfg.DataDir
	if !exists(filepath.Join(dir, "fano.db")) || !pipeline.IsRunDir(dir) {
		return nil, nil
	}
	changed, err := sums.Changed(dir)
	switch {
	case err != nil:
		return nil, fmt.Errorf("the items of the last run in %s: %w", dir, err)
	case len(changed) == 0 || keep:
		return nil, nil
	}
	keys := make([]string, len(changed))
	var named []string
	for i, c := range changed {
		keys[i] = c.Key
		if i < 5 {
			if c.Line > 0 {
				named = append(named, fmt.Sprintf("line %d: %s", c.Line, c.Key))
			} else {
				named = append(named, c.Key)
			}
		}
	}
	if rerun {
		return keys, nil
	}
	list := strings.Join(named, ", ")
	if len(changed) > len(named) {
		list += fmt.Sprintf(" and %d more", len(changed)-len(named))
	}
	src := ps.def.Items.Source
	if src == "" {
		src = "items" // generated
	}
	return nil, fmt.Errorf("%s: %d item(s) changed since the last run in %s (%s): their answers were given to what they said before: pass --rerun-changed to ask them again, or --keep to keep those answers",
		src, len(changed), dir, list)
}

// changedSteps compares the definition with the one the run directory
// kept from its last run. A changed step is refused, naming it, unless
// rerun (the steps to ask again are returned: the changed ones and those
// that need them) or keep.
func (ps *pipelineSession) changedSteps(rerun, keep bool) ([]string, error) {
	dir := ps.cfg.DataDir
	if !exists(filepath.Join(dir, "fano.db")) || !pipeline.IsRunDir(dir) {
		return nil, nil
	}
	old, _, err := pipeline.LoadRun(dir)
	if err != nil {
		return nil, fmt.Errorf("the definition of the last run in %s: %w", dir, err)
	}
	changed, affected := pipeline.ChangedSteps(old, ps.def)
	switch {
	case len(changed) == 0 || keep:
		return nil, nil
	case rerun:
		return append(changed, affected...), nil
	}
	msg := fmt.Sprintf("step(s) %s changed since the last run in %s (prompt, schema, rules or models)", strings.Join(changed, ", "), dir)
	if len(affected) > 0 {
		msg += fmt.Sprintf("; %s need(s) them", strings.Join(affected, ", "))
	}
	return nil, fmt.Errorf("%s: pass --rerun-changed to ask them again, or --keep to keep the answers given to the earlier definition", msg)
}
