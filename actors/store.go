package actors

import (
	"context"

	"fano/wal"
)

// Store is what the actors need of their write-ahead log, declared here
// where it is used (as hashicorp/raft declares LogStore): app passes the
// bbolt-backed *wal.Log; tests that are not about storage may pass the
// in-memory fano/internal/memwal.Log. The contract test in
// store_contract_test.go runs the same cases against both.
type Store interface {
	// Append makes entries durable and returns their contiguous seqs;
	// AppendAsync queues them in call order and returns a wait for them.
	Append(ctx context.Context, entries ...wal.Entry) ([]uint64, error)
	AppendAsync(entries ...wal.Entry) (wait func() ([]uint64, error))
	// Commit closes intents; Uncommitted lists the open ones in seq order.
	Commit(ctx context.Context, seqs ...uint64) error
	Uncommitted() ([]wal.Entry, error)
	// Replay calls fn for every entry from seq on, up to LastSeq.
	Replay(from uint64, fn func(wal.Entry) error) error
	LastSeq() uint64
	// SaveCheckpoint stores owner's snapshot covering entries up to seq.
	SaveCheckpoint(owner string, seq uint64, snapshot []byte) error
	LoadCheckpoint(owner string) (wal.Checkpoint, bool, error)
	// Archive keeps records out of memory but on disk; Archived reads one.
	Archive(ctx context.Context, items map[string][]byte) error
	Archived(key string) ([]byte, bool, error)
	// Stats and Compact: the size figures and the dropping of what
	// checkpoints cover.
	Stats() (wal.Stats, error)
	Compact() (wal.CompactResult, error)
}

var _ Store = (*wal.Log)(nil)
