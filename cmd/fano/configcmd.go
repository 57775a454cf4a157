package main

import (
	"fmt"
	"os"
	"strings"

	"fano/actors"
	"fano/config"

	"github.com/spf13/cobra"
)

func newConfigCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Check or convert a configuration file"}
	cmd.AddCommand(&cobra.Command{
		Use:   "validate [FILE]",
		Short: "Check a config file (FILE or --config) and list every problem with its line number",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := configFileArg(g, args); err != nil {
				return err
			}
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
			// An unset key variable would park its backend at run time:
			// say so now.
			if unset := cfg.UnsetKeyVariables(); len(unset) > 0 {
				return fmt.Errorf("%s", strings.Join(unset, "\n"))
			}
			name := g.configPath
			if name == "" {
				name = "built-in demo config"
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: ok (%d backends enabled: %v; data dir %s)\n", name, len(cfg.EnabledBackends()), cfg.EnabledBackends(), cfg.DataDir)
			return err
		},
	})
	cmd.AddCommand(newConfigMigrateCmd(g))
	return cmd
}

// configFileArg takes the file of `fano config validate FILE`; --config
// naming another file as well is an error rather than a silent choice.
func configFileArg(g *globals, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if g.configPath != "" && g.configPath != args[0] {
		return fmt.Errorf("two config files: %s (argument) and %s (--config); give one", args[0], g.configPath)
	}
	g.configPath = args[0]
	return nil
}

func newConfigMigrateCmd(g *globals) *cobra.Command {
	var write bool
	cmd := &cobra.Command{
		Use:   "migrate [FILE]",
		Short: "Convert a config in the older layout (llm.quotas, state directories) to fano's",
		Long: "Converts a config file in the older layout to fano's: llm.quotas\n" +
			"becomes each backend's hourly_limit and deep_mode_daily_limit (a backend the file does not define\n" +
			"becomes a browser backend with the site profile of its name), and orchestrator.state.checkpoint_dir\n" +
			"and wal_dir are dropped (fano keeps both in <data_dir>/fano.db). Prints the new file, and on\n" +
			"stderr each key converted or dropped; --write replaces FILE, keeping the old one as FILE.bak.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := configFileArg(g, args); err != nil {
				return err
			}
			path := g.configPath
			if path == "" {
				return fmt.Errorf("name the file to migrate: fano config migrate FILE")
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return fmt.Errorf("reading config: %w", err)
			}
			m, err := config.Migrate(data, path)
			if err != nil {
				return err
			}
			stderr := cmd.ErrOrStderr()
			if len(m.Changes) == 0 {
				_, err := fmt.Fprintf(stderr, "%s: already in fano's layout; nothing to migrate\n", path)
				return err
			}
			for _, c := range m.Changes {
				fmt.Fprintf(stderr, "%s:%s\n", path, strings.TrimPrefix(c.String(), "line "))
			}
			if !write {
				_, err := cmd.OutOrStdout().Write(m.YAML)
				return err
			}
			info, err := os.Stat(path)
			if err != nil {
				return fmt.Errorf("migrate %s: %w", path, err)
			}
			if err := actors.WriteFileAtomic(path+".bak", data, info.Mode().Perm()); err != nil {
				return fmt.Errorf("migrate %s: keeping the old file: %w", path, err)
			}
			if err := actors.WriteFileAtomic(path, m.YAML, info.Mode().Perm()); err != nil {
				return fmt.Errorf("migrate %s: %w", path, err)
			}
			_, err = fmt.Fprintf(stderr, "%s: migrated (%d changes); the old file is %s.bak\n", path, len(m.Changes), path)
			return err
		},
	}
	cmd.Flags().BoolVar(&write, "write", false, "replace FILE with the migrated config, keeping the old one as FILE.bak")
	return cmd
}
