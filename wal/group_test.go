package wal

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// MaxBatch caps the entries of one group commit; an Append larger than
// the cap is never split and goes alone.
func TestMaxBatch(t *testing.T) {
	opts := testOptions()
	opts.MaxBatch = 2
	l := openTest(t, "", opts)
	h := holdFirstCommit(l)
	var wg sync.WaitGroup
	appendAsync := func(es ...Entry) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := l.Append(context.Background(), es...)
			assertNoError(t, err)
		}()
		waitFor(t, h.enqueued)
	}
	appendAsync(ent("a", "t", "0"))
	waitFor(t, h.inCommit)
	// Queued in this order while the first commit is held.
	appendAsync(ent("a", "t", "1"))
	appendAsync(ent("a", "t", "2"))
	appendAsync(ent("a", "t", "3"))
	appendAsync(ent("a", "t", "4"), ent("a", "t", "5"), ent("a", "t", "6"))
	appendAsync(ent("a", "t", "7"))
	close(h.release)
	wg.Wait()
	require.Equal(t, []int{1, 2, 1, 3, 1}, h.batches)
	require.Len(t, replayAll(t, l, 1), 8)
}

// A failed write transaction fails its callers and every later write
// (ErrFailed); Close still works and nothing of the failed batch is kept.
func TestWriteFailureIsSticky(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fano.db")
	l, err := Open(path, testOptions())
	require.NoError(t, err)
	appendT(t, l, ent("a", "t", "ok"))
	l.hookBeforeCommit = func(int) { panic("disk on fire") }
	_, err = l.Append(context.Background(), ent("a", "t", "lost"))
	require.ErrorIs(t, err, ErrFailed)
	require.ErrorContains(t, err, "disk on fire")
	require.ErrorContains(t, err, "seqs 2-2")
	_, err = l.Append(context.Background(), ent("a", "t", "refused"))
	require.ErrorIs(t, err, ErrFailed)
	require.ErrorIs(t, l.Commit(context.Background(), 1), ErrFailed)
	require.Equal(t, uint64(1), l.LastSeq())

	// Reads and compaction still work: the transaction was rolled back.
	require.Len(t, replayAll(t, l, 1), 1)
	_, err = l.Compact()
	require.NoError(t, err)
	require.NoError(t, l.Close())

	l = openTest(t, path, testOptions())
	require.Equal(t, uint64(1), l.LastSeq())
	got := replayAll(t, l, 1)
	require.Len(t, got, 1)
	require.Equal(t, "ok", string(got[0].Payload))
	require.Equal(t, []uint64{2}, appendT(t, l, ent("a", "t", "again")))
}

// AppendAsync keeps several appends in flight and still assigns sequence
// numbers in call order; every one is durable once its wait returns.
func TestAppendAsyncKeepsCallOrder(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "fano.db")
	l, err := Open(path, Options{})
	require.NoError(t, err)
	var waits []func() ([]uint64, error)
	for i := 0; i < 200; i++ {
		waits = append(waits, l.AppendAsync(Entry{Owner: "o", Type: "t", Payload: []byte{byte(i)}}, Entry{Owner: "o", Type: "t", Payload: []byte{byte(i), 1}}))
	}
	var last uint64
	for i, w := range waits {
		seqs, err := w()
		require.NoError(t, err)
		require.Len(t, seqs, 2)
		require.Greater(t, seqs[0], last, "append %d out of order", i)
		require.Equal(t, seqs[0]+1, seqs[1])
		last = seqs[1]
	}
	require.NoError(t, l.Close())

	l, err = Open(path, Options{})
	require.NoError(t, err)
	defer l.Close()
	n := 0
	require.NoError(t, l.Replay(1, func(e Entry) error {
		require.Equal(t, byte(n/2), e.Payload[0])
		n++
		return nil
	}))
	require.Equal(t, 400, n)

	wait := l.AppendAsync(Entry{Owner: "o", Type: "t", Payload: make([]byte, maxEntryBytes+1)})
	_, err = wait()
	require.Error(t, err, "an oversized entry is refused through AppendAsync too")
}
