package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// newBackendCmd is `fano backend pause|resume <name>`: the operator's
// switch for one LLM. Resume also re-checks the backend (its key is read
// again from the environment), so a fixed key is used at once.
func newBackendCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "backend", Short: "Pause, resume or re-check one LLM backend (needs fano running)"}
	var reason string
	mk := func(use, short string, pause bool) *cobra.Command {
		c := &cobra.Command{
			Use:   use + " <backend>",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				p, err := livePanel(cmd.Context(), g, "backend "+use)
				if err != nil {
					return err
				}
				r, err := p.client.PauseBackend(cmd.Context(), args[0], reason, pause)
				if err != nil {
					return apiErr(use+" "+args[0], err)
				}
				if g.json {
					return writeJSON(cmd.OutOrStdout(), r)
				}
				state := "resumed and re-checked"
				if r.Paused {
					state = "paused"
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", r.Backend, state)
				return err
			},
		}
		jsonFlag(c, g)
		return c
	}
	pause := mk("pause", "Stop giving work to a backend until it is resumed", true)
	pause.Flags().StringVar(&reason, "reason", "", "why (shown by fano status)")
	cmd.AddCommand(pause, mk("resume", "Resume a paused backend and re-check one that waits on a person (credentials, credits, login, challenge)", false))
	return cmd
}
