package wal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
)

// Backup writes a consistent snapshot of the log to path, online: one read
// transaction (bbolt's Tx.WriteTo) sees the log as of one commit while
// writes go on. The copy is written beside path, synced, then renamed
// over it, so path is either absent or a whole backup. path must not be
// the log's own file.
func (l *Log) Backup(path string) (int64, error) {
	if abs, _ := filepath.Abs(path); abs != "" {
		if own, _ := filepath.Abs(l.path); own == abs {
			return 0, fmt.Errorf("wal: backup %s: that is the log itself", path)
		}
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, fmt.Errorf("wal: backup %s: %w", l.path, err)
	}
	var n int64
	err = l.view(func(tx *bolt.Tx) error {
		var werr error
		n, werr = tx.WriteTo(f)
		return werr
	})
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return 0, fmt.Errorf("wal: backup %s to %s: %w", l.path, path, err)
	}
	return n, nil
}

// CheckBackup opens the log file at path read-only and checks that it is
// a whole WAL whose every block and checkpoint decodes; it returns the
// log's last seq.
func CheckBackup(path string) (uint64, error) {
	l, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		return 0, err
	}
	defer l.Close()
	if err := l.Replay(1, func(Entry) error { return nil }); err != nil {
		return 0, err
	}
	if _, err := l.Checkpoints(); err != nil {
		return 0, err
	}
	return l.LastSeq(), nil
}

// ErrInUse is wrapped by the error of Restore when a process holds the
// log it would replace.
var ErrInUse = errors.New("wal: database in use")

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
