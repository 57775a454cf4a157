package app

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"fano/actors"
	"fano/config"
	"fano/logging"
	"fano/wal"
)

// Data is an opened data directory: config, logger and WAL. Main and the
// commands that work on a stopped fano build on it.
type Data struct {
	Config  *config.Config
	Dir     string
	Log     *wal.Log
	Storage *actors.StorageWatch // the WAL's write faults (writable opens)
	Logger  zerolog.Logger

	closeLog func() error
}

// OpenOptions say how the data directory is opened.
type OpenOptions struct {
	Console string // logging.console override ("" = the config's)
	// ConsoleOut is where console log lines go (nil: stderr).
	ConsoleOut io.Writer
	// ReadOnly is for a command that only reads (status and tasks
	// offline, verify, wal inspect, recover --dry-run): the WAL is opened
	// read-only (shared lock, no PID file) and no log file is written, so
	// the data directory's bytes stay as they were.
	ReadOnly bool
	// Fresh allows a new WAL where fano.db is missing or empty although
	// the directory holds the traces of earlier runs (`fano run --fresh`).
	Fresh bool
	// Clock stamps the WAL's write faults (nil: the real clock).
	Clock clockwork.Clock
	// WAL, if set, may change the WAL's options before it is opened (a
	// test injects write faults).
	WAL func(*wal.Options)
}

// OpenData checks cfg.DataDir and opens its WAL (for writing unless
// o.ReadOnly) and its logger. A locked, damaged or corrupt database is one
// clear error, and nothing is written.
func OpenData(cfg *config.Config, o OpenOptions) (*Data, error) {
	console, readOnly := o.Console, o.ReadOnly
	clock := o.Clock
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	if readOnly {
		// A reader creates nothing, not even the directory (a missing one
		// reads as no state yet, below).
		if fi, err := os.Stat(cfg.DataDir); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
		} else if err == nil && !fi.IsDir() {
			return nil, fmt.Errorf("data dir %s: exists but is not a directory", cfg.DataDir)
		}
	} else if err := config.CheckDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	// The WAL first: a locked or corrupt database stops us before we
	// write anything, not even a log line.
	path := filepath.Join(cfg.DataDir, "fano.db")
	// A reader only reads the PID file, to name the process that holds
	// the lock.
	opts := wal.Options{LockTimeout: time.Second, ReadOnly: readOnly, PIDFile: filepath.Join(cfg.DataDir, "fano.pid")}
	var storage *actors.StorageWatch
	if !readOnly {
		// A full disk or an I/O error does not fail the run: the WAL
		// retries, the system holds new work meanwhile (actors.StorageWatch).
		storage = actors.NewStorageWatch()
		opts.RetryWrites = 30 * time.Second
		opts.OnWriteFault = func(err error, attempt int) { storage.Failed(err, attempt, clock.Now()) }
		opts.OnWriteRecovered = storage.Recovered
	}
	if o.WAL != nil {
		o.WAL(&opts)
	}
	if !readOnly && !o.Fresh {
		if err := refuseLostState(cfg.DataDir, path); err != nil {
			return nil, err
		}
	}
	log, err := wal.Open(path, opts)
	var cleanup func()
	if readOnly && (errors.Is(err, os.ErrNotExist) || errors.Is(err, wal.ErrEmpty)) {
		// No state yet reads as an empty log: one made outside the data
		// directory, which a reader must not touch.
		log, cleanup, err = emptyLog()
	}
	if err != nil {
		return nil, walOpenError(path, err)
	}
	if console == "" {
		console = cfg.Logging.Console
	}
	logDir := filepath.Join(cfg.DataDir, "logs")
	if readOnly {
		logDir = ""
	}
	logger, closeLog, err := logging.New(logging.Options{Dir: logDir, Level: cfg.Logging.Level, Console: console, Out: o.ConsoleOut})
	if err != nil {
		log.Close()
		return nil, err
	}
	if pid := log.StalePID(); pid != 0 {
		logger.Warn().Int("pid", pid).Str("event", "cmd.fano.stale_pid").Msg("took over the data directory from a process that is gone")
	}
	if _, err := log.WriterSlice(); err != nil {
		logger.Warn().Err(err).Str("event", "cmd.fano.wal_writer_slice").
			Msg("the WAL's writer runs with the kernel's own slice: while every core is busy its commits wait longer for a CPU")
	}
	if !readOnly {
		// Leftovers of a `wal compact --shrink` or a restore that was
		// killed: we hold the WAL's lock, so no one is writing them.
		for _, stray := range []string{path + ".compact", path + ".tmp"} {
			if err := os.Remove(stray); err == nil {
				logger.Warn().Str("event", "cmd.fano.stray_removed").Str("path", stray).Msg("removed the leftover of an interrupted WAL rewrite")
			}
		}
	}
	if cleanup != nil {
		inner := closeLog
		closeLog = func() error { cleanup(); return inner() }
	}
	return &Data{Config: cfg, Dir: cfg.DataDir, Log: log, Storage: storage, Logger: logger, closeLog: closeLog}, nil
}

