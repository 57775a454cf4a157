package main

import (
	"fmt"

	"fano/config"

	"github.com/spf13/cobra"
)

func newConfigCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Check a configuration file"}
	cmd.AddCommand(&cobra.Command{
		Use:   "validate",
		Short: "Check the file given with --config and list every problem with its line number",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(g)
			if err != nil {
				return err
			}
			// Browser backends: their site profiles (built-in and the
			// site_profiles_file) load and name a known profile.
			for _, b := range cfg.EnabledBackends() {
				if bc, _ := cfg.Backend(b); bc.Type == config.TypeBrowser {
					if _, err := browserConfig(b, bc, cfg, cfg.DataDir); err != nil {
						return fmt.Errorf("backends.%s: %w", b, err)
					}
				}
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
