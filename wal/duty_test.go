package wal

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The writer counts its group commits, the requests they carried, the
// time it spent writing them and the time it waited with nothing queued.
func TestDutyCountsCommitsAndTheirTime(t *testing.T) {
	l := openTest(t, "", testOptions())
	h := holdFirstCommit(l)
	idle := make(chan struct{}, 10)
	l.mu.Lock()
	l.hookIdle = func() {
		select {
		case idle <- struct{}{}:
		default:
		}
	}
	l.cond.Broadcast() // a writer waiting already waits again, through the hook
	l.mu.Unlock()
	waitFor(t, idle) // the writer waits for work from here on
	idleSince := time.Now()

	var wg sync.WaitGroup
	wg.Add(1)
	idleUntil := time.Now() // nothing is queued before this
	go func() {
		defer wg.Done()
		_, err := l.Append(context.Background(), ent("a", "t", "first"))
		assertNoError(t, err)
	}()
	waitFor(t, h.enqueued)
	waitFor(t, h.inCommit)
	heldSince := time.Now()
	const n = 3
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := l.Append(context.Background(), ent("a", "t", string(rune('a'+i))))
			assertNoError(t, err)
		}()
	}
	for range n {
		waitFor(t, h.enqueued)
	}
	held := time.Since(heldSince) // the first commit is still being written
	close(h.release)
	wg.Wait()
	require.NoError(t, l.Close()) // nothing more is written: the counts below are final

	d := l.Duty()
	require.Equal(t, int64(2), d.Commits, "the first append, then the three queued behind it in one")
	require.Equal(t, int64(1+n), d.Requests)
	require.GreaterOrEqual(t, d.Writing, held, "the held commit's time is writing time")
	require.GreaterOrEqual(t, d.Idle, idleUntil.Sub(idleSince), "waiting for the first append is idle time")
}

// Bytes counts what each commit wrote: its entries as encoded in the
// block, the archive records they carry, and checkpoints.
func TestDutyCountsTheBytesWritten(t *testing.T) {
	l := openTest(t, "", testOptions())
	// The writer stops after it answered the first commit: Duty shows the
	// commit once its Append returned, not once the writer went on.
	read := make(chan struct{})
	defer close(read)
	var first sync.Once
	l.hookAnswered = func() { first.Do(func() { <-read }) }
	a := ent("a", "t", "first payload")
	b := ent("a", "t", "second")
	b.Archive = &ArchiveRecord{Key: "done/1", Value: []byte("the archived record")}
	seqs, err := l.Append(context.Background(), a, b)
	require.NoError(t, err)
	a.Seq, a.Time = seqs[0], testTime
	b.Seq, b.Time = seqs[1], testTime
	block := len(encodeEntry(encodeEntry(nil, &a), &b))
	d := l.Duty()
	require.Equal(t, int64(block+len(b.Archive.Value)), d.Bytes, "the block and the archive record")
	require.Equal(t, int64(1), d.Commits)
	require.Equal(t, int64(1), d.Requests)
	read <- struct{}{} // the writer goes on

	snapshot := []byte("a checkpoint of some bytes")
	require.NoError(t, l.SaveCheckpoint("a", seqs[1], snapshot))
	cp := encodeCheckpoint(Checkpoint{Owner: "a", Seq: seqs[1], Time: testTime, Snapshot: snapshot})
	require.Equal(t, int64(block+len(b.Archive.Value)+len(cp)), l.Duty().Bytes, "and the checkpoint as stored")
}
