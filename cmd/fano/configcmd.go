package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newConfigCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Check the configuration"}
	cmd.AddCommand(&cobra.Command{
		Use:   "validate",
		Short: "Load and validate --config; print every problem with its line",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(g)
			if err != nil {
				return err
			}
			name := g.configPath
			if name == "" {
				name = "built-in demo config"
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: ok (%d backends enabled: %v; data dir %s)\n", name, len(cfg.EnabledBackends()), cfg.EnabledBackends(), cfg.DataDir)
			return err
		},
	})
	return cmd
}
