package wal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// The spec's test_crash_recovery: two intents, the first committed, the
// log closed and reopened: only the second is uncommitted.
func TestCrashRecovery(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fano.db")
	l, err := Open(path, testOptions())
	require.NoError(t, err)
	ctx := context.Background()
	s1, err := l.Append(ctx, intent("module/explorer", "document_write", "first"))
	require.NoError(t, err)
	s2, err := l.Append(ctx, intent("module/explorer", "document_write", "second"))
	require.NoError(t, err)
	require.NoError(t, l.Commit(ctx, s1[0]))
	require.NoError(t, l.Close())

	l = openTest(t, path, testOptions())
	un, err := l.Uncommitted()
	require.NoError(t, err)
	require.Len(t, un, 1)
	require.Equal(t, s2[0], un[0].Seq)
	require.Equal(t, "second", string(un[0].Payload))
	require.True(t, un[0].Intent)
	require.Equal(t, "module/explorer", un[0].Owner)
	require.Equal(t, "document_write", un[0].Type)
	require.True(t, testTime.Equal(un[0].Time))
}

func TestAppendRoundTrip(t *testing.T) {
	l := openTest(t, "", testOptions())
	at := time.Date(2025, 5, 6, 7, 8, 9, 123456789, time.FixedZone("x", 3600))
	seqs := appendT(t, l,
		Entry{Seq: 99, Time: at, Type: "task_submitted", Owner: "scheduler", Payload: []byte{0, 1, 2}},
		Entry{Type: "empty"},
	)
	require.Equal(t, []uint64{1, 2}, seqs)
	require.Equal(t, uint64(2), l.LastSeq())
	got := replayAll(t, l, 0)
	require.Len(t, got, 2)
	require.Equal(t, Entry{Seq: 1, Time: at.UTC(), Type: "task_submitted", Owner: "scheduler", Payload: []byte{0, 1, 2}}, got[0])
	require.Equal(t, Entry{Seq: 2, Time: testTime, Type: "empty"}, got[1])
	require.Equal(t, []uint64{2}, seqsOf(replayAll(t, l, 2)))
	require.Empty(t, replayAll(t, l, 3))
}

// Many goroutines append concurrently; Replay yields every entry once,
// in strictly increasing seq order, each with its payload.
func TestReplayOrderManyWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fano.db")
	l := openTest(t, path, testOptions())
	const writers, perWriter = 32, 60
	var (
		mu   sync.Mutex
		want = map[uint64]string{}
		wg   sync.WaitGroup
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				n := 1 + i%3
				es := make([]Entry, n)
				for j := range es {
					es[j] = ent(fmt.Sprintf("w%d", w), "t", fmt.Sprintf("w%d-i%d-j%d", w, i, j))
				}
				seqs, err := l.Append(context.Background(), es...)
				if !assertNoError(t, err) {
					return
				}
				mu.Lock()
				for j, s := range seqs {
					if j > 0 && s != seqs[j-1]+1 {
						t.Errorf("seqs of one append not contiguous: %v", seqs)
					}
					want[s] = string(es[j].Payload)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	total := 0
	for i := range perWriter {
		total += writers * (1 + i%3)
	}
	require.Len(t, want, total)
	require.Equal(t, uint64(total), l.LastSeq())

	check := func(l *Log) {
		got := replayAll(t, l, 1)
		require.Len(t, got, total)
		for i, e := range got {
			if i > 0 {
				require.Greater(t, e.Seq, got[i-1].Seq)
			}
			require.Equal(t, want[e.Seq], string(e.Payload), "seq %d", e.Seq)
		}
	}
	check(l)
	st, err := l.Stats()
	require.NoError(t, err)
	require.Equal(t, total, st.Entries)
	require.NoError(t, l.Close())
	check(openTest(t, path, testOptions()))
}

func assertNoError(t *testing.T, err error) bool {
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}

// Requests that queue while a group commit is being written all go into
// the next single transaction (one block).
func TestGroupCommitOneTransaction(t *testing.T) {
	l := openTest(t, "", testOptions())
	h := holdFirstCommit(l)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, err := l.Append(context.Background(), ent("a", "t", "first"))
		assertNoError(t, err)
	}()
	waitFor(t, h.enqueued)
	waitFor(t, h.inCommit) // the writer holds the first append in its transaction
	const n = 10
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := l.Append(context.Background(), ent("a", "t", fmt.Sprint(i)), ent("a", "t", fmt.Sprint(i)))
			assertNoError(t, err)
		}()
	}
	for range n {
		waitFor(t, h.enqueued)
	}
	close(h.release)
	wg.Wait()
	require.Equal(t, []int{1, 2 * n}, h.batches)
	st, err := l.Stats()
	require.NoError(t, err)
	require.Equal(t, 2, st.Blocks)
	require.Equal(t, 2*n+1, st.Entries)
}

