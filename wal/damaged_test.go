package wal

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// bigLog writes a real log of about 6 MiB: 600 group commits of 10 KB
// entries, intents (some committed) and a checkpoint halfway.
func bigLog(t *testing.T, path string) (last uint64) {
	t.Helper()
	l := openTest(t, path, testOptions())
	payload := bytes.Repeat([]byte("fano "), 2<<10)
	for i := 0; i < 600; i++ {
		e := ent("scheduler", "task_started", fmt.Sprintf("%05d ", i)+string(payload))
		e.Intent = i%7 == 0
		seqs := appendT(t, l, e)
		if i%7 == 0 && i%2 == 0 {
			require.NoError(t, l.Commit(context.Background(), seqs[0]))
		}
		if i == 300 {
			require.NoError(t, l.SaveCheckpoint("scheduler", seqs[0], []byte("state at 300")))
		}
	}
	require.NoError(t, l.Archive(context.Background(), map[string][]byte{"task/a": []byte("archived a")}))
	last = l.LastSeq()
	require.NoError(t, l.Close())
	return last
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return sha256.Sum256(b)
}

func copyFile(t *testing.T, src, dst string, n int64) {
	t.Helper()
	in, err := os.Open(src)
	require.NoError(t, err)
	defer in.Close()
	out, err := os.Create(dst)
	require.NoError(t, err)
	_, err = io.CopyN(out, in, n)
	require.NoError(t, err)
	require.NoError(t, out.Close())
}

func TestTruncatedFileIsOneClearErrorAndUntouched(t *testing.T) {
	dir := t.TempDir()
	whole := filepath.Join(dir, "whole.db")
	bigLog(t, whole)
	fi, err := os.Stat(whole)
	require.NoError(t, err)
	require.Greater(t, fi.Size(), int64(4<<20), "the log must be bigger than the cut")

	for _, cut := range []int64{4 << 20, 100 << 10, 3 * 4096, 100} {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			path := filepath.Join(dir, fmt.Sprintf("cut-%d.db", cut))
			copyFile(t, whole, path, cut)
			before := fileSum(t, path)
			for _, ro := range []bool{false, true} {
				opts := testOptions()
				opts.ReadOnly = ro
				l, err := Open(path, opts)
				if err == nil {
					_ = l.Close()
				}
				require.ErrorIs(t, err, ErrDamaged, "read-only %v", ro)
				require.ErrorContains(t, err, path)
				if cut >= 4096 {
					require.ErrorContains(t, err, "cut short")
				}
			}
			require.Equal(t, before, fileSum(t, path), "a damaged file is left as it is")
			st, err := os.Stat(path)
			require.NoError(t, err)
			require.Equal(t, cut, st.Size())
		})
	}
	// The whole file still opens.
	l := openTest(t, whole, testOptions())
	require.NoError(t, l.Close())
}

func TestReadOnlyOpenChangesNoByte(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "fano.db")
	last := bigLog(t, path)
	before := fileSum(t, path)

	opts := testOptions()
	opts.ReadOnly = true
	l, err := Open(path, opts)
	require.NoError(t, err)
	require.Equal(t, last, l.LastSeq())
	require.Len(t, replayAll(t, l, 1), int(last))
	_, err = l.Uncommitted()
	require.NoError(t, err)
	_, err = l.Stats()
	require.NoError(t, err)
	_, err = l.Append(context.Background(), ent("a", "t", "x"))
	require.ErrorIs(t, err, ErrReadOnly)
	require.ErrorIs(t, l.SaveCheckpoint("a", 1, nil), ErrReadOnly)
	_, err = l.Compact()
	require.Error(t, err)
	// Two readers at once: the lock is shared.
	l2, err := Open(path, opts)
	require.NoError(t, err)
	require.NoError(t, l2.Close())
	require.NoError(t, l.Close())
	require.Equal(t, before, fileSum(t, path), "a read-only open writes nothing")

	// A plain open that writes nothing leaves the bytes as they were too.
	l = openTest(t, path, testOptions())
	require.NoError(t, l.Close())
	require.Equal(t, before, fileSum(t, path))

	_, err = Open(filepath.Join(dir, "missing.db"), opts)
	require.ErrorIs(t, err, os.ErrNotExist)
	empty := filepath.Join(dir, "empty.db")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	_, err = Open(empty, opts)
	require.ErrorIs(t, err, ErrEmpty)
	st, err := os.Stat(empty)
	require.NoError(t, err)
	require.Zero(t, st.Size())
}

