package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// CompactResult counts what Compact did.
type CompactResult struct {
	BlocksDeleted   int // blocks whose every entry was dropped
	BlocksRewritten int // blocks rewritten without their dropped entries
	EntriesDeleted  int
	EntriesKept     int
}

// compactChunkBlocks bounds the blocks one Compact transaction visits, so
// appends are never held up for long.
const compactChunkBlocks = 1024

// compactChunkBytes bounds the bytes of blocks one Compact transaction
// reads through the mapping: its pages stay resident until the chunk is
// done (then they are released), and chunks of 1,024 blocks of a fast run
// held 100 MB and more of the file in the process's memory.
const compactChunkBytes = 8 << 20

// Compact drops, online, the entries no recovery needs any more:
//
//   - an entry covered by its owner's checkpoint (Seq <= checkpoint Seq),
//   - an intent that has been committed (whatever its owner's checkpoint).
//
// Uncommitted intents are always kept, and so are the entries of owners
// with no checkpoint. Blocks left empty are deleted; blocks partly dropped
// are rewritten with their remaining entries. LastSeq is preserved. The
// freed pages are reused by later appends; the file only shrinks with
// CompactFile. Compact works in short transactions alongside appends.
func (l *Log) Compact() (CompactResult, error) {
	// A Stats walk that overlaps is not kept (the blocks change under it);
	// what compaction read of every block is: the next Stats need not read
	// the whole log again through the mapping (gigabytes of file pages
	// resident at a million items).
	l.blockCounts.compacting()
	counts := map[uint64]int{}
	defer func() { l.blockCounts.reset(counts) }()
	var res CompactResult
	covered := map[string]uint64{}
	read := 0 // a large run's checkpoints are tens of megabytes
	if err := l.view(func(tx *bolt.Tx) error {
		// Checked, not copied: only what each covers is needed.
		check := func(k string, v []byte) (Checkpoint, error) {
			read += len(v)
			return checkCheckpoint(k, v)
		}
		return eachCheckpoint(tx, check, func(cp Checkpoint) error {
			covered[cp.Owner] = cp.Seq
			return nil
		})
	}); err != nil {
		return res, err
	}
	l.noteTouched(read)
	var start uint64
	for {
		next, done, err := l.compactChunk(covered, start, &res, counts)
		if err != nil {
			clear(counts) // what the failed chunk left is not known
			return res, err
		}
		if done {
			return res, nil
		}
		start = next
	}
}