func waitFor(t *testing.T, c <-chan struct{}) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second): // a deadline for a broken test
		t.Fatal("timed out")
	}
}

// An Append whose ctx ends while it waits in the queue returns ctx.Err()
// and is not written.
func TestAppendCancelledBeforeWrite(t *testing.T) {
	l := openTest(t, "", testOptions())
	enqueued := make(chan struct{}, 10)
	inCommit := make(chan struct{})
	release := make(chan struct{})
	first := true
	l.hookEnqueued = func() { enqueued <- struct{}{} }
	l.hookBeforeCommit = func(int) {
		if first {
			first = false
			close(inCommit)
			<-release
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := l.Append(context.Background(), ent("a", "t", "kept"))
		done <- err
	}()
	waitFor(t, enqueued)
	waitFor(t, inCommit)

	ctx, cancel := context.WithCancel(context.Background())
	cancelled := make(chan error, 1)
	go func() {
		_, err := l.Append(ctx, ent("a", "t", "dropped"))
		cancelled <- err
	}()
	waitFor(t, enqueued)
	cancel()
	require.ErrorIs(t, <-cancelled, context.Canceled)
	close(release)
	require.NoError(t, <-done)

	_, err := l.Append(ctx, ent("a", "t", "late"))
	require.ErrorIs(t, err, context.Canceled)

	seqs := appendT(t, l, ent("a", "t", "after"))
	require.Equal(t, []uint64{2}, seqs)
	got := replayAll(t, l, 1)
	require.Len(t, got, 2)
	require.Equal(t, "kept", string(got[0].Payload))
	require.Equal(t, "after", string(got[1].Payload))
}

func TestCommitErrors(t *testing.T) {
	l := openTest(t, "", testOptions())
	ctx := context.Background()
	err := l.Commit(ctx, 1)
	require.ErrorIs(t, err, ErrUnknownSeq)
	require.ErrorContains(t, err, "seq 1")
	s := appendT(t, l, intent("a", "t", "x"), ent("a", "t", "y"))
	require.ErrorIs(t, l.Commit(ctx, 0), ErrUnknownSeq)
	require.NoError(t, l.Commit(ctx, s[1]), "committing a plain entry is a no-op")
	require.NoError(t, l.Commit(ctx, s[0]))
	require.NoError(t, l.Commit(ctx, s[0]), "committing twice is a no-op")
	un, err := l.Uncommitted()
	require.NoError(t, err)
	require.Empty(t, un)
}

// An entry that closes an intent commits it in its own transaction: the
// intent is open until the entry is durable and closed once it is, across
// a reopen, even when both are in one append.
func TestAnEntryClosesItsIntent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fano.db")
	l := openTest(t, path, testOptions())
	s := appendT(t, l, intent("a", "request", "1"), intent("a", "request", "2"))
	answer := func(closes uint64) Entry {
		e := ent("a", "answer", fmt.Sprint(closes))
		e.Closes = closes
		return e
	}
	appendT(t, l, answer(s[0]))
	own := l.LastSeq() + 1 // an intent and its answer in one append
	appendT(t, l, intent("a", "request", "3"), answer(own))
	un, err := l.Uncommitted()
	require.NoError(t, err)
	require.Equal(t, []uint64{s[1]}, seqsOf(un))
	require.NoError(t, l.Close())

	l = openTest(t, path, testOptions())
	un, err = l.Uncommitted()
	require.NoError(t, err)
	require.Equal(t, []uint64{s[1]}, seqsOf(un))
	require.Empty(t, replayAll(t, l, 0)[2].Closes, "Closes is not read back")
}

