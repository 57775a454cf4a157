// Command fano runs LLM work unattended: it schedules the tasks of its
// modules on browser, API and simulated LLM backends, persisting every
// change to a write-ahead log so that no acknowledged work is ever lost.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/spf13/cobra"
)

// version, when set at build time (-ldflags "-X main.version=..."),
// replaces the module version `fano version` reads from the build info.
var version = ""

func main() {
	os.Exit(execute(os.Args[1:], os.Stdout, os.Stderr))
}

// execute runs one command line and returns the exit code: 0 on success,
// 1 with one clear message on stderr otherwise.
func execute(args []string, stdout, stderr io.Writer) int {
	cmd := newRoot(stdout, stderr)
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		if errors.Is(err, syscall.EPIPE) {
			return 0 // `fano tasks | head`: the reader left; nothing failed
		}
		fmt.Fprintf(stderr, "fano: %v\n", err)
		return 1
	}
	return 0
}

// globals are the flags every command shares.
type globals struct {
	dataDir    string
	configPath string
	json       bool
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "fano",
		Short: "Run LLM exploration, review and documentation unattended, without losing work",
		Long: "fano runs LLM work unattended for days or weeks: it explores questions, reviews the answers and\n" +
			"writes them up, on browser, API or simulated LLMs, and keeps every step in its data directory\n" +
			"so that a crash or restart loses nothing.\n\n" +
			"Start with `fano run --until-idle` (the built-in demo config runs on simulated LLMs); while fano\n" +
			"runs, `fano status` and `fano tasks` show what it does.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().StringVar(&g.dataDir, "data-dir", "", "data directory (default: data_dir of the config, else ./fano-data)")
	root.PersistentFlags().StringVar(&g.configPath, "config", "", "config file (default: the built-in demo config with simulated LLMs)")
	root.AddCommand(
		newRunCmd(g),
		newRecoverCmd(g),
		newStatusCmd(g),
		newWALCmd(g),
		newConfigCmd(g),
		newVersionCmd(g),
	)
	for _, mk := range extraCommands {
		root.AddCommand(mk(g))
	}
	return root
}

// jsonFlag adds --json to a read command.
func jsonFlag(cmd *cobra.Command, g *globals) {
	cmd.Flags().BoolVar(&g.json, "json", false, "print JSON instead of text")
}