// emptyLog opens a new, empty log in a temporary directory; cleanup
// removes it after the log is closed.
func emptyLog() (*wal.Log, func(), error) {
	dir, err := os.MkdirTemp("", "fano-empty-*")
	if err != nil {
		return nil, nil, fmt.Errorf("empty state: %w", err)
	}
	log, err := wal.Open(filepath.Join(dir, "fano.db"), wal.Options{NoSync: true})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("empty state: %w", err)
	}
	return log, func() { _ = os.RemoveAll(dir) }, nil
}

// walOpenError adds what to do to the errors of a damaged or missing WAL.
func walOpenError(path string, err error) error {
	switch {
	case errors.Is(err, wal.ErrDamaged):
		return fmt.Errorf("%w\nfano will not start on it. To go on: 'fano wal salvage --to FILE' copies every readable entry into FILE and reports what was lost (then stop fano and move FILE to %s), or 'fano wal restore BACKUP' puts a backup from the data directory's backup/ in its place", err, path)
	case errors.Is(err, os.ErrNotExist), errors.Is(err, wal.ErrEmpty):
		return fmt.Errorf("%w: there is no state to read; 'fano run' starts a new one", err)
	}
	return err
}

// NewData is an opened data directory made by a caller that opens the
// WAL and logger its own way (a pipeline run); closeLog closes the logger.
func NewData(cfg *config.Config, log *wal.Log, logger zerolog.Logger, closeLog func() error) *Data {
	return &Data{Config: cfg, Dir: cfg.DataDir, Log: log, Logger: logger, closeLog: closeLog}
}

// Close closes the WAL and the log file.
func (d *Data) Close() error {
	err := d.Log.Close()
	if cerr := d.closeLog(); err == nil {
		err = cerr
	}
	return err
}

// Wiring builds the actor system's options for d.
func (d *Data) Wiring(clock clockwork.Clock) Wiring {
	return Wiring{Config: d.Config, DataDir: d.Dir, Log: d.Log, Storage: d.Storage, Logger: d.Logger, Clock: clock}
}

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// refuseLostState refuses to start a new WAL where fano.db is missing or
// empty but the data directory holds what earlier runs left: that state
// was lost (a deleted or emptied file, a wrong --data-dir layout), and a
// new log would redo all the work, spend quota again and overwrite the
// output.
func refuseLostState(dataDir, path string) error {
	fi, err := os.Stat(path)
	if err == nil && fi.Size() > 0 {
		return nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil // wal.Open reports it
	}
	traces := priorRunTraces(dataDir)
	if len(traces) == 0 {
		return nil
	}
	what := "is missing"
	if err == nil {
		what = "is empty"
	}
	return fmt.Errorf("data dir %s: %s %s but the directory holds what earlier runs left (%s); starting anew would redo every task and overwrite the output. "+
		"Restore a backup ('fano wal restore %s/...'), or start anew on purpose with 'fano run --fresh'",
		dataDir, path, what, strings.Join(traces, ", "), BackupDir(dataDir))
}

// priorRunTraces names what earlier runs leave in a data directory.
func priorRunTraces(dataDir string) []string {
	var out []string
	nonEmpty := func(name string) {
		if ents, err := os.ReadDir(filepath.Join(dataDir, name)); err == nil && len(ents) > 0 {
			out = append(out, fmt.Sprintf("%s/ (%d entries)", name, len(ents)))
		}
	}
	nonEmpty("output")
	nonEmpty("logs")
	nonEmpty("backup")
	for _, name := range []string{"panel.token"} {
		if _, err := os.Stat(filepath.Join(dataDir, name)); err == nil {
			out = append(out, name)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(dataDir, "fano.db.before-restore-*")); len(m) > 0 {
		out = append(out, filepath.Base(m[0]))
	}
	return out
}
