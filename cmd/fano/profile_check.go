package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"fano/config"
	"fano/gateway/browser"
)

func init() {
	extraCommands = append(extraCommands, newProfileCmd)
}

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
			cfg, err := loadConfig(g)
			if err != nil {
				return err
			}
			name := args[0]
			b, ok := cfg.Backend(name)
			if !ok || b.Type != config.TypeBrowser {
				var names []string
				for n, nb := range cfg.Backends {
					if nb != nil && nb.Type == config.TypeBrowser {
						names = append(names, n)
					}
				}
				sort.Strings(names)
				list := "none"
				if len(names) > 0 {
					list = strings.Join(names, ", ")
				}
				if !ok {
					return fmt.Errorf("profile check: no backend %q in the config (browser backends: %s)", name, list)
				}
				return fmt.Errorf("profile check: backend %s is of type %s; only browser backends have site profiles (browser backends: %s)", name, b.Type, list)
			}
			if err := config.CheckDataDir(cfg.DataDir); err != nil {
				return err
			}
			bc, err := browserConfig(name, b, cfg, cfg.DataDir)
			if err != nil {
				return fmt.Errorf("backend %s: %w", name, err)
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
