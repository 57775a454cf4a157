package wal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// A backup taken while appends go on is a whole log as of one commit: it
// opens, every entry decodes, and it holds a prefix of the live log.
func TestBackupOnlineIsConsistent(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, filepath.Join(dir, "fano.db"), testOptions())
	appendT(t, l, ent("a", "t", "before"))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_, err := l.Append(context.Background(), ent("a", "t", fmt.Sprint(i)))
			if err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var backups []string
	for i := 0; i < 5; i++ {
		p := filepath.Join(dir, fmt.Sprintf("b%d.db", i))
		n, err := l.Backup(p)
		require.NoError(t, err)
		require.Positive(t, n)
		backups = append(backups, p)
	}
	close(stop)
	wg.Wait()
	live := replayAll(t, l, 1)
	for _, p := range backups {
		last, err := CheckBackup(p)
		require.NoError(t, err)
		b := openTest(t, p, Options{ReadOnly: true})
		got := replayAll(t, b, 1)
		require.Equal(t, int(last), len(got))
		require.Equal(t, live[:len(got)], got)
		require.NoError(t, b.Close())
		require.NoFileExists(t, p+".tmp")
	}
	_, err := l.Backup(l.Path())
	require.ErrorContains(t, err, "the log itself")
}

// Restore puts a backup in place of a damaged log, keeps the damaged file
// aside, and refuses while the log is open.
func TestRestoreReplacesDamagedLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "fano.db")
	last := bigLog(t, path)
	backup := filepath.Join(dir, "backup.db")
	l := openTest(t, path, testOptions())
	_, err := l.Backup(backup)
	require.NoError(t, err)

	// In use: refused, nothing moved.
	_, err = Restore(backup, path)
	require.ErrorIs(t, err, ErrInUse)
	require.NoError(t, l.Close())

	// Damage the log: cut at 100 KB.
	require.NoError(t, os.Truncate(path, 100<<10))
	_, err = Open(path, testOptions())
	require.ErrorIs(t, err, ErrDamaged)
	damaged := fileSum(t, path)

	// A damaged backup is refused before anything moves.
	bad := filepath.Join(dir, "bad.db")
	copyFile(t, backup, bad, 4<<20)
	_, err = Restore(bad, path)
	require.ErrorIs(t, err, ErrDamaged)
	require.Equal(t, damaged, fileSum(t, path))

	aside, err := Restore(backup, path)
	require.NoError(t, err)
	require.Equal(t, damaged, fileSum(t, aside), "the damaged file is kept aside")
	r := openTest(t, path, testOptions())
	require.Equal(t, last, r.LastSeq())
	require.Len(t, replayAll(t, r, 1), int(last))
	appendT(t, r, ent("a", "t", "after restore"))
	require.NoError(t, r.Close())
}
