package main

import (
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
	extraCommands = append(extraCommands, newLoginCmd)
}

// newLoginCmd is `fano login <backend>`: a headed browser on the backend's
// persistent profile, so a person logs in to the site once.
func newLoginCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "login <backend>",
		Short: "Open a browser window on a browser backend's profile so you can log in to the site once",
		Long: `Opens a browser window (Chromium) on the persistent profile of a browser
backend (<data-dir>/browser/<backend>) at its site's start page. Log in there,
then close the window or press Enter. The profile keeps the login; fano's
headless browser for that backend uses it from then on.

A profile can be open in one browser only: run it while fano is stopped, or
while the backend is down for "login required" (fano then closes that
browser; it checks the site again every 5 minutes). It needs a display (a
desktop session, or ssh -X).`,
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
				list := "none"
				if len(names) > 0 {
					sort.Strings(names)
					list = strings.Join(names, ", ")
				}
				if !ok {
					return fmt.Errorf("login: no backend %q in the config (browser backends: %s)", name, list)
				}
				return fmt.Errorf("login: backend %s is of type %s; only browser backends log in (browser backends: %s)", name, b.Type, list)
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
			return browser.Login(ctx, bc, cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
}