// An entry may only close a seq below its own. A bad one fails its append
// alone, takes no seq, and closes nothing, even in a group commit beside
// good appends.
func TestAnEntryClosingALaterSeqFailsItsAppendAlone(t *testing.T) {
	l := openTest(t, "", testOptions())
	s := appendT(t, l, intent("a", "request", "open"))
	h := holdFirstCommit(l)
	hold := l.AppendAsync(ent("a", "t", "held"))
	waitFor(t, h.enqueued)
	waitFor(t, h.inCommit) // the next three share one transaction
	bad := ent("a", "answer", "bad")
	bad.Closes = s[0] + 4 // its own seq, were it written
	before := l.AppendAsync(ent("a", "t", "before"))
	waitFor(t, h.enqueued)
	failed := l.AppendAsync(ent("a", "t", "beside"), bad)
	waitFor(t, h.enqueued)
	after := l.AppendAsync(ent("a", "t", "after"))
	waitFor(t, h.enqueued)
	close(h.release)
	_, err := hold()
	require.NoError(t, err)
	_, err = failed()
	require.ErrorIs(t, err, ErrUnknownSeq)
	require.ErrorContains(t, err, "closes seq 5")
	b, err := before()
	require.NoError(t, err)
	a, err := after()
	require.NoError(t, err)
	require.Equal(t, []uint64{s[0] + 2, s[0] + 3}, append(b, a...), "the failed append took no seq")
	require.Equal(t, []int{1, 2}, h.batches)
	un, err := l.Uncommitted()
	require.NoError(t, err)
	require.Equal(t, []uint64{s[0]}, seqsOf(un))
	var payloads []string
	for _, e := range replayAll(t, l, 0) {
		payloads = append(payloads, string(e.Payload))
	}
	require.Equal(t, []string{"open", "held", "before", "after"}, payloads)
}

func TestUncommittedOrderAcrossBlocks(t *testing.T) {
	l := openTest(t, "", testOptions())
	ctx := context.Background()
	a := appendT(t, l, intent("a", "t", "1"), ent("a", "t", "2"), intent("b", "t", "3"))
	b := appendT(t, l, intent("a", "t", "4"), intent("a", "t", "5"))
	require.NoError(t, l.Commit(ctx, b[0]))
	un, err := l.Uncommitted()
	require.NoError(t, err)
	require.Equal(t, []uint64{a[0], a[2], b[1]}, seqsOf(un))
	st, err := l.Stats()
	require.NoError(t, err)
	require.Equal(t, 3, st.Uncommitted)
}

func TestReplayStopsOnCallbackError(t *testing.T) {
	l := openTest(t, "", testOptions())
	appendT(t, l, ent("a", "t", "1"), ent("a", "t", "2"), ent("a", "t", "3"))
	boom := errors.New("boom")
	var seen []uint64
	err := l.Replay(1, func(e Entry) error {
		seen = append(seen, e.Seq)
		if e.Seq == 2 {
			return boom
		}
		return nil
	})
	require.ErrorIs(t, err, boom)
	require.ErrorContains(t, err, "seq 2")
	require.Equal(t, []uint64{1, 2}, seen)
}

// Replay reads in chunks; the callback may append to the same log.
func TestReplayChunksAndReentrantCallback(t *testing.T) {
	l := openTest(t, "", testOptions())
	for i := range 30 {
		es := make([]Entry, 100)
		for j := range es {
			es[j] = ent("a", "t", fmt.Sprint(i*100+j))
		}
		appendT(t, l, es...)
	}
	n := 0
	require.NoError(t, l.Replay(1, func(e Entry) error {
		n++
		require.Equal(t, fmt.Sprint(e.Seq-1), string(e.Payload))
		if e.Seq%1000 == 0 {
			_, err := l.Append(context.Background(), ent("b", "t", "during replay"))
			return err
		}
		return nil
	}))
	require.Equal(t, 3000, n, "replay stops at the LastSeq of its start")
	require.Equal(t, uint64(3003), l.LastSeq())
}

