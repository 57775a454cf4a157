package wal

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Archived records survive checkpoint, compaction (online and of the file)
// and reopening.
func TestArchiveSurvivesCompaction(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "fano.db")
	l, err := Open(path, Options{})
	require.NoError(t, err)
	seqs, err := l.Append(context.Background(), Entry{Owner: "o", Type: "t", Payload: []byte("x")})
	require.NoError(t, err)
	require.NoError(t, l.Archive(context.Background(), map[string][]byte{"task/1": []byte("one"), "task/2": []byte("two")}))
	require.NoError(t, l.SaveCheckpoint("o", seqs[0], []byte("snap")))
	_, err = l.Compact()
	require.NoError(t, err)
	v, ok, err := l.Archived("task/1")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "one", string(v))
	_, ok, err = l.Archived("task/3")
	require.NoError(t, err)
	require.False(t, ok)
	require.Error(t, l.Archive(context.Background(), map[string][]byte{"": []byte("x")}))
	require.NoError(t, l.Close())

	small := filepath.Join(dir, "small.db")
	require.NoError(t, CompactFile(path, small))
	l, err = Open(small, Options{})
	require.NoError(t, err)
	defer l.Close()
	v, ok, err = l.Archived("task/2")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "two", string(v))
}

// An entry's archive record is written in the entry's own transaction:
// after the append it is there, and a failed append leaves neither.
func TestEntryArchiveRecordIsWrittenWithIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fano.db")
	l := openTest(t, path, testOptions())
	e := ent("scheduler", "task_completed", "done")
	e.Archive = &ArchiveRecord{Key: "task/a", Value: []byte("the whole task")}
	appendT(t, l, e, ent("scheduler", "x", "y"))
	got, ok, err := l.Archived("task/a")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "the whole task", string(got))
	replayed := replayAll(t, l, 1)
	require.Len(t, replayed, 2)
	require.Nil(t, replayed[0].Archive)

	l.hookBeforeCommit = func(int) { panic("disk on fire") }
	e2 := ent("scheduler", "task_completed", "never")
	e2.Archive = &ArchiveRecord{Key: "task/b", Value: []byte("never")}
	_, err = l.Append(context.Background(), e2)
	require.Error(t, err)
	_, ok, err = l.Archived("task/b")
	require.NoError(t, err)
	require.False(t, ok, "no record without its entry")
}
