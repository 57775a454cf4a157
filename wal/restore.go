package wal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Restore puts the backup file in place of the log file target, for a
// stopped program: it checks the backup is a whole log, takes target's
// lock (failing with ErrInUse if a process holds it), moves the current
// target aside (never deleting it) and copies the backup in its place.
// It returns where the old file went ("" if there was none).
func Restore(backup, target string) (aside string, err error) {
	if _, err := CheckBackup(backup); err != nil {
		return "", fmt.Errorf("wal: restore from %s: the backup is not usable: %w", backup, err)
	}
	old, err := os.OpenFile(target, os.O_RDWR, 0)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return "", fmt.Errorf("wal: restore %s: %w", target, err)
	default:
		defer old.Close()
		if err := lockExclusive(old); err != nil {
			return "", fmt.Errorf("wal: restore %s: %w: stop the program using it first", target, ErrInUse)
		}
		aside = fmt.Sprintf("%s.before-restore-%s", target, time.Now().UTC().Format("20060102T150405Z"))
		if err := os.Rename(target, aside); err != nil {
			return "", fmt.Errorf("wal: restore %s: move the current file aside: %w", target, err)
		}
	}
	if err := copyFileSynced(backup, target); err != nil {
		if aside != "" {
			_ = os.Rename(aside, target)
		}
		return "", fmt.Errorf("wal: restore %s from %s: %w", target, backup, err)
	}
	return aside, nil
}

// copyFileSynced copies src to dst (which is replaced) through a synced
// temporary file and a rename.
func copyFileSynced(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(dst))
}
