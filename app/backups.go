package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"fano/wal"
)

// backupPrefix and backupSuffix frame a backup's UTC time, so names sort
// by age.
const (
	backupPrefix = "fano-"
	backupSuffix = ".db"
	backupLayout = "20060102T150405Z"
)

// BackupDir is where a data directory's backups are kept.
func BackupDir(dataDir string) string { return filepath.Join(dataDir, "backup") }

// BackupName is the file name of a backup taken at.
func BackupName(at time.Time) string {
	return backupPrefix + at.UTC().Format(backupLayout) + backupSuffix
}

// BackupFiles lists the backups in dir, oldest first.
func BackupFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if e.Type().IsRegular() && strings.HasPrefix(n, backupPrefix) && strings.HasSuffix(n, backupSuffix) {
			if _, err := time.Parse(backupLayout, strings.TrimSuffix(strings.TrimPrefix(n, backupPrefix), backupSuffix)); err == nil {
				out = append(out, n)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// TakeBackup writes a backup of log into dataDir/backup/ and removes all
// but the newest keep backups there. It returns the new file's path.
func TakeBackup(log *wal.Log, dataDir string, at time.Time, keep int) (string, error) {
	dir := BackupDir(dataDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("backup: %w", err)
	}
	path := filepath.Join(dir, BackupName(at))
	if _, err := log.Backup(path); err != nil {
		return "", err
	}
	names, err := BackupFiles(dir)
	if err != nil {
		return path, fmt.Errorf("backup: list %s: %w", dir, err)
	}
	if keep > 0 && len(names) > keep {
		for _, n := range names[:len(names)-keep] {
			if err := os.Remove(filepath.Join(dir, n)); err != nil {
				return path, fmt.Errorf("backup: remove old %s: %w", n, err)
			}
		}
	}
	return path, nil
}

// backupService takes a backup every state.backup_interval_hours while
// fano runs.
func backupService(rc *ServiceEnv) (func(), error) {
	st := rc.Cfg.Orchestrator.State
	if st.BackupIntervalHours <= 0 || rc.Log == nil || rc.NoBackups {
		return nil, nil
	}
	every := time.Duration(st.BackupIntervalHours) * time.Hour
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := rc.Clock.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.Chan():
				path, err := TakeBackup(rc.Log, rc.DataDir, rc.Clock.Now(), st.BackupsKept)
				if err != nil {
					rc.Logger.Error().Err(err).Str("event", "cmd.fano.backup_failed").Msg("WAL backup failed; the next is tried on schedule")
					continue
				}
				rc.Logger.Info().Str("event", "cmd.fano.backup").Str("path", path).Msg("WAL backed up")
			}
		}
	}()
	return func() { close(stop); <-done }, nil
}

// panelBackup is the panel's backup on demand (nil without an open WAL).
func panelBackup(rc *ServiceEnv) func() (string, error) {
	if rc.Log == nil {
		return nil
	}
	return func() (string, error) {
		return TakeBackup(rc.Log, rc.DataDir, rc.Clock.Now(), rc.Cfg.Orchestrator.State.BackupsKept)
	}
}
