package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"fano/gateway/browser"
)

// newLoginCmd is `fano login <backend>`: a headed browser on the backend's
// persistent profile, so a person logs in to the site once.
func newLoginCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "login <backend>",
		Short: "Open a browser window on a browser backend's profile so you can log in to the site once",
		Long: `Opens a browser window (Chromium) on the persistent profile of a browser
backend (<data-dir>/browser/<backend>) at its site's start page. Log in there
(and pass the site's bot check if it shows "Just a moment..."), then close
the window or press Enter. The profile keeps the login; fano's headless
browser for that backend uses it from then on.

A profile can be open in one browser only: run it while fano is stopped, or
while the backend waits for a person ("login" or "challenge": fano then
closes that browser and checks the site again at each re-check). It needs a display (a
desktop session, or ssh -X).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			bc, err := browserBackendConfig(g, "login", args[0], "log in")
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return browser.Login(ctx, bc, cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
}
