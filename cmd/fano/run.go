package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/spf13/cobra"

	"fano/actors"
	"fano/pb"
	"fano/wal"
)

func newRunCmd(g *globals) *cobra.Command {
	var untilIdle bool
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Start fano: pick up where the last run stopped, then work until Ctrl-C (or until done, with --until-idle)",
		Long: "Start fano on the data directory. It first finishes what an earlier run left (tasks cut off by\n" +
			"a crash are resumed), then works until Ctrl-C or SIGTERM, which pause running tasks so the next\n" +
			"run resumes them. With --until-idle it stops by itself once no work is left.\n\n" +
			"A data directory that has data is continued, not started over: to start over, delete it or\n" +
			"pass another --data-dir. While fano runs, its control panel (control.address) shows what it does.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd, g, untilIdle)
		},
	}
	cmd.Flags().BoolVar(&untilIdle, "until-idle", false, "stop once no work is left (the control panel then takes a free port if control.address is in use)")
	return cmd
}

func run(cmd *cobra.Command, g *globals, untilIdle bool) error {
	untilIdleRun = untilIdle // the heartbeat prints an ETA
	// Signals are caught from the start, so a signal during recovery is
	// not the default "die at once".
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGUSR1)
	defer signal.Stop(sigs)

	a, err := openApp(g, "")
	if errors.Is(err, wal.ErrLocked) {
		return fmt.Errorf("%w: another fano runs on this data directory; stop it first, or pass another --data-dir", err)
	}
	if err != nil {
		return err
	}
	defer a.close()
	opts, err := a.options(clockwork.NewRealClock())
	if err != nil {
		return err
	}
	earlier := a.log.LastSeq() // > 0: this data directory has earlier runs
	sys, err := actors.Start(opts)
	if err != nil {
		return err
	}
	stopReq := make(chan string, 1)
	rc := &runContext{Cfg: a.cfg, DataDir: a.dataDir, Sys: sys, Logger: a.logger, Clock: opts.Clock,
		Stop: func(reason string) {
			select {
			case stopReq <- reason:
			default:
			}
		}}
	var stops []func()
	stopServices := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
		stops = nil
	}
	defer stopServices()
	for _, svc := range runServices {
		stop, err := svc(rc)
		if err != nil {
			_ = sys.Stop()
			return err
		}
		if stop != nil {
			stops = append(stops, stop)
		}
	}
	rep := sys.Report()
	a.logger.Info().Str("event", "cmd.fano.started").Int("pid", os.Getpid()).Str("data_dir", a.dataDir).
		Int("tasks_recovered", rep.TasksRecovered).Int("entries_replayed", rep.EntriesReplayed).
		Int("tasks_paused", rep.TasksPaused).Strs("repairs", rep.Repairs).Strs("problems", rep.Problems).
		Msg("fano is running")
	if earlier > 0 {
		// A second `make run` finds the first one's data: say it goes on
		// from there rather than starting over.
		fmt.Fprintf(cmd.OutOrStdout(), "fano: continuing %s: %d tasks from earlier runs (%d completed); to start over, delete it or pass another --data-dir\n",
			a.dataDir, rep.TasksRecovered, rep.TaskStates["COMPLETED"])
	}

	var idle <-chan time.Time
	if untilIdle {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		idle = t.C
	}
	idleSeen := 0
	reason := ""
loop:
	for {
		select {
		case sig := <-sigs:
			if sig == syscall.SIGUSR1 {
				path, err := dumpState(a.dataDir, sys)
				if err != nil {
					a.logger.Error().Err(err).Str("event", "cmd.fano.stack_dump_failed").Msg("stack dump")
				} else {
					a.logger.Info().Str("event", "cmd.fano.stack_dump").Str("path", path).Msg("goroutine stacks written")
				}
				continue
			}
			reason = sig.String()
			break loop
		case r := <-stopReq:
			reason = r
			break loop
		case <-idle:
			// Idle twice in a row: the modules had a tick to propose more.
			if sys.Idle() {
				idleSeen++
			} else {
				idleSeen = 0
			}
			if idleSeen >= 3 {
				reason = "idle"
				break loop
			}
		}
	}
	// A second signal while stopping ends the process at once.
	go func() {
		for sig := range sigs {
			if sig != syscall.SIGUSR1 {
				a.logger.Warn().Str("event", "cmd.fano.forced_exit").Msg("second signal: exiting now")
				os.Exit(130)
			}
		}
	}()
	a.logger.Info().Str("event", "cmd.fano.stopping").Str("reason", reason).Msg("stopping: pausing running tasks")
	counts := map[string]map[pb.TaskState]int{}
	if reason == "idle" {
		counts = sys.Counts()
	}
	stopServices()
	stopErr := sys.Stop()
	finishOps() // the shutdown's own events reach logs/trace.log; it is closed
	if stopErr != nil {
		return fmt.Errorf("stop: %w", stopErr)
	}
	if reason == "idle" {
		done := 0
		for _, byState := range counts {
			done += byState[pb.TaskState_TASK_STATE_COMPLETED]
		}
		fmt.Fprintf(cmd.OutOrStdout(), "fano: no work left; %d tasks completed (%d in this run); data in %s\n",
			done, max(0, done-rep.TaskStates["COMPLETED"]), a.dataDir)
		if doc := filepath.Join(a.dataDir, "output", "DOCUMENT.md"); exists(doc) {
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