func TestCheckpoints(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fano.db")
	l := openTest(t, path, testOptions())
	_, ok, err := l.LoadCheckpoint("scheduler")
	require.NoError(t, err)
	require.False(t, ok)
	require.ErrorIs(t, l.SaveCheckpoint("scheduler", 1, nil), ErrUnknownSeq)

	appendT(t, l, ent("scheduler", "t", "1"), ent("allocator", "t", "2"), ent("allocator", "t", "3"))
	require.NoError(t, l.SaveCheckpoint("scheduler", 1, []byte("s1")))
	require.NoError(t, l.SaveCheckpoint("allocator", 2, []byte("a2")))
	require.NoError(t, l.SaveCheckpoint("allocator", 3, []byte("a3")))
	require.NoError(t, l.Close())

	l = openTest(t, path, testOptions())
	cp, ok, err := l.LoadCheckpoint("allocator")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, Checkpoint{Owner: "allocator", Seq: 3, Time: testTime, Snapshot: []byte("a3")}, cp)
	all, err := l.Checkpoints()
	require.NoError(t, err)
	require.Len(t, all, 2)
	require.Equal(t, "allocator", all[0].Owner)
	require.Equal(t, "scheduler", all[1].Owner)
	st, err := l.Stats()
	require.NoError(t, err)
	require.Equal(t, 2, st.Checkpoints)
	require.Equal(t, Checkpoint{Owner: "scheduler", Seq: 1, Time: testTime}, st.OldestCheckpoint)
	require.Equal(t, uint64(3), st.LastSeq)
	require.Positive(t, st.Bytes)
}

// Checkpoint, compact, reopen: covered entries and committed intents are
// gone; uncovered entries, owners without checkpoint and uncommitted
// intents remain; LastSeq continues.
func TestCheckpointCompactReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fano.db")
	l := openTest(t, path, testOptions())
	ctx := context.Background()
	appendT(t, l, ent("a", "t", "a1"), ent("a", "t", "a2"))    // 1 2: block fully covered
	appendT(t, l, ent("a", "t", "a3"), ent("b", "t", "b1"))    // 3 4: block partly covered
	appendT(t, l, intent("a", "t", "i1"))                      // 5: uncommitted, covered
	i2 := appendT(t, l, intent("a", "t", "i2"))                // 6: committed, not covered
	appendT(t, l, ent("a", "t", "a4"), intent("c", "t", "i3")) // 7 8: not covered; i3 committed below
	require.NoError(t, l.Commit(ctx, i2[0], 8))
	require.NoError(t, l.SaveCheckpoint("a", 5, []byte("A@5")))

	res, err := l.Compact()
	require.NoError(t, err)
	require.Equal(t, CompactResult{BlocksDeleted: 2, BlocksRewritten: 2, EntriesDeleted: 5, EntriesKept: 3}, res)
	require.NoError(t, l.Close())

	l = openTest(t, path, testOptions())
	require.Equal(t, uint64(8), l.LastSeq())
	got := replayAll(t, l, 6)
	require.Equal(t, []uint64{7}, seqsOf(got))
	require.Equal(t, "a4", string(got[0].Payload))
	got = replayAll(t, l, 1)
	require.Equal(t, []uint64{4, 5, 7}, seqsOf(got))
	require.Equal(t, []string{"b1", "i1", "a4"}, []string{string(got[0].Payload), string(got[1].Payload), string(got[2].Payload)})
	un, err := l.Uncommitted()
	require.NoError(t, err)
	require.Equal(t, []uint64{5}, seqsOf(un))
	require.Equal(t, []uint64{9}, appendT(t, l, ent("a", "t", "a5")))

	// A second compaction has nothing to do.
	res, err = l.Compact()
	require.NoError(t, err)
	require.Equal(t, CompactResult{EntriesKept: 4}, res)
}

// Compacting every entry away keeps LastSeq across reopen.
func TestCompactEverything(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fano.db")
	l := openTest(t, path, testOptions())
	for range 5 {
		appendT(t, l, ent("a", "t", "x"), ent("a", "t", "y"))
	}
	require.NoError(t, l.SaveCheckpoint("a", 10, nil))
	res, err := l.Compact()
	require.NoError(t, err)
	require.Equal(t, 5, res.BlocksDeleted)
	require.Equal(t, 10, res.EntriesDeleted)
	require.NoError(t, l.Close())

	l = openTest(t, path, testOptions())
	require.Equal(t, uint64(10), l.LastSeq())
	require.Empty(t, replayAll(t, l, 0))
	require.Equal(t, []uint64{11}, appendT(t, l, ent("a", "t", "z")))
}

