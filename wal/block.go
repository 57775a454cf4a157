package wal

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Blocks. Each group commit stores its entries, encoded back to back, as
// one value: bucket "blocks" holds one nested bucket per group commit,
// named by the big-endian seq of its first entry, holding that value under
// the single key blockValueKey.
//
// Why a nested bucket and not a plain key/value: bbolt keeps at least two
// keys on every leaf page and rewrites a whole leaf when a key is added to
// it, so with plain multi-kilobyte values each commit would rewrite up to
// three earlier blocks as well (about 20 pages per commit for 15 KB
// blocks). With one nested bucket per block, the parent's leaves hold only
// 24-byte bucket headers and each block is written once (about 7 pages).
// A block under 1 KB is stored inline in the parent's leaf by bbolt.

var blockValueKey = []byte{0}

// blocksFill is how full bbolt fills a leaf of the blocks bucket before it
// splits it. Blocks are only ever added at the end (their keys are
// increasing seqs), so a full leaf is never written into again: filled to
// the brim, the leaves are half as many as at bbolt's default of one half,
// and each commit reads and rewrites a smaller last leaf and parent.
const blocksFill = 1.0

// putBlock stores a new block.
func putBlock(blocks *bolt.Bucket, first uint64, v []byte) error {
	b, err := blocks.CreateBucket(be64(first))
	if err != nil {
		return fmt.Errorf("create block %d: %w", first, err)
	}
	return b.Put(blockValueKey, v)
}

// rewriteBlock replaces the entries of an existing block.
func rewriteBlock(blocks *bolt.Bucket, k, v []byte) error {
	return blocks.Bucket(k).Put(blockValueKey, v)
}

// blockAt returns the first seq and the value of the block named k (a key
// from a cursor on the blocks bucket). The value is valid only inside the
// transaction.
func blockAt(blocks *bolt.Bucket, k []byte) (uint64, []byte, error) {
	if len(k) != 8 {
		return 0, nil, &CorruptError{Reason: fmt.Sprintf("block key of %d bytes (%x)", len(k), k)}
	}
	first := binary.BigEndian.Uint64(k)
	b := blocks.Bucket(k)
	if b == nil {
		return first, nil, &CorruptError{Seq: first, Reason: fmt.Sprintf("block %d is not a bucket", first)}
	}
	v := b.Get(blockValueKey)
	if v == nil {
		return first, nil, &CorruptError{Seq: first, Reason: fmt.Sprintf("block %d has no value", first)}
	}
	return first, v, nil
}

// seekBlock positions c (a cursor on the blocks bucket) on the block that
// holds seq if any: the block with the largest first seq <= seq, else the
// first block. It returns the block's key, nil if there are no blocks.
func seekBlock(c *bolt.Cursor, seq uint64) []byte {
	k, _ := c.Seek(be64(seq))
	if k != nil && binary.BigEndian.Uint64(k) == seq {
		return k
	}
	var pk []byte
	if k == nil {
		pk, _ = c.Last()
	} else {
		pk, _ = c.Prev()
	}
	if pk != nil {
		return pk
	}
	k, _ = c.First()
	return k
}

// countEntries walks a block by its length fields.
func countEntries(first uint64, v []byte) (int, error) {
	n := 0
	for off := 0; off < len(v); n++ {
		if len(v)-off < entryMinSize {
			return 0, &CorruptError{Seq: first, Reason: fmt.Sprintf("block %d, offset %d: truncated", first, off)}
		}
		size := int(binary.LittleEndian.Uint32(v[off:])) + 4
		if size < entryMinSize || size > len(v)-off {
			return 0, &CorruptError{Seq: first, Reason: fmt.Sprintf("block %d, offset %d: bad length %d", first, off, size-4)}
		}
		off += size
	}
	if n == 0 {
		return 0, &CorruptError{Seq: first, Reason: fmt.Sprintf("block %d is empty", first)}
	}
	return n, nil
}

func be64(x uint64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), x)
}
