package wal

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
)

// scanBlocks reads every page of the file at path as bbolt lays them out,
// without the tree, and returns the entries of each block value it finds
// on a leaf page (a block's own bucket page, or one inline in the blocks
// bucket's leaf) whose seq want accepts. It finds the blocks a damaged
// branch page hides from a walk of the tree. Every entry returned passed
// its CRC; a page that does not parse is skipped. Freed pages can hold
// an older copy of a block: the caller asks only for seqs it has no copy
// of.
func scanBlocks(path string, want func(seq uint64) bool) (map[uint64]Entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := fi.Size()
	pageSize := int64(os.Getpagesize())
	meta := make([]byte, pageHeaderSize+metaSize)
	for _, off := range []int64{0, pageSize} {
		if _, err := f.ReadAt(meta, off); err == nil {
			if m, err := parseMeta(meta); err == nil {
				pageSize = int64(m.pageSize)
				break
			}
		}
	}
	found := map[uint64]Entry{}
	hdr := make([]byte, pageHeaderSize)
	le := binary.LittleEndian
	for id := int64(2); (id+1)*pageSize <= size; id++ {
		if _, err := f.ReadAt(hdr, id*pageSize); err != nil {
			return found, nil
		}
		if le.Uint64(hdr) != uint64(id) || le.Uint16(hdr[8:]) != leafPageFlag {
			continue // an overflow page, a branch, a freelist, garbage
		}
		n := (1 + int64(le.Uint32(hdr[12:]))) * pageSize
		if id*pageSize+n > size || n <= 0 {
			n = size - id*pageSize // cut short: what is there
		}
		page := make([]byte, n)
		if _, err := f.ReadAt(page, id*pageSize); err != nil && err != io.EOF {
			continue
		}
		scanLeaf(page, 0, want, found)
	}
	return found, nil
}

// scanLeaf takes the block values of one leaf page (and of the inline
// bucket pages in it).
func scanLeaf(page []byte, depth int, want func(uint64) bool, found map[uint64]Entry) {
	if len(page) < pageHeaderSize || depth > 2 {
		return
	}
	le := binary.LittleEndian
	count := int(le.Uint16(page[10:]))
	for i := 0; i < count; i++ {
		el := pageHeaderSize + i*elementSize
		if el+elementSize > len(page) {
			return
		}
		flags := le.Uint32(page[el:])
		pos, ksize, vsize := int(le.Uint32(page[el+4:])), int(le.Uint32(page[el+8:])), int(le.Uint32(page[el+12:]))
		start := el + pos
		if pos < 0 || ksize < 0 || vsize < 0 || start+ksize+vsize > len(page) || start+ksize+vsize < start {
			continue
		}
		key, val := page[start:start+ksize], page[start+ksize:start+ksize+vsize]
		switch {
		case flags&bucketLeafFlag != 0:
			if len(val) > bucketHeaderSize && le.Uint64(val) == 0 { // an inline bucket
				scanLeaf(val[bucketHeaderSize:], depth+1, want, found)
			}
		case bytes.Equal(key, blockValueKey):
			_ = decodeBlock(0, val, func(e Entry, _ []byte) error {
				if _, dup := found[e.Seq]; !dup && want(e.Seq) {
					e.Payload = bytes.Clone(e.Payload)
					found[e.Seq] = e
				}
				return nil
			})
		}
	}
}
