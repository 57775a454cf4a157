package wal

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testTime is the fixed clock of tests that need one.
var testTime = time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)

func testOptions() Options {
	return Options{NoSync: true, Now: func() time.Time { return testTime }}
}

// openTest opens a log in path (a fresh file in t.TempDir() if empty) and
// closes it when the test ends.
func openTest(t *testing.T, path string, opts Options) *Log {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "fano.db")
	}
	l, err := Open(path, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func appendT(t *testing.T, l *Log, es ...Entry) []uint64 {
	t.Helper()
	seqs, err := l.Append(context.Background(), es...)
	require.NoError(t, err)
	require.Len(t, seqs, len(es))
	return seqs
}

func replayAll(t *testing.T, l *Log, from uint64) []Entry {
	t.Helper()
	var out []Entry
	require.NoError(t, l.Replay(from, func(e Entry) error {
		out = append(out, e)
		return nil
	}))
	return out
}

func seqsOf(es []Entry) []uint64 {
	out := make([]uint64, len(es))
	for i, e := range es {
		out[i] = e.Seq
	}
	return out
}

func ent(owner, typ, payload string) Entry {
	return Entry{Owner: owner, Type: typ, Payload: []byte(payload)}
}

func intent(owner, typ, payload string) Entry {
	return Entry{Owner: owner, Type: typ, Payload: []byte(payload), Intent: true}
}

// heldCommit holds the writer in its first transaction until release is
// closed, so what is appended meanwhile shares the next group commit.
type heldCommit struct {
	enqueued chan struct{} // one a request queued
	inCommit chan struct{} // closed once the writer holds the first
	release  chan struct{}
	batches  []int // entries of each transaction; read once the writes returned
}

func holdFirstCommit(l *Log) *heldCommit {
	h := &heldCommit{enqueued: make(chan struct{}, 100), inCommit: make(chan struct{}), release: make(chan struct{})}
	l.hookEnqueued = func() { h.enqueued <- struct{}{} }
	l.hookBeforeCommit = func(n int) {
		h.batches = append(h.batches, n) // only the writer goroutine calls this
		if len(h.batches) == 1 {
			close(h.inCommit)
			<-h.release
		}
	}
	return h
}
