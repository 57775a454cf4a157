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
	"fano/config"
	"fano/pb"
	"fano/wal"
)

func newRunCmd(g *globals) *cobra.Command {
	var untilIdle, fresh bool
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
			return run(cmd, g, untilIdle, fresh)
		},
	}
	cmd.Flags().BoolVar(&untilIdle, "until-idle", false, "stop once no work is left (the control panel then takes a free port if control.address is in use)")
	cmd.Flags().BoolVar(&fresh, "fresh", false, "start a new state although fano.db is missing or empty beside earlier runs' output")
	return cmd
}

func run(cmd *cobra.Command, g *globals, untilIdle, fresh bool) error {
	haltReason := ""
	untilIdleRun = untilIdle // the heartbeat prints an ETA
	// Signals are caught from the start, so a signal during recovery is
	// not the default "die at once".
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGUSR1, syscall.SIGHUP)
	defer signal.Stop(sigs)

	// Everything that can refuse a start is checked before the first
	// write: the config, the data directory, the panel's port, then (with
	// the WAL open, nothing written yet) the backends' keys and drivers.
	cfg, err := loadConfig(g)
	if err != nil {
		return err
	}
	if err := preflight(cfg); err != nil {
		return err
	}
	panelL, err := listenPanel(cfg, cfg.DataDir, untilIdle)
	if err != nil {
		return err
	}
	handed := false
	defer func() {
		if panelL != nil && !handed {
			panelL.Close()
		}
	}()
	dirExisted := exists(cfg.DataDir)
	dbExisted := exists(filepath.Join(cfg.DataDir, "fano.db"))
	a, err := openData(g, openOpts{fresh: fresh})
	if errors.Is(err, wal.ErrLocked) {
		return fmt.Errorf("%w: another fano runs on this data directory; stop it first, or pass another --data-dir", err)
	}
	if err != nil {
		return err
	}
	started := false
	defer func() {
		_ = a.close()
		if !started {
			undoFailedStart(cfg.DataDir, dirExisted, dbExisted)
		}
	}()
	memLimit, memLimitFrom := memoryLimit(a.cfg.Orchestrator.State.MemoryLimitMB)
	opts, err := a.options(clockwork.NewRealClock())
	if err != nil {
		return err
	}
	earlier := a.log.LastSeq() // > 0: this data directory has earlier runs
	sys, err := actors.Start(opts)
	if err != nil {
		return err
	}
	started = true
	stopReq, requestStop := stopRequests()
	handed = true // the panel service owns (and closes) the listener from here
	rc := &runContext{Cfg: a.cfg, DataDir: a.dataDir, Sys: sys, Log: a.log, PanelListener: panelL, Logger: a.logger, Clock: opts.Clock,
		Stop: requestStop}
	stopServices, err := startServices(rc)
	defer stopServices()
	if err != nil {
		_ = sys.Stop()
		return err
	}
	rep := sys.Report()
	a.logger.Info().Str("event", "cmd.fano.started").Int("pid", os.Getpid()).Str("data_dir", a.dataDir).
		Int("tasks_recovered", rep.TasksRecovered).Int("entries_replayed", rep.EntriesReplayed).
		Int("tasks_paused", rep.TasksPaused).Strs("repairs", rep.Repairs).Strs("problems", rep.Problems).
		Int64("memory_limit_mb", memLimit>>20).Str("memory_limit_from", memLimitFrom).
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
	// Every few minutes a backend parked for its credentials is re-checked
	// with the environment file read again: a key fixed there is used
	// without a signal.
	recheck := time.NewTicker(credentialsRecheckEvery)
	defer recheck.Stop()
	halted := haltWatch{limit: untilIdleHaltLimit}
loop:
	for {
		select {
		case <-recheck.C:
			if a.cfg.LLM.EnvFile != "" && anyCredentialsParked(sys) {
				a.reloadKeys(sys)
			}
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				a.reloadKeys(sys)
				continue
			}
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
			// New work held back (WAL writes fail, low disk) for a while:
			// a batch run stops and says why, rather than wait or claim
			// that no work is left.
			if why := halted.check(sys, time.Now()); why != "" {
				reason = "halted"
				haltReason = why
				break loop
			}
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
			if sig != syscall.SIGUSR1 && sig != syscall.SIGHUP {
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
	if _, err := sys.StorageFault(); err != nil {
		// The disk still refuses writes: stop now; what could not be
		// written is redone after a restart (recovery pauses it).
		a.log.StopRetrying()
	}
	stopServices()
	stopErr := sys.Stop()
	finishOps() // the shutdown's own events reach logs/trace.log; it is closed
	if reason == "halted" {
		return fmt.Errorf("stopped with work left: %s", haltReason)
	}
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

// reloadKeys (SIGHUP, and every few minutes while a backend waits for
// its credentials): read the environment file again (if configured)
// and re-check every parked backend, so a fixed key is used at once.
func (a *app) reloadKeys(sys *actors.System) {
	if f := a.cfg.LLM.EnvFile; f != "" {
		names, err := config.LoadEnvFile(f)
		if err != nil {
			a.logger.Error().Err(err).Str("event", "cmd.fano.env_reload_failed").Msg("environment file not reloaded")
		} else {
			a.logger.Info().Str("event", "cmd.fano.env_reloaded").Strs("variables", names).Msg("environment file reloaded")
		}
	}
	for _, r := range sys.RecheckBackends() {
		a.logger.Info().Str("event", "cmd.fano.backend_recheck").Str("backend", r.Backend).Str("state", r.State).Str("reason", r.Reason).Msg("backend re-checked")
	}
}

// credentialsRecheckEvery is how often `fano run` re-reads llm.env_file
// while a backend waits for its credentials.
const credentialsRecheckEvery = 5 * time.Minute

func anyCredentialsParked(sys *actors.System) bool {
	for _, q := range sys.Quotas() {
		if q.State == "credentials" {
			return true
		}
	}
	return false
}

// untilIdleHaltLimit is how long --until-idle waits for held-back work to
// start again before it stops with an error.
var untilIdleHaltLimit = 10 * time.Second

// haltWatch tells when new work has been held back longer than limit,
// and why.
type haltWatch struct {
	limit time.Duration
	since time.Time
}

func (h *haltWatch) check(sys *actors.System, now time.Time) string {
	if sys.Accepting() {
		h.since = time.Time{}
		return ""
	}
	if h.since.IsZero() {
		h.since = now
	}
	if now.Sub(h.since) < h.limit {
		return ""
	}
	if since, err := sys.StorageFault(); err != nil {
		return fmt.Sprintf("the WAL cannot be written since %s (%v); free disk space and run again", since.Format(time.RFC3339), err)
	}
	return "new work is held back (low disk space below health.min_disk_space_gb, see 'fano status'); free disk space and run again"
}

// undoFailedStart removes what a start that failed before the system ran
// created: the data directory, or a fano.db holding nothing but its empty
// buckets. What was there before is never touched.
func undoFailedStart(dataDir string, dirExisted, dbExisted bool) {
	switch {
	case !dirExisted:
		_ = os.RemoveAll(dataDir)
	case !dbExisted:
		_ = os.Remove(filepath.Join(dataDir, "fano.db"))
	}
}