// Compact runs alongside appends.
func TestCompactOnline(t *testing.T) {
	l := openTest(t, "", testOptions())
	for range 2000 {
		appendT(t, l, ent("a", "t", "old"), ent("b", "t", "keep"))
	}
	require.NoError(t, l.SaveCheckpoint("a", l.LastSeq(), nil))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 200 {
			_, err := l.Append(context.Background(), ent("a", "t", "new"))
			if !assertNoError(t, err) {
				return
			}
		}
	}()
	res, err := l.Compact()
	require.NoError(t, err)
	wg.Wait()
	require.Equal(t, 2000, res.EntriesDeleted)
	require.Equal(t, 2000, res.BlocksRewritten)
	got := replayAll(t, l, 1)
	require.Len(t, got, 2200)
	for _, e := range got {
		require.NotEqual(t, "old", string(e.Payload))
	}
}

// CompactFile writes a fresh, smaller file with the same content.
func TestCompactFile(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "fano.db"), filepath.Join(dir, "fano.db.compact")
	l, err := Open(src, testOptions())
	require.NoError(t, err)
	big := make([]byte, 4000)
	for range 500 {
		appendT(t, l, Entry{Owner: "a", Type: "t", Payload: big})
	}
	appendT(t, l, ent("b", "t", "keep"), intent("a", "t", "pending"))
	require.NoError(t, l.SaveCheckpoint("a", 500, []byte("snap")))
	_, err = l.Compact()
	require.NoError(t, err)

	err = CompactFile(src, dst)
	require.ErrorIs(t, err, ErrLocked, "the source is open")
	require.ErrorContains(t, err, src)
	require.NoError(t, l.Close())

	require.NoError(t, CompactFile(src, dst))
	require.ErrorContains(t, CompactFile(src, dst), "already exists")
	srcInfo, err := os.Stat(src)
	require.NoError(t, err)
	dstInfo, err := os.Stat(dst)
	require.NoError(t, err)
	require.Less(t, dstInfo.Size(), srcInfo.Size()/4)

	l = openTest(t, dst, testOptions())
	require.Equal(t, uint64(502), l.LastSeq())
	require.Equal(t, []uint64{501, 502}, seqsOf(replayAll(t, l, 0)))
	un, err := l.Uncommitted()
	require.NoError(t, err)
	require.Equal(t, []uint64{502}, seqsOf(un))
	cp, ok, err := l.LoadCheckpoint("a")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "snap", string(cp.Snapshot))
	require.Equal(t, []uint64{503}, appendT(t, l, ent("a", "t", "next")))
}

// corruptBlock rewrites the block stored under key first with change
// applied to a copy of its value, opening the bbolt file directly.
func corruptBlock(t *testing.T, path string, first uint64, change func(v []byte) []byte) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketBlocks).Bucket(be64(first))
		require.NotNil(t, b, "block %d", first)
		v := b.Get(blockValueKey)
		require.NotNil(t, v, "block %d", first)
		return b.Put(blockValueKey, change(append([]byte(nil), v...)))
	}))
	require.NoError(t, db.Close())
}

// threeBlocks writes blocks 1 (1-3), 4 (4-6) and 7 (7-9) and closes the log.
func threeBlocks(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "fano.db")
	l, err := Open(path, testOptions())
	require.NoError(t, err)
	for i := range 3 {
		appendT(t, l, ent("a", "t", fmt.Sprintf("payload-%d-one", i)),
			intent("a", "t", fmt.Sprintf("payload-%d-two", i)),
			ent("a", "t", fmt.Sprintf("payload-%d-three", i)))
	}
	require.NoError(t, l.Close())
	return path
}

func TestCorruptionFlippedByte(t *testing.T) {
	path := threeBlocks(t)
	// Flip a byte in the payload of the second entry of block 4 (seq 5).
	corruptBlock(t, path, 4, func(v []byte) []byte {
		n := int(v[0]) + 4 // first entry's size (< 256 bytes)
		v[n+30] ^= 0x55
		return v
	})
	l := openTest(t, path, testOptions())
	err := l.Replay(1, func(Entry) error { return nil })
	var ce *CorruptError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, uint64(5), ce.Seq)
	require.Contains(t, ce.Reason, "crc mismatch")
	require.Contains(t, ce.Reason, "block 4")

	_, err = l.Uncommitted()
	require.ErrorAs(t, err, &ce)
	require.Equal(t, uint64(5), ce.Seq)

	_, err = l.Compact()
	require.ErrorAs(t, err, &ce)

	// The damage does not hide the entries after it from a later Replay.
	require.Equal(t, []uint64{7, 8, 9}, seqsOf(replayAll(t, l, 7)))
}

