package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"fano/gateway/browser"
)

// errProfileProblems makes `fano profile check` exit non-zero once its
// report is printed.
var errProfileProblems = errors.New("the site does not match its profile")

// newProfileCmd is `fano profile check <backend>`: the site profile of a
// browser backend against the live site, on the saved login.
func newProfileCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "profile",
		Short: "Site profiles of browser backends",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "check <backend>",
		Short: "Open a browser backend's site headless and report which profile fields match",
		Long: `Opens the site of a browser backend headless on its saved login
(<data-dir>/browser/<backend>, as made by fano login) and lists every field of
its site profile: the login state, each selector (found, how many visible,
which of its list matched, or not found), a notice on the page and how fano
reads it, and each control (deep mode, upload) walked through its menu steps
with its state read. Nothing is switched and no prompt is sent.

Run it while fano is stopped (a browser profile can be open in one browser
only). It exits non-zero when the login, a startup selector, a selector that
is not valid CSS, or a control fails. Paste its output into a bug report
when a site changed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			bc, err := browserBackendConfig(g, "profile check", name, "have site profiles")
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			fmt.Fprintf(cmd.OutOrStdout(), "fano %s\n", version)
			report, err := browser.CheckProfile(ctx, bc, cmd.OutOrStdout())
			if err != nil {
				return err
			}
			if report.Problems > 0 {
				return fmt.Errorf("profile check: backend %s: %d problem(s): %w", name, report.Problems, errProfileProblems)
			}
			return nil
		},
	})
	return cmd
}
