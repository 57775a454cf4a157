package actors

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"fano/internal/memwal"
	"fano/wal"
)

// storeImpl opens one empty Store and returns it with its Close.
type storeImpl struct {
	name string
	open func(t *testing.T, now func() time.Time) (Store, func() error)
}

var storeImpls = []storeImpl{
	{"bbolt", func(t *testing.T, now func() time.Time) (Store, func() error) {
		l, err := wal.Open(filepath.Join(t.TempDir(), "fano.db"), wal.Options{NoSync: true, Now: now})
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		return l, l.Close
	}},
	{"memory", func(t *testing.T, now func() time.Time) (Store, func() error) {
		l := memwal.New(now)
		return l, l.Close
	}},
}

// TestStoreContract runs the same cases against the bbolt log and the
// in-memory one, so tests that use the latter test what production runs.
func TestStoreContract(t *testing.T) {
	for _, impl := range storeImpls {
		for _, c := range storeContract {
			t.Run(impl.name+"/"+c.name, func(t *testing.T) {
				clock := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
				s, closeFn := impl.open(t, func() time.Time { return clock })
				c.run(t, s, closeFn)
			})
		}
	}
}

func entry(owner, typ string, intent bool, payload string) wal.Entry {
	return wal.Entry{Owner: owner, Type: typ, Intent: intent, Payload: []byte(payload)}
}

func replayAll(t *testing.T, s Store, from uint64) []wal.Entry {
	t.Helper()
	var out []wal.Entry
	require.NoError(t, s.Replay(from, func(e wal.Entry) error { out = append(out, e); return nil }))
	return out
}

func seqsOf(es []wal.Entry) []uint64 {
	out := make([]uint64, len(es))
	for i, e := range es {
		out[i] = e.Seq
	}
	return out
}