// compactChunk compacts up to compactChunkBlocks blocks with keys >= start
// in one write transaction. It returns the key to continue from and
// whether the last block has been visited.
// counts gets each visited block's entries left, once the chunk commits.
func (l *Log) compactChunk(covered map[string]uint64, start uint64, res *CompactResult, counts map[uint64]int) (next uint64, done bool, err error) {
	if l.isClosed() {
		return 0, false, ErrClosed
	}
	defer func() {
		if r := recover(); r != nil {
			err = &CorruptError{Seq: start, Reason: fmt.Sprintf("%s: bbolt panicked compacting: %v", l.path, r)}
		}
	}()
	var chunk CompactResult
	left := map[uint64]int{} // entries each visited block keeps
	read := 0                // bytes of blocks read through the mapping
	err = l.db.Update(func(tx *bolt.Tx) error {
		blocks := tx.Bucket(bucketBlocks)
		intents := tx.Bucket(bucketIntents)
		c := blocks.Cursor()
		lastKey, _ := c.Last()
		type change struct {
			key []byte
			val []byte // nil: delete
		}
		var (
			changes  []change
			keep     []bool
			metaLast uint64
		)
		visited := 0
		k, _ := c.Seek(be64(start))
		for ; k != nil && visited < compactChunkBlocks && read < compactChunkBytes; k, _ = c.Next() {
			visited++
			first, v, err := blockAt(blocks, k)
			if err != nil {
				return err
			}
			read += len(v)
			keep = keep[:0]
			dropped, last, keptBytes := 0, uint64(0), 0
			err = parseBlock(first, v, func(e *parsedEntry, raw []byte) error {
				last = e.seq
				var drop bool
				if e.intent {
					drop = intents.Get(be64(e.seq)) == nil // committed
				} else if cs, ok := covered[string(e.owner)]; ok && e.seq <= cs {
					drop = true
				}
				keep = append(keep, !drop)
				if drop {
					dropped++
				} else {
					keptBytes += len(raw)
				}
				return nil
			})
			if err != nil {
				return err
			}
			chunk.EntriesDeleted += dropped
			chunk.EntriesKept += len(keep) - dropped
			if dropped < len(keep) {
				left[first] = len(keep) - dropped
			}
			if dropped == 0 {
				continue
			}
			if string(k) == string(lastKey) {
				metaLast = last
			}
			ch := change{key: append([]byte(nil), k...)}
			if dropped < len(keep) {
				ch.val = make([]byte, 0, keptBytes)
				off := 0
				for _, kept := range keep {
					n := int(binary.LittleEndian.Uint32(v[off:])) + 4
					if kept {
						ch.val = append(ch.val, v[off:off+n]...)
					}
					off += n
				}
				chunk.BlocksRewritten++
			} else {
				chunk.BlocksDeleted++
			}
			changes = append(changes, ch)
		}
		if k == nil {
			done = true
		} else {
			next = binary.BigEndian.Uint64(k)
		}
		for _, ch := range changes {
			var err error
			if ch.val == nil {
				err = blocks.DeleteBucket(ch.key)
			} else {
				err = rewriteBlock(blocks, ch.key, ch.val)
			}
			if err != nil {
				return err
			}
		}
		if metaLast > 0 {
			meta := tx.Bucket(bucketMeta)
			if old := meta.Get(keyLastSeq); len(old) == 8 && binary.BigEndian.Uint64(old) > metaLast {
				metaLast = binary.BigEndian.Uint64(old)
			}
			if err := meta.Put(keyLastSeq, be64(metaLast)); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return 0, false, ErrClosed
	}
	var ce *CorruptError
	if err != nil && !errors.As(err, &ce) {
		return 0, false, fmt.Errorf("wal: compact %s from seq %d: %w", l.path, start, err)
	}
	if err != nil {
		return 0, false, err
	}
	if l.chunkCompacted != nil {
		l.chunkCompacted()
	}
	// Released after every chunk, not only once its blocks' bytes add up
	// to ReleasePagesEvery: bbolt reads more pages than the blocks' (the
	// tree's, deleted buckets') and a compaction runs beside appends for
	// tens of seconds at a million items.
	if l.opts.ReleasePagesEvery > 0 {
		l.touched.Store(0)
		l.ReleasePages()
	}
	for k, n := range left {
		counts[k] = n
	}
	res.BlocksDeleted += chunk.BlocksDeleted
	res.BlocksRewritten += chunk.BlocksRewritten
	res.EntriesDeleted += chunk.EntriesDeleted
	res.EntriesKept += chunk.EntriesKept
	return next, done, nil
}

// CompactFile copies the log in src into a new file dst (which must not
// exist), page by page with bbolt's compaction, so dst holds only live
// data: online Compact frees pages but never shrinks the file. src must
// not be open (its lock is taken shared, waiting at most 1 s). On success
// the caller replaces src with dst (rename) while no process has it open.
func CompactFile(src, dst string) (err error) {
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("wal: compact %s: destination %s already exists", src, dst)
	}
	if fi, err := os.Stat(src); err != nil {
		return fmt.Errorf("wal: compact %s: %w", src, err)
	} else if fi.IsDir() {
		return &notDatabaseError{path: src, why: "it is a directory"}
	}
	sdb, err := bolt.Open(src, 0o600, &bolt.Options{ReadOnly: true, Timeout: defaultLockTimeout})
	if err != nil {
		switch {
		case errors.Is(err, berrors.ErrTimeout):
			return fmt.Errorf("wal: compact: %w", &lockedError{path: src})
		case isNotBolt(err):
			return &notDatabaseError{path: src, why: fmt.Sprintf("not a bbolt file (%v)", err)}
		}
		return fmt.Errorf("wal: compact %s: %w", src, err)
	}
	defer func() {
		if cerr := sdb.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("wal: compact %s: %w", src, cerr)
		}
	}()
	if err := sdb.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil || string(meta.Get(keyFormat)) != string(formatName) {
			return &notDatabaseError{path: src, why: "no WAL format marker"}
		}
		return nil
	}); err != nil {
		return err
	}
	ddb, err := bolt.Open(dst, 0o600, &bolt.Options{
		Timeout:        defaultLockTimeout,
		NoFreelistSync: true,
		FreelistType:   bolt.FreelistMapType,
	})
	if err != nil {
		return fmt.Errorf("wal: compact %s: create %s: %w", src, dst, err)
	}
	cerr := bolt.Compact(ddb, sdb, 64<<20)
	if err := ddb.Close(); err != nil && cerr == nil {
		cerr = err
	}
	if cerr != nil {
		_ = os.Remove(dst)
		return fmt.Errorf("wal: compact %s into %s: %w", src, dst, cerr)
	}
	return nil
}
