package wal

import (
	"context"
	"errors"
	"fmt"
	"sort"

	bolt "go.etcd.io/bbolt"
)

// bucketArchive holds records that left the caller's memory but must stay
// on disk (finished tasks, say). Compact never touches it.
var bucketArchive = []byte("archive")

// Archive stores each value under its key, replacing what the key held;
// durable on return. Keys are the caller's; the archive is not part of
// the log, so checkpoints and compaction leave it alone. Safe for
// concurrent use; it is written outside the group commit, so callers
// should archive in batches.
func (l *Log) Archive(ctx context.Context, items map[string][]byte) error {
	if len(items) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if l.isClosed() {
		return ErrClosed
	}
	keys := make([]string, 0, len(items))
	for k := range items {
		if k == "" {
			return errors.New("wal: archive: empty key")
		}
		keys = append(keys, k)
	}
	sort.Strings(keys) // sequential inserts: fewer page splits
	err := l.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketArchive)
		if err != nil {
			return err
		}
		for _, k := range keys {
			if err := b.Put([]byte(k), items[k]); err != nil {
				return fmt.Errorf("key %q: %w", k, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("wal: archive %d records in %s: %w", len(items), l.path, err)
	}
	return nil
}

// Archived returns the value archived under key.
func (l *Log) Archived(key string) ([]byte, bool, error) {
	var out []byte
	err := l.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketArchive)
		if b == nil {
			return nil
		}
		if v := b.Get([]byte(key)); v != nil {
			out = append([]byte(nil), v...)
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("wal: archived %q: %w", key, err)
	}
	return out, out != nil, nil
}