var storeContract = []struct {
	name string
	run  func(t *testing.T, s Store, closeFn func() error)
}{
	{"an entry's archive record is stored with it and not replayed", func(t *testing.T, s Store, _ func() error) {
		e := entry("scheduler", "task_completed", false, "done")
		e.Archive = &wal.ArchiveRecord{Key: "task/a", Value: []byte("the whole task")}
		_, err := s.Append(context.Background(), e, entry("scheduler", "x", false, "y"))
		require.NoError(t, err)
		got, ok, err := s.Archived("task/a")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "the whole task", string(got))
		replayed := replayAll(t, s, 1)
		require.Len(t, replayed, 2)
		require.Nil(t, replayed[0].Archive)
	}},
	{"append assigns contiguous seqs and replay returns entries as written", func(t *testing.T, s Store, _ func() error) {
		ctx := context.Background()
		at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600))
		seqs, err := s.Append(ctx, entry("a", "t1", false, "one"), wal.Entry{Owner: "b", Type: "t2", Time: at, Payload: []byte("two")})
		require.NoError(t, err)
		require.Equal(t, []uint64{1, 2}, seqs)
		none, err := s.Append(ctx)
		require.NoError(t, err)
		require.Empty(t, none)
		seqs, err = s.Append(ctx, entry("a", "t3", false, "three"))
		require.NoError(t, err)
		require.Equal(t, []uint64{3}, seqs)
		require.Equal(t, uint64(3), s.LastSeq())

		got := replayAll(t, s, 0)
		require.Equal(t, []uint64{1, 2, 3}, seqsOf(got))
		require.Equal(t, "one", string(got[0].Payload))
		require.Equal(t, "a", got[0].Owner)
		require.Equal(t, "t1", got[0].Type)
		require.Equal(t, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), got[0].Time, "a zero time is the store's now")
		require.True(t, at.Equal(got[1].Time))
		require.Equal(t, time.UTC, got[1].Time.Location(), "times read back in UTC")
		require.Equal(t, []uint64{2, 3}, seqsOf(replayAll(t, s, 2)))
		require.Empty(t, replayAll(t, s, 4))
	}},
	{"async appends keep call order", func(t *testing.T, s Store, _ func() error) {
		var waits []func() ([]uint64, error)
		for i := range 5 {
			waits = append(waits, s.AppendAsync(entry("a", "t", false, string(rune('a'+i))), entry("b", "t", false, "x")))
		}
		for i, wait := range waits {
			seqs, err := wait()
			require.NoError(t, err)
			require.Equal(t, []uint64{uint64(2*i + 1), uint64(2*i + 2)}, seqs)
		}
		seqs, err := s.AppendAsync()()
		require.NoError(t, err)
		require.Empty(t, seqs)
	}},
	{"concurrent appends get distinct contiguous seqs", func(t *testing.T, s Store, _ func() error) {
		const writers, each = 8, 20
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range each {
					if _, err := s.AppendAsync(entry(fmt.Sprint("w", w), "t", true, "x"))(); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		got := replayAll(t, s, 1)
		require.Len(t, got, writers*each)
		for i, e := range got {
			require.Equal(t, uint64(i+1), e.Seq)
		}
		open, err := s.Uncommitted()
		require.NoError(t, err)
		require.Len(t, open, writers*each)
	}},
	{"replay stops at the callback's error, wrapped", func(t *testing.T, s Store, _ func() error) {
		_, err := s.Append(context.Background(), entry("a", "t", false, "1"), entry("a", "t", false, "2"))
		require.NoError(t, err)
		stop := errors.New("stop")
		var seen int
		err = s.Replay(1, func(wal.Entry) error { seen++; return stop })
		require.ErrorIs(t, err, stop)
		require.Contains(t, err.Error(), "seq 1")
		require.Equal(t, 1, seen)
	}},
	{"intents stay open until committed", func(t *testing.T, s Store, _ func() error) {
		ctx := context.Background()
		seqs, err := s.Append(ctx, entry("a", "i", true, "1"), entry("a", "e", false, "2"), entry("b", "i", true, "3"))
		require.NoError(t, err)
		open, err := s.Uncommitted()
		require.NoError(t, err)
		require.Equal(t, []uint64{seqs[0], seqs[2]}, seqsOf(open))
		require.Equal(t, "3", string(open[1].Payload))

		require.NoError(t, s.Commit(ctx, seqs[0], seqs[1]), "committing a non-intent is a no-op")
		open, err = s.Uncommitted()
		require.NoError(t, err)
		require.Equal(t, []uint64{seqs[2]}, seqsOf(open))

		err = s.Commit(ctx, seqs[2], 99)
		require.ErrorIs(t, err, wal.ErrUnknownSeq)
		open, err = s.Uncommitted()
		require.NoError(t, err)
		require.Equal(t, []uint64{seqs[2]}, seqsOf(open), "a commit with an unknown seq commits nothing")
		require.ErrorIs(t, s.Commit(ctx, 0), wal.ErrUnknownSeq)
	}},
	{"an entry closes the intent it names when it is written", func(t *testing.T, s Store, _ func() error) {
		ctx := context.Background()
		seqs, err := s.Append(ctx, entry("a", "i", true, "1"), entry("a", "i", true, "2"))
		require.NoError(t, err)
		answer := entry("a", "e", false, "answer")
		answer.Closes = seqs[0]
		_, err = s.Append(ctx, answer)
		require.NoError(t, err)
		open, err := s.Uncommitted()
		require.NoError(t, err)
		require.Equal(t, []uint64{seqs[1]}, seqsOf(open))
		require.Zero(t, replayAll(t, s, 3)[0].Closes, "not read back")

		bad := entry("a", "e", false, "bad")
		bad.Closes = s.LastSeq() + 1 // its own seq
		_, err = s.AppendAsync(bad)()
		require.ErrorIs(t, err, wal.ErrUnknownSeq)
		require.Equal(t, uint64(3), s.LastSeq(), "the failed append took no seq")
		open, err = s.Uncommitted()
		require.NoError(t, err)
		require.Equal(t, []uint64{seqs[1]}, seqsOf(open))
	}},
	{"checkpoints replace each other per owner", func(t *testing.T, s Store, _ func() error) {
		_, found, err := s.LoadCheckpoint("a")
		require.NoError(t, err)
		require.False(t, found)
		_, err = s.Append(context.Background(), entry("a", "t", false, "1"), entry("a", "t", false, "2"))
		require.NoError(t, err)
		require.NoError(t, s.SaveCheckpoint("a", 1, []byte("snap1")))
		require.NoError(t, s.SaveCheckpoint("a", 2, []byte("snap2")))
		require.NoError(t, s.SaveCheckpoint("b", 0, nil))
		cp, found, err := s.LoadCheckpoint("a")
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, "a", cp.Owner)
		require.Equal(t, uint64(2), cp.Seq)
		require.Equal(t, "snap2", string(cp.Snapshot))
		require.Equal(t, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), cp.Time)

		require.ErrorIs(t, s.SaveCheckpoint("a", 3, []byte("x")), wal.ErrUnknownSeq)
		require.Error(t, s.SaveCheckpoint("", 1, nil))
		cp, _, err = s.LoadCheckpoint("a")
		require.NoError(t, err)
		require.Equal(t, uint64(2), cp.Seq, "a refused checkpoint leaves the old one")
	}},
	{"compact drops covered entries and committed intents, keeps open intents", func(t *testing.T, s Store, _ func() error) {
		ctx := context.Background()
		seqs, err := s.Append(ctx,
			entry("a", "e", false, "1"), // covered: dropped
			entry("a", "i", true, "2"),  // covered but open: kept
			entry("b", "e", false, "3"), // b has no checkpoint: kept
			entry("b", "i", true, "4"),  // committed: dropped
		)
		require.NoError(t, err)
		seqs2, err := s.Append(ctx, entry("a", "e", false, "5")) // past a's checkpoint: kept
		require.NoError(t, err)
		require.NoError(t, s.Commit(ctx, seqs[3]))
		require.NoError(t, s.SaveCheckpoint("a", seqs[3], []byte("snap")))

		res, err := s.Compact()
		require.NoError(t, err)
		require.Equal(t, wal.CompactResult{BlocksRewritten: 1, EntriesDeleted: 2, EntriesKept: 3}, res)
		require.Equal(t, []uint64{seqs[1], seqs[2], seqs2[0]}, seqsOf(replayAll(t, s, 1)))
		require.Equal(t, seqs2[0], s.LastSeq())
		open, err := s.Uncommitted()
		require.NoError(t, err)
		require.Equal(t, []uint64{seqs[1]}, seqsOf(open))

		require.NoError(t, s.Commit(ctx, seqs[1]))
		require.NoError(t, s.SaveCheckpoint("b", seqs[3], nil))
		res, err = s.Compact()
		require.NoError(t, err)
		require.Equal(t, wal.CompactResult{BlocksDeleted: 1, EntriesDeleted: 2, EntriesKept: 1}, res)
		next, err := s.Append(ctx, entry("a", "e", false, "6"))
		require.NoError(t, err)
		require.Equal(t, []uint64{seqs2[0] + 1}, next, "seqs are never reused")
	}},
	{"stats count entries, intents and checkpoints", func(t *testing.T, s Store, _ func() error) {
		ctx := context.Background()
		_, err := s.Append(ctx, entry("a", "i", true, "1"), entry("a", "e", false, "2"))
		require.NoError(t, err)
		_, err = s.Append(ctx, entry("b", "e", false, "3"))
		require.NoError(t, err)
		require.NoError(t, s.SaveCheckpoint("b", 3, []byte("snap")))
		require.NoError(t, s.SaveCheckpoint("a", 2, []byte("snap")))
		st, err := s.Stats()
		require.NoError(t, err)
		require.Equal(t, 3, st.Entries)
		require.Equal(t, 2, st.Blocks)
		require.Equal(t, uint64(3), st.LastSeq)
		require.Equal(t, 1, st.Uncommitted)
		require.Equal(t, 2, st.Checkpoints)
		require.Equal(t, "a", st.OldestCheckpoint.Owner)
		require.Equal(t, uint64(2), st.OldestCheckpoint.Seq)
		require.Nil(t, st.OldestCheckpoint.Snapshot)
		require.Positive(t, st.Bytes)
	}},
	{"archive replaces per key and is untouched by compaction", func(t *testing.T, s Store, _ func() error) {
		ctx := context.Background()
		_, found, err := s.Archived("k1")
		require.NoError(t, err)
		require.False(t, found)
		require.NoError(t, s.Archive(ctx, map[string][]byte{"k1": []byte("v1"), "k2": []byte("v2")}))
		require.NoError(t, s.Archive(ctx, map[string][]byte{"k1": []byte("v1b")}))
		require.Error(t, s.Archive(ctx, map[string][]byte{"": []byte("x")}))
		_, err = s.Compact()
		require.NoError(t, err)
		v, found, err := s.Archived("k1")
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, "v1b", string(v))
		v, _, err = s.Archived("k2")
		require.NoError(t, err)
		require.Equal(t, "v2", string(v))
	}},
	{"a cancelled append writes nothing", func(t *testing.T, s Store, _ func() error) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := s.Append(ctx, entry("a", "t", false, "1"))
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, uint64(0), s.LastSeq())
		require.Empty(t, replayAll(t, s, 1))
	}},
	{"after close every call fails with ErrClosed", func(t *testing.T, s Store, closeFn func() error) {
		_, err := s.Append(context.Background(), entry("a", "t", true, "1"))
		require.NoError(t, err)
		require.NoError(t, closeFn())
		_, err = s.Append(context.Background(), entry("a", "t", false, "2"))
		require.ErrorIs(t, err, wal.ErrClosed)
		_, err = s.AppendAsync(entry("a", "t", false, "2"))()
		require.ErrorIs(t, err, wal.ErrClosed)
		require.ErrorIs(t, s.Commit(context.Background(), 1), wal.ErrClosed)
		require.ErrorIs(t, s.SaveCheckpoint("a", 1, nil), wal.ErrClosed)
		_, err = s.Uncommitted()
		require.ErrorIs(t, err, wal.ErrClosed)
		_, _, err = s.LoadCheckpoint("a")
		require.ErrorIs(t, err, wal.ErrClosed)
		_, err = s.Stats()
		require.ErrorIs(t, err, wal.ErrClosed)
		require.ErrorIs(t, s.Archive(context.Background(), map[string][]byte{"k": nil}), wal.ErrClosed)
	}},
}
