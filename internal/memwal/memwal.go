// Package memwal is an in-memory stand-in for the bbolt-backed wal.Log,
// for tests whose subject is not storage (hashicorp/raft's InmemStore is
// the model). It keeps the wal.Log contract the actors rely on (seqs,
// intents, checkpoints, compaction, archive) and nothing survives Close:
// crash, recovery and kill tests keep the real file.
package memwal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"fano/wal"
)

// Log is an in-memory write-ahead log. Safe for concurrent use.
type Log struct {
	now func() time.Time

	mu          sync.Mutex
	closed      bool
	lastSeq     uint64
	blocks      [][]wal.Entry // one per append, like the file's group commits
	intents     map[uint64]bool
	checkpoints map[string]wal.Checkpoint
	archive     map[string][]byte
}

// New returns an empty log; now stamps entries with a zero Time and
// checkpoints (nil: time.Now).
func New(now func() time.Time) *Log {
	if now == nil {
		now = time.Now
	}
	return &Log{now: now, intents: map[uint64]bool{}, checkpoints: map[string]wal.Checkpoint{}, archive: map[string][]byte{}}
}

// Close makes every later call return wal.ErrClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	return nil
}

// LastSeq is the last seq assigned.
func (l *Log) LastSeq() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastSeq
}

// stamp is how the file reads a time back: nanoseconds, UTC.
func stamp(t time.Time) time.Time { return time.Unix(0, t.UnixNano()).UTC() }

// Append stores copies of entries and returns their seqs.
func (l *Log) Append(ctx context.Context, entries ...wal.Entry) ([]uint64, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return l.append(entries)
}

// AppendAsync appends at once (memory needs no fsync to wait for); wait
// returns the outcome.
func (l *Log) AppendAsync(entries ...wal.Entry) (wait func() ([]uint64, error)) {
	if len(entries) == 0 {
		return func() ([]uint64, error) { return nil, nil }
	}
	seqs, err := l.append(entries)
	return func() ([]uint64, error) { return seqs, err }
}

func (l *Log) append(entries []wal.Entry) ([]uint64, error) {
	now := l.now()
	block := make([]wal.Entry, len(entries))
	for i, e := range entries {
		if e.Time.IsZero() {
			e.Time = now
		} else if y := e.Time.UTC().Year(); y < 1 || y > 9999 {
			return nil, fmt.Errorf("wal: append: entry %d (%s): time %v outside years 1-9999", i, e.Type, e.Time)
		}
		e.Time = stamp(e.Time)
		e.Payload = slices.Clone(e.Payload)
		block[i] = e
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, wal.ErrClosed
	}
	for i, e := range block {
		if e.Closes > l.lastSeq+uint64(i) {
			return nil, fmt.Errorf("wal: entry %d (%s) closes seq %d: %w (not below its own seq %d)", i, e.Type, e.Closes, wal.ErrUnknownSeq, l.lastSeq+uint64(i)+1)
		}
	}
	seqs := make([]uint64, len(block))
	for i := range block {
		l.lastSeq++
		block[i].Seq = l.lastSeq
		seqs[i] = l.lastSeq
		if block[i].Intent {
			l.intents[l.lastSeq] = true
		}
		if c := block[i].Closes; c > 0 {
			delete(l.intents, c)
			block[i].Closes = 0 // not read back
		}
		// As in the file: the record exists exactly when the entry does,
		// and Replay does not carry it.
		if a := block[i].Archive; a != nil {
			l.archive[a.Key] = slices.Clone(a.Value)
			block[i].Archive = nil
		}
	}
	l.blocks = append(l.blocks, block)
	return seqs, nil
}

// Commit closes intents; a seq never assigned commits nothing and
// returns an error wrapping wal.ErrUnknownSeq.
func (l *Log) Commit(ctx context.Context, seqs ...uint64) error {
	if len(seqs) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return wal.ErrClosed
	}
	for _, s := range seqs {
		if s == 0 || s > l.lastSeq {
			return fmt.Errorf("wal: commit seq %d: %w (last seq %d)", s, wal.ErrUnknownSeq, l.lastSeq)
		}
	}
	for _, s := range seqs {
		delete(l.intents, s)
	}
	return nil
}

// Uncommitted returns the open intents in seq order.
func (l *Log) Uncommitted() ([]wal.Entry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, wal.ErrClosed
	}
	var out []wal.Entry
	for _, b := range l.blocks {
		for _, e := range b {
			if l.intents[e.Seq] {
				out = append(out, copyEntry(e))
			}
		}
	}
	return out, nil
}