func TestCorruptionTruncatedAndBadLength(t *testing.T) {
	path := threeBlocks(t)
	corruptBlock(t, path, 1, func(v []byte) []byte { return v[:len(v)-7] })
	corruptBlock(t, path, 4, func(v []byte) []byte {
		v[0], v[1], v[2], v[3] = 3, 0, 0, 0 // length too small
		return v
	})
	l := openTest(t, path, testOptions())
	var ce *CorruptError
	err := l.Replay(1, func(Entry) error { return nil })
	require.ErrorAs(t, err, &ce)
	require.Equal(t, uint64(3), ce.Seq)
	require.Contains(t, ce.Reason, "truncated")
	err = l.Replay(4, func(Entry) error { return nil })
	require.ErrorAs(t, err, &ce)
	require.Equal(t, uint64(4), ce.Seq)
	require.Contains(t, ce.Reason, "bad length")
	_, err = l.Stats()
	require.ErrorAs(t, err, &ce)
}

// Damage in the newest block is found by Open, which reads it to learn
// the last seq.
func TestCorruptionLastBlockFailsOpen(t *testing.T) {
	path := threeBlocks(t)
	corruptBlock(t, path, 7, func(v []byte) []byte {
		v[len(v)-1] ^= 1
		return v
	})
	_, err := Open(path, testOptions())
	var ce *CorruptError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, uint64(9), ce.Seq)
}

func TestNotADatabase(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.WriteFile(text, []byte("these are notes, not a database\n"), 0o600))
	_, err := Open(text, testOptions())
	require.ErrorIs(t, err, ErrNotDatabase)
	require.ErrorContains(t, err, text)

	for _, size := range []int{1, 4096, 4097, 64 << 10} {
		junkFile := filepath.Join(dir, fmt.Sprintf("junk-%d.bin", size))
		junk := make([]byte, size)
		for i := range junk {
			junk[i] = byte(i*7 + 3)
		}
		require.NoError(t, os.WriteFile(junkFile, junk, 0o600))
		_, err = Open(junkFile, testOptions())
		require.ErrorIs(t, err, ErrNotDatabase, "size %d", size)
		require.ErrorContains(t, err, junkFile)
	}

	// A bbolt database of some other program.
	other := filepath.Join(dir, "other.db")
	db, err := bolt.Open(other, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucket([]byte("users"))
		return err
	}))
	require.NoError(t, db.Close())
	_, err = Open(other, testOptions())
	require.ErrorIs(t, err, ErrNotDatabase)
	require.ErrorContains(t, err, other)

	_, err = Open(dir, testOptions())
	require.ErrorIs(t, err, ErrNotDatabase)
	require.ErrorContains(t, CompactFile(text, filepath.Join(dir, "x.db")), text)
}

func TestClosed(t *testing.T) {
	l, err := Open(filepath.Join(t.TempDir(), "fano.db"), testOptions())
	require.NoError(t, err)
	appendT(t, l, ent("a", "t", "x"))
	require.NoError(t, l.Close())
	require.NoError(t, l.Close())
	ctx := context.Background()
	_, err = l.Append(ctx, ent("a", "t", "y"))
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, l.Commit(ctx, 1), ErrClosed)
	require.ErrorIs(t, l.SaveCheckpoint("a", 1, nil), ErrClosed)
	require.ErrorIs(t, l.Replay(1, func(Entry) error { return nil }), ErrClosed)
	_, err = l.Uncommitted()
	require.ErrorIs(t, err, ErrClosed)
	_, err = l.Stats()
	require.ErrorIs(t, err, ErrClosed)
	_, err = l.Compact()
	require.ErrorIs(t, err, ErrClosed)
	_, _, err = l.LoadCheckpoint("a")
	require.ErrorIs(t, err, ErrClosed)
	require.Equal(t, uint64(1), l.LastSeq())
}