func TestSalvageCopiesWhatIsReadable(t *testing.T) {
	dir := t.TempDir()
	whole := filepath.Join(dir, "whole.db")
	last := bigLog(t, whole)

	// A whole file salvages completely.
	full := filepath.Join(dir, "full.db")
	rep, err := Salvage(whole, full)
	require.NoError(t, err)
	require.True(t, rep.SourceIntact, "%+v", rep)
	require.True(t, rep.LastSeqKnown)
	require.Equal(t, int(last), rep.Entries)
	require.Equal(t, last, rep.LastSeq)
	require.Equal(t, []string{"scheduler"}, rep.Checkpoints)
	require.Equal(t, 1, rep.Archived)
	l := openTest(t, full, testOptions())
	orig := openTest(t, whole, Options{ReadOnly: true})
	require.Equal(t, replayAll(t, orig, 1), replayAll(t, l, 1))
	ou, err := orig.Uncommitted()
	require.NoError(t, err)
	su, err := l.Uncommitted()
	require.NoError(t, err)
	require.Equal(t, ou, su)
	require.NoError(t, orig.Close())
	require.NoError(t, l.Close())

	for _, cut := range []int64{4 << 20, 100 << 10} {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			src := filepath.Join(dir, fmt.Sprintf("cut-%d.db", cut))
			copyFile(t, whole, src, cut)
			before := fileSum(t, src)
			dst := filepath.Join(dir, fmt.Sprintf("salvaged-%d.db", cut))
			rep, err := Salvage(src, dst)
			require.NoError(t, err)
			require.Equal(t, before, fileSum(t, src), "salvage never writes its source")
			require.False(t, rep.SourceIntact)
			require.NotEmpty(t, rep.Problems)
			require.Less(t, rep.Entries, int(last))
			lost := 0
			for _, r := range append(rep.Lost, rep.Unaccounted...) {
				lost += int(r.To - r.From + 1)
			}
			if rep.LastSeqKnown {
				require.Equal(t, last, rep.LastSeq)
			}
			require.Equal(t, int(rep.LastSeq), rep.Entries+lost, "every seq is copied or reported: %+v", rep)

			// The salvaged file is a good log: it opens, replays what was
			// copied with the original seqs and payloads, and appends
			// after the last seq the source had.
			l := openTest(t, dst, testOptions())
			got := replayAll(t, l, 1)
			require.Len(t, got, rep.Entries)
			for _, e := range got {
				require.Contains(t, string(e.Payload), fmt.Sprintf("%05d ", e.Seq-1))
			}
			seqs := appendT(t, l, ent("a", "t", "after"))
			require.Greater(t, seqs[0], rep.LastSeq)
			require.NoError(t, l.Close())
		})
	}

	_, err = Salvage(whole, full)
	require.ErrorContains(t, err, "already exists")
}

// A damaged branch page hides every block under it from the walk of the
// tree, though their own pages are intact: a scan of the file's pages
// finds them, and nothing above the checkpoint is lost.
func TestSalvageScansPagesUnderADamagedBranch(t *testing.T) {
	dir := t.TempDir()
	whole := filepath.Join(dir, "whole.db")
	last := bigLog(t, whole)
	src := filepath.Join(dir, "branch.db")
	fi, err := os.Stat(whole)
	require.NoError(t, err)
	copyFile(t, whole, src, fi.Size())
	pageSize, _, kinds, err := PageKinds(src)
	require.NoError(t, err)
	require.NotEmpty(t, kinds["branch"], "the blocks bucket spans pages under a branch")
	f, err := os.OpenFile(src, os.O_RDWR, 0)
	require.NoError(t, err)
	for _, id := range kinds["branch"] {
		_, err := f.WriteAt(bytes.Repeat([]byte{0xEE}, int(pageSize)), int64(id)*pageSize)
		require.NoError(t, err)
	}
	require.NoError(t, f.Close())

	dst := filepath.Join(dir, "salvaged.db")
	rep, err := Salvage(src, dst)
	require.NoError(t, err)
	require.False(t, rep.SourceIntact)
	require.Positive(t, rep.Scanned, "%+v", rep)
	require.Empty(t, rep.Lost, "every entry above the checkpoint is found: %+v", rep)
	require.Equal(t, last, rep.LastSeq)

	l := openTest(t, dst, testOptions())
	defer l.Close()
	got := replayAll(t, l, 1)
	require.Len(t, got, rep.Entries)
	above := 0
	for _, e := range got {
		require.Contains(t, string(e.Payload), fmt.Sprintf("%05d ", e.Seq-1))
		if e.Seq > 301 {
			above++
		}
	}
	require.GreaterOrEqual(t, above, int(last)-301)
	open, err := l.Uncommitted()
	require.NoError(t, err)
	require.NotEmpty(t, open, "the open intents of the found entries come along")
}