func copyEntry(e wal.Entry) wal.Entry {
	e.Payload = slices.Clone(e.Payload)
	return e
}

// Replay calls fn, outside the lock, for every entry from seq from up to
// the LastSeq at the time of the call.
func (l *Log) Replay(from uint64, fn func(wal.Entry) error) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return wal.ErrClosed
	}
	var chunk []wal.Entry
	for _, b := range l.blocks {
		for _, e := range b {
			if e.Seq >= from {
				chunk = append(chunk, copyEntry(e))
			}
		}
	}
	l.mu.Unlock()
	for _, e := range chunk {
		if err := fn(e); err != nil {
			return fmt.Errorf("wal: replay stopped at seq %d: %w", e.Seq, err)
		}
	}
	return nil
}

// SaveCheckpoint replaces owner's checkpoint.
func (l *Log) SaveCheckpoint(owner string, seq uint64, snapshot []byte) error {
	if owner == "" {
		return errors.New("wal: save checkpoint: empty owner")
	}
	at := stamp(l.now())
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return wal.ErrClosed
	}
	if seq > l.lastSeq {
		return fmt.Errorf("wal: checkpoint %q at seq %d: %w (last seq %d)", owner, seq, wal.ErrUnknownSeq, l.lastSeq)
	}
	l.checkpoints[owner] = wal.Checkpoint{Owner: owner, Seq: seq, Time: at, Snapshot: slices.Clone(snapshot)}
	return nil
}

// LoadCheckpoint returns owner's checkpoint; false if it has none.
func (l *Log) LoadCheckpoint(owner string) (wal.Checkpoint, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return wal.Checkpoint{}, false, wal.ErrClosed
	}
	cp, ok := l.checkpoints[owner]
	cp.Snapshot = slices.Clone(cp.Snapshot)
	return cp, ok, nil
}

// Archive stores each value under its key, replacing what it held.
func (l *Log) Archive(ctx context.Context, items map[string][]byte) error {
	if len(items) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return wal.ErrClosed
	}
	for k := range items {
		if k == "" {
			return errors.New("wal: archive: empty key")
		}
	}
	for k, v := range items {
		l.archive[k] = slices.Clone(v)
	}
	return nil
}

// Archived returns the value archived under key.
func (l *Log) Archived(key string) ([]byte, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, false, wal.ErrClosed
	}
	v, ok := l.archive[key]
	return slices.Clone(v), ok, nil
}

// Size is Stats().Bytes.
func (l *Log) Size() (int64, error) {
	st, err := l.Stats()
	return st.Bytes, err
}

// Stats counts what the log holds; Bytes is the payloads' size (there is
// no file).
func (l *Log) Stats() (wal.Stats, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return wal.Stats{}, wal.ErrClosed
	}
	s := wal.Stats{LastSeq: l.lastSeq, Blocks: len(l.blocks), Uncommitted: len(l.intents), Checkpoints: len(l.checkpoints)}
	for _, b := range l.blocks {
		s.Entries += len(b)
		for _, e := range b {
			s.Bytes += int64(len(e.Payload))
		}
	}
	for _, cp := range l.checkpoints {
		if s.OldestCheckpoint.Owner == "" || cp.Seq < s.OldestCheckpoint.Seq ||
			(cp.Seq == s.OldestCheckpoint.Seq && cp.Owner < s.OldestCheckpoint.Owner) {
			cp.Snapshot = nil
			s.OldestCheckpoint = cp
		}
	}
	return s, nil
}

// Compact drops what wal.Log.Compact drops: entries covered by their
// owner's checkpoint and committed intents; open intents always stay.
func (l *Log) Compact() (wal.CompactResult, error) {
	var res wal.CompactResult
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return res, wal.ErrClosed
	}
	kept := l.blocks[:0]
	for _, b := range l.blocks {
		left := b[:0:0]
		for _, e := range b {
			cp, covered := l.checkpoints[e.Owner]
			drop := !l.intents[e.Seq] && ((covered && e.Seq <= cp.Seq) || e.Intent)
			if drop {
				res.EntriesDeleted++
			} else {
				res.EntriesKept++
				left = append(left, e)
			}
		}
		switch {
		case len(left) == 0:
			res.BlocksDeleted++
		case len(left) < len(b):
			res.BlocksRewritten++
			kept = append(kept, left)
		default:
			kept = append(kept, b)
		}
	}
	clear(l.blocks[len(kept):])
	l.blocks = kept
	return res, nil
}