// Close waits for appends already queued: each either succeeded (and is
// in the file) or got ErrClosed.
func TestCloseDuringAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fano.db")
	l, err := Open(path, testOptions())
	require.NoError(t, err)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		acked []uint64
	)
	started := make(chan struct{}, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				seqs, err := l.Append(context.Background(), ent("a", "t", "x"))
				if errors.Is(err, ErrClosed) {
					return
				}
				if !assertNoError(t, err) {
					return
				}
				mu.Lock()
				acked = append(acked, seqs...)
				mu.Unlock()
				if i == 10 {
					started <- struct{}{}
				}
			}
		}()
	}
	for range 8 {
		waitFor(t, started)
	}
	require.NoError(t, l.Close())
	wg.Wait()

	l = openTest(t, path, testOptions())
	got := seqsOf(replayAll(t, l, 1))
	sort.Slice(acked, func(i, j int) bool { return acked[i] < acked[j] })
	require.Equal(t, acked, got)
}

func TestAppendValidation(t *testing.T) {
	l := openTest(t, "", testOptions())
	seqs, err := l.Append(context.Background())
	require.NoError(t, err)
	require.Empty(t, seqs)
	_, err = l.Append(context.Background(), Entry{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)})
	require.ErrorContains(t, err, "outside years")
	require.Error(t, l.SaveCheckpoint("", 0, nil))
}

// Stats reads checkpoints by their headers: a large snapshot is neither
// copied nor checked, so a heartbeat's Stats costs little however large
// the owners' states grow; Size reads the file's size alone.
func TestStatsSkipsSnapshots(t *testing.T) {
	l := openTest(t, "", testOptions())
	appendT(t, l, ent("explorer", "t", "1"), ent("scheduler", "t", "2"))
	big := bytes.Repeat([]byte("x"), 8<<20)
	require.NoError(t, l.SaveCheckpoint("explorer", 1, big))
	require.NoError(t, l.SaveCheckpoint("scheduler", 2, []byte("s")))
	st, err := l.Stats() // warm the bbolt pages
	require.NoError(t, err)
	require.Equal(t, 2, st.Checkpoints)
	require.Equal(t, Checkpoint{Owner: "explorer", Seq: 1, Time: testTime}, st.OldestCheckpoint)

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = l.Stats()
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "Stats copied a snapshot")

	size, err := l.Size()
	require.NoError(t, err)
	require.Equal(t, st.Bytes, size)
}

// Stats counts the entries of a block once and remembers them; the count
// stays right as blocks are added and as compaction rewrites and deletes
// them (a reopened log, with nothing remembered, agrees).
func TestStatsCountsStayRightAcrossCompaction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fano.db")
	l := openTest(t, path, testOptions())
	// Blocks mixing two owners, so that compaction rewrites some.
	for i := range 20 {
		appendT(t, l, ent("a", "t", fmt.Sprint(i)), ent("b", "t", fmt.Sprint(i)), ent("a", "t", fmt.Sprint(i)))
	}
	cached := func() (sum int) {
		counts, _ := l.blockCounts.snapshot()
		for _, n := range counts {
			sum += n
		}
		return sum
	}
	require.Equal(t, 60, cached(), "the writer counts its blocks: Stats reads none back")
	st, err := l.Stats()
	require.NoError(t, err)
	require.Equal(t, 60, st.Entries)
	appendT(t, l, ent("b", "t", "more"))
	st, err = l.Stats()
	require.NoError(t, err)
	require.Equal(t, 61, st.Entries, "a new block is counted")

	require.NoError(t, l.SaveCheckpoint("a", 45, []byte("a")))
	res, err := l.Compact()
	require.NoError(t, err)
	require.Positive(t, res.EntriesDeleted)
	// What compaction read is counted: the next Stats reads no block
	// (at a million items, reading them all put gigabytes of the file in
	// memory at each heartbeat after a compaction).
	require.Equal(t, 61-res.EntriesDeleted, cached(), "every block left is counted")
	st, err = l.Stats()
	require.NoError(t, err)
	require.Equal(t, 61-res.EntriesDeleted, st.Entries)
	require.NoError(t, l.Close())

	l = openTest(t, path, testOptions())
	fresh, err := l.Stats()
	require.NoError(t, err)
	require.Equal(t, fresh.Entries, st.Entries)
	require.Equal(t, fresh.Blocks, st.Blocks)
}
