package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/jonboulle/clockwork"
	"github.com/spf13/cobra"

	"fano/actors"
	"fano/verify"
	"fano/wal"
)

// `fano verify` and `fano repair` work offline, on a data directory fano
// is not running on (the open database is locked by a running fano).

func newVerifyCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check a stopped fano's data directory for inconsistencies; exit status 1 if any are found",
		Long: `verify rebuilds what fano knows from its log, changing nothing, and reports: tasks of
modules that are not configured, tasks left RUNNING by a process that is gone,
each module's own inconsistencies (an insight blessed twice, a section
incorporated twice), intents without a commit, and output files out of step
with the state. 'fano repair --yes' fixes what it finds.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := openOffline(g, "verify", true)
			if err != nil {
				return err
			}
			defer a.close()
			env, err := verifyEnv(a)
			if err != nil {
				return err
			}
			rep, err := verify.Verify(env)
			if err != nil {
				return err
			}
			if g.json {
				if err := writeJSON(cmd.OutOrStdout(), rep); err != nil {
					return err
				}
			} else if err := printVerify(cmd.OutOrStdout(), rep); err != nil {
				return err
			}
			if !rep.Clean {
				return fmt.Errorf("verify: %d problems in %s; 'fano repair --yes' fixes them", len(rep.Problems), a.dataDir)
			}
			return nil
		},
	}
	jsonFlag(cmd, g)
	return cmd
}

func newRepairCmd(g *globals) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "repair",
		Short: "Fix what 'fano verify' finds (shows the problems; --yes fixes them; fano must be stopped)",
		Long: `repair fixes what verify finds, every fix recorded in fano's log:
recovery pauses orphan and interrupted tasks and closes open intents, modules
decide the events that resolve their duplicates, output files are rewritten
atomically from the state, and files no module owns are moved to
output-orphaned/ (never deleted). Without --yes it only shows the problems.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := openOffline(g, "repair", false)
			if err != nil {
				return err
			}
			defer a.close()
			env, err := verifyEnv(a)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if !yes {
				rep, err := verify.Verify(env)
				if err != nil {
					return err
				}
				if g.json {
					if err := writeJSON(w, rep); err != nil {
						return err
					}
				} else if err := printVerify(w, rep); err != nil {
					return err
				}
				if rep.Clean {
					return nil
				}
				return fmt.Errorf("repair: %d problems found; repair changes the data directory: run 'fano repair --yes'", len(rep.Problems))
			}
			rr, err := verify.Repair(env)
			if err != nil {
				return err
			}
			if g.json {
				if err := writeJSON(w, rr); err != nil {
					return err
				}
			} else if err := printRepair(w, rr); err != nil {
				return err
			}
			if !rr.After.Clean {
				return fmt.Errorf("repair: %d problems remain (see above)", len(rr.After.Problems))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "make the repairs")
	jsonFlag(cmd, g)
	return cmd
}

// openOffline opens the data directory for a command that must not run
// beside a live fano; the lock error names the pid that holds it. A
// read-only open writes nothing in the data directory.
func openOffline(g *globals, what string, readOnly bool) (*app, error) {
	a, err := openData(g, openOpts{console: "off", readOnly: readOnly})
	if errors.Is(err, wal.ErrLocked) {
		return nil, fmt.Errorf("%s works on a stopped fano: %w; stop it first", what, err)
	}
	return a, err
}

// verifyEnv builds the options once (backends are not used offline) and
// fresh modules for every inspection.
func verifyEnv(a *app) (verify.Env, error) {
	base, err := a.options(clockwork.NewRealClock())
	if err != nil {
		return verify.Env{}, err
	}
	first := true
	return verify.Env{
		DataDir: a.dataDir,
		Logger:  a.logger,
		Options: func() (actors.Options, error) {
			o := base
			if first {
				first = false
				return o, nil
			}
			mods, err := a.wiring(clockwork.NewRealClock()).BuildModules()
			if err != nil {
				return actors.Options{}, err
			}
			o.Modules = mods
			return o, nil
		},
	}, nil
}

func printVerify(w io.Writer, r *verify.Report) error {
	if r.Clean {
		_, err := fmt.Fprintf(w, "verify %s: clean (%d tasks, last seq %d, modules %s; checked %s)\n",
			r.DataDir, r.Tasks, r.LastSeq, strings.Join(r.Modules, ", "), strings.Join(r.Checks, ", "))
		printWarnings(w, r)
		return err
	}
	fmt.Fprintf(w, "verify %s: %d problems (%d tasks, last seq %d, modules %s)\n",
		r.DataDir, len(r.Problems), r.Tasks, r.LastSeq, strings.Join(r.Modules, ", "))
	for _, p := range r.Problems {
		fmt.Fprintf(w, "  %-20s %s\n      %s\n      fix: %s\n", p.Kind, p.ID, p.Detail, p.Fix)
	}
	printWarnings(w, r)
	return nil
}

func printWarnings(w io.Writer, r *verify.Report) {
	for _, s := range r.Warnings {
		fmt.Fprintf(w, "  note: %s\n", s)
	}
}

func printRepair(w io.Writer, rr *verify.RepairReport) error {
	if rr.Before.Clean {
		_, err := fmt.Fprintf(w, "repair %s: nothing to repair\n", rr.Before.DataDir)
		return err
	}
	fmt.Fprintf(w, "repair %s: %d problems found, %d fixes made\n", rr.Before.DataDir, len(rr.Before.Problems), len(rr.Fixes))
	for _, f := range rr.Fixes {
		id := f.ID
		if id == "" {
			id = "-"
		}
		fmt.Fprintf(w, "  %-16s %s: %s\n", f.Kind, id, f.Action)
	}
	return printVerify(w, rr.After)
}
