package actors

import (
	"context"

	"fano/wal"
)

// Store is what the actors need of their write-ahead log, declared here
// where it is used (as hashicorp/raft declares LogStore and StableStore):
// app passes the bbolt-backed *wal.Log; tests that are not about storage
// may pass the in-memory fano/internal/memwal.Log. TestStoreContract runs
// the same cases against both, so they cannot drift.
type Store interface {
	Journal
	CheckpointStore
	ArchiveStore
	// Stats gives the figures the metrics and compaction read; Compact
	// drops what checkpoints cover.
	Stats() (wal.Stats, error)
	// Size is Stats().Bytes without the walk of the log: what the
	// compaction check after every checkpoint reads.
	Size() (int64, error)
	Compact() (wal.CompactResult, error)
}

// Journal is the log proper: events and intents in sequence order.
type Journal interface {
	// Append makes entries durable and returns their contiguous seqs;
	// AppendAsync queues them in call order and returns a wait for them.
	// What is queued before is never durable after: a crash leaves a
	// prefix of the queue (the journal's batch.queued relies on it).
	// The entries' payloads are the caller's again once Append or the
	// wait returns: the journal reuses their buffers.
	Append(ctx context.Context, entries ...wal.Entry) ([]uint64, error)
	AppendAsync(entries ...wal.Entry) (wait func() ([]uint64, error))
	// Commit closes intents; Uncommitted lists the open ones in seq order.
	Commit(ctx context.Context, seqs ...uint64) error
	Uncommitted() ([]wal.Entry, error)
	// Replay calls fn for every entry from seq on, up to LastSeq.
	Replay(from uint64, fn func(wal.Entry) error) error
	LastSeq() uint64
}

// CheckpointStore keeps one snapshot per owner, with the seq it covers.
type CheckpointStore interface {
	SaveCheckpoint(owner string, seq uint64, snapshot []byte) error
	LoadCheckpoint(owner string) (wal.Checkpoint, bool, error)
}

// ArchiveStore keeps records out of memory but on disk (finished tasks).
type ArchiveStore interface {
	Archive(ctx context.Context, items map[string][]byte) error
	Archived(key string) ([]byte, bool, error)
}

var _ Store = (*wal.Log)(nil)
