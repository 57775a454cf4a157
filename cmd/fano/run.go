package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	fanoapp "fano/app"
)

func newRunCmd(g *globals) *cobra.Command {
	var untilIdle, fresh bool
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Start fano: pick up where the last run stopped, then work until Ctrl-C (or until done, with --until-idle)",
		Long: "Start fano on the data directory. It first finishes what an earlier run left (tasks cut off by\n" +
			"a crash are resumed), then works until Ctrl-C or SIGTERM, which pause running tasks so the next\n" +
			"run resumes them. With --until-idle it stops by itself once no work is left (exit code 0), or once\n" +
			"all the work left waits on a person: a backend that needs a login, credits, a key or a cleared bot\n" +
			"check. Then it prints one line per such backend with what to do, and exits with code 3\n" +
			"(ExitWaitingOnPerson); nothing is lost and the next run continues.\n\n" +
			"A data directory that has data is continued, not started over: to start over, delete it or\n" +
			"pass another --data-dir. While fano runs, its control panel (control.address) shows what it does.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd, g, untilIdle, fresh)
		},
	}
	cmd.Flags().BoolVar(&untilIdle, "until-idle", false, "stop once no work is left (the control panel then takes a free port if control.address is in use)")
	cmd.Flags().BoolVar(&fresh, "fresh", false, "start a new state although fano.db is missing or empty beside earlier runs' output")
	return cmd
}

// run is `fano run`: app.Main with the process's signals, until a signal,
// a stop request from the panel, or (--until-idle) no work left.
func run(cmd *cobra.Command, g *globals, untilIdle, fresh bool) error {
	cfg, err := loadConfig(g)
	if err != nil {
		return err
	}
	o := fanoapp.Options{Config: cfg, Stdout: cmd.OutOrStdout(), UntilIdle: untilIdle, Fresh: fresh, Signals: true}
	if g.modules != nil {
		o.Modules = g.modules()
	}
	m := fanoapp.NewMain(o)
	ctx := context.Background()
	if err := m.Open(ctx); err != nil {
		return err
	}
	runErr := m.Run(ctx)
	closeErr := m.Close()
	if runErr != nil {
		return runErr
	}
	if closeErr != nil {
		return closeErr
	}
	res := m.Result()
	if res.Reason == fanoapp.ReasonWaitingOnPerson {
		for _, b := range res.Blocked {
			fmt.Fprintf(cmd.OutOrStdout(), "fano: %s waits on a person (%s): %s\n", b.Backend, b.State, b.Action)
		}
		return &exitCodeError{code: ExitWaitingOnPerson,
			msg: fmt.Sprintf("stopped: the work left waits on a person for %d backend(s); the next run continues", len(res.Blocked))}
	}
	if res.Reason == "idle" {
		dataDir := cfg.DataDir
		fmt.Fprintf(cmd.OutOrStdout(), "fano: no work left; %d tasks completed (%d in this run); data in %s\n",
			res.Completed, max(0, res.Completed-res.CompletedBefore), dataDir)
		if doc := filepath.Join(dataDir, "output", "DOCUMENT.md"); exists(doc) {
			fmt.Fprintf(cmd.OutOrStdout(), "fano: the document is %s\n", doc)
		}
		// Where to look next, as this fano was invoked (./bin/fano).
		same := ""
		if g.configPath != "" {
			same += " --config " + g.configPath
		}
		if g.dataDir != "" {
			same += " --data-dir " + g.dataDir
		}
		fmt.Fprintf(cmd.OutOrStdout(), "fano: to look around: %[1]s status%[2]s, %[1]s tasks%[2]s\n", os.Args[0], same)
	}
	return nil
}

// ExitWaitingOnPerson is `fano run --until-idle`'s exit code when the
// work left waits on a person (a login, credits, a key, a bot check).
const ExitWaitingOnPerson = 3

// exitCodeError ends the command with its own exit code and message.
type exitCodeError struct {
	code int
	msg  string
}

func (e *exitCodeError) Error() string { return e.msg }

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
