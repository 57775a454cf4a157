// Command fano runs LLM work unattended: it schedules the tasks of its
// modules on browser, API and simulated LLM backends, persisting every
// change to a write-ahead log so that no acknowledged work is ever lost.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"fano/modules"
)

// version, when set at build time (-ldflags "-X main.version=..."),
// replaces the module version `fano version` reads from the build info.
var version = ""

func main() {
	survivePipe()
	os.Exit(execute(os.Args[1:], os.Stdout, os.Stderr))
}

// survivePipe: a reader that goes away (`fano wal inspect | head`, `fano
// run 2>&1 | head`) must not kill fano with SIGPIPE in the middle of its
// work: with SIGPIPE notified, a write to a closed stdout or stderr fails
// with EPIPE instead, which execute treats as success and the logger
// ignores. Notify (not Ignore) keeps the default for child processes.
func survivePipe() {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
}

// execute runs one command line and returns the exit code: 0 on success,
// 1 with one clear message on stderr otherwise.
func execute(args []string, stdout, stderr io.Writer) int {
	return executeWith(args, stdout, stderr, nil)
}

// executeWith is execute with modules that run beside the config's (a
// test's; nil: none).
func executeWith(args []string, stdout, stderr io.Writer, mods func() []modules.Module) int {
	cmd := newRootWith(stdout, stderr, mods)
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		if errors.Is(err, syscall.EPIPE) {
			return 0 // `fano tasks | head`: the reader left; nothing failed
		}
		var ue *usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "fano: %v\n\n%s", err, ue.cmd.UsageString())
			return exitUsage
		}
		var coded interface{ ExitCode() int }
		if errors.As(err, &coded) {
			if msg := err.Error(); msg != "" {
				fmt.Fprintf(stderr, "fano: %s\n", msg)
			}
			return coded.ExitCode()
		}
		fmt.Fprintf(stderr, "fano: %v\n", err)
		var ec *exitCodeError
		if errors.As(err, &ec) {
			return ec.code
		}
		return 1
	}
	return 0
}

// usageError is a command line that names no command: the message, then
// the usage of the command it reached.
type usageError struct {
	cmd *cobra.Command
	msg string
}

func (e *usageError) Error() string { return e.msg }

// strictGroups makes every command that only groups others (fano, seed,
// wal, config, ...) refuse an argument that is none of its commands, with
// the usage and a non-zero exit; alone it prints its help. Cobra's own
// handling of such a command prints the help and exits 0, which reads as
// success to a script (`fano seed "question"` added nothing).
func strictGroups(c *cobra.Command) {
	for _, sub := range c.Commands() {
		strictGroups(sub)
	}
	if !c.HasSubCommands() || c.Runnable() {
		return
	}
	c.Args = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
		if s := c.SuggestionsFor(args[0]); len(s) > 0 {
			msg += fmt.Sprintf("; did you mean %s %s?", c.CommandPath(), s[0])
		} else if add, _, err := c.Find([]string{"add"}); err == nil && add != c && len(args) == 1 {
			msg += fmt.Sprintf("; to add it: %s add %q", c.CommandPath(), args[0])
		}
		return &usageError{cmd: c, msg: msg}
	}
	c.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
}

// globals are the flags every command shares.
type globals struct {
	dataDir    string
	configPath string
	json       bool
	// modules run beside the config's (executeWith's).
	modules func() []modules.Module
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	return newRootWith(stdout, stderr, nil)
}

func newRootWith(stdout, stderr io.Writer, mods func() []modules.Module) *cobra.Command {
	g := &globals{modules: mods}
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
		newBackendCmd(g),
		newDocCmd(g),
		newLoginCmd(g),
		newPipelineCmd(g),
		newTasksCmd(g), newCancelCmd(g), newSeedCmd(g), newCommentCmd(g),
		newProfileCmd(g),
		newRetryCmd(g),
		newVerifyCmd(g), newRepairCmd(g),
		newSimulateCmd(g),
		newGatewayCmd(g), newRemoteCmd(g),
	)
	strictGroups(root)
	// A flag that does not parse is a usage error like an unknown command:
	// the message, the usage, exit status 2.
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return &usageError{cmd: c, msg: err.Error()} })
	return root
}

// jsonFlag adds --json to a read command.
func jsonFlag(cmd *cobra.Command, g *globals) {
	cmd.Flags().BoolVar(&g.json, "json", false, "print JSON instead of text")
}
