package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/jonboulle/clockwork"
	"github.com/spf13/cobra"

	"fano/actors"
)

func newRecoverCmd(g *globals) *cobra.Command {
	var dry bool
	cmd := &cobra.Command{
		Use: "recover",
		// Recovery as fano run does it first, alone.
		Short: "Bring the data directory back to a consistent state after a crash, without running any work",
		Long: "Rebuild what fano knows from its log, as `fano run` does when it starts: tasks a crash left\n" +
			"RUNNING are paused (the next run resumes them) and half-written changes are closed.\n" +
			"With --dry-run, only report what would be done.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := openData(g, openOpts{console: "off", readOnly: dry})
			if err != nil {
				return err
			}
			defer a.close()
			opts, err := a.options(clockwork.NewRealClock())
			if err != nil {
				return err
			}
			opts.Dry = dry
			rep, err := actors.Recover(opts)
			if err != nil {
				return err
			}
			if g.json {
				return writeJSON(cmd.OutOrStdout(), rep)
			}
			return printReport(cmd.OutOrStdout(), rep)
		},
	}
	cmd.Flags().BoolVar(&dry, "dry-run", false, "only report what would be repaired; change nothing")
	jsonFlag(cmd, g)
	return cmd
}

func printReport(w io.Writer, r *actors.RecoveryReport) error {
	mode := ""
	if r.DryRun {
		mode = " (dry run: nothing written)"
	}
	fmt.Fprintf(w, "recovery%s\n", mode)
	fmt.Fprintf(w, "  entries replayed:     %d (last seq %d)\n", r.EntriesReplayed, r.LastSeq)
	fmt.Fprintf(w, "  tasks recovered:      %d\n", r.TasksRecovered)
	fmt.Fprintf(w, "  tasks paused:         %d (requests in flight: %d)\n", r.TasksPaused, r.RequestsInterrupted)
	fmt.Fprintf(w, "  tasks to resume:      %d\n", r.TasksToResume)
	for owner, seq := range r.Checkpoints {
		fmt.Fprintf(w, "  checkpoint %-12s seq %d\n", owner, seq)
	}
	fmt.Fprintf(w, "  repairs made:         %d\n", len(r.Repairs))
	for _, s := range r.Repairs {
		fmt.Fprintf(w, "    - %s\n", s)
	}
	if len(r.Problems) > 0 {
		fmt.Fprintf(w, "  problems (not repaired): %d\n", len(r.Problems))
		for _, s := range r.Problems {
			fmt.Fprintf(w, "    - %s\n", s)
		}
	}
	_, err := fmt.Fprintf(w, "  tasks by state:       %v\n", r.TaskStates)
	return err
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
