package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// newRetryCmd is `fano retry <task>...|--failed [--module M]`: FAILED
// tasks go back in the queue with fresh retry budgets; nothing else is
// asked again.
func newRetryCmd(g *globals) *cobra.Command {
	var failed bool
	var module string
	cmd := &cobra.Command{
		Use:   "retry <task-id>... | --failed [--module M]",
		Short: "Requeue FAILED tasks with fresh retry budgets (needs fano running)",
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 0 && !failed:
				return errors.New("retry: name the task ids, or --failed for every FAILED task")
			case len(args) > 0 && (failed || module != ""):
				return errors.New("retry: give task ids, or --failed [--module M], not both")
			}
			p, err := livePanel(cmd.Context(), g, "retry")
			if err != nil {
				return err
			}
			r, err := p.client.Retry(cmd.Context(), args, failed, module)
			if err != nil {
				return apiErr("retry", err)
			}
			if g.json {
				return writeJSON(cmd.OutOrStdout(), r)
			}
			if len(r.Requeued) == 0 {
				_, err = fmt.Fprintln(cmd.OutOrStdout(), "no FAILED task to retry")
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "requeued %d: %s\n", len(r.Requeued), strings.Join(r.Requeued, " "))
			return err
		},
	}
	cmd.Flags().BoolVar(&failed, "failed", false, "retry every FAILED task")
	cmd.Flags().StringVar(&module, "module", "", "with --failed: only this module's tasks")
	jsonFlag(cmd, g)
	return cmd
}
