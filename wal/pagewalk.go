package wal

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"slices"
)

// bbolt's page layout (go.etcd.io/bbolt/internal/common): a 16-byte
// header (page id, flags, element count, overflow pages), then a table of
// 16-byte elements whose key and value offsets are relative to the
// element itself.
const (
	branchPageFlag   = 0x01
	leafPageFlag     = 0x02
	freelistPageFlag = 0x10
	bucketLeafFlag   = 0x01
	elementSize      = 16
	bucketHeaderSize = 16 // a bucket value: root page id, sequence
	maxTreeDepth     = 64 // far deeper than any real file: a loop or garbage
)

// pageWalk reads, with plain file reads and never through a mapping, the
// pages bbolt will touch when it opens the file: the freelist page and
// every branch and leaf page reachable from the root bucket, nested
// buckets included. Each page is read once (its first page and element
// table; values in overflow pages are only bounds-checked), so the walk
// is bounded by the file's page count. bbolt checks the same tree in a
// goroutine of its own where a bad page id faults or panics the whole
// process; here it is an answer.
type pageWalk struct {
	r        io.ReaderAt
	pageSize int64
	hwm      uint64 // pages in use according to the meta page
	size     int64
	seen     map[uint64]bool
}

// walkPages returns what is wrong with the pages meta m reaches, or "".
func walkPages(r io.ReaderAt, m boltMeta, size int64) string {
	_, problem := walkTree(r, m, size)
	return problem
}

// walkTree is walkPages that also returns the walk (its seen pages).
func walkTree(r io.ReaderAt, m boltMeta, size int64) (*pageWalk, string) {
	w := &pageWalk{r: r, pageSize: int64(m.pageSize), hwm: m.pgid, size: size, seen: map[uint64]bool{}}
	if m.freelist != noFreelistPgid {
		if p := w.freelist(m.freelist); p != "" {
			return w, p
		}
	}
	if m.root < 2 {
		return w, fmt.Sprintf("the meta page gives root page %d, which is a meta page", m.root)
	}
	return w, w.page(m.root, 0, "the root bucket")
}

// span reads the header of page id and the first n bytes of it (at
// least the header), checking that the page and its overflow pages lie
// inside the page count and the file.
func (w *pageWalk) span(id uint64, n int64, what string) (buf []byte, flags uint16, count int, pages uint64, problem string) {
	if id < 2 || id >= w.hwm {
		return nil, 0, 0, 0, fmt.Sprintf("%s names page %d, outside pages 2..%d", what, id, w.hwm-1)
	}
	off := int64(id) * w.pageSize
	hdr := make([]byte, pageHeaderSize)
	if _, err := w.r.ReadAt(hdr, off); err != nil {
		return nil, 0, 0, 0, fmt.Sprintf("page %d (%s): read: %v", id, what, err)
	}
	le := binary.LittleEndian
	if got := le.Uint64(hdr[0:]); got != id {
		return nil, 0, 0, 0, fmt.Sprintf("page %d (%s) carries the id %d in its header", id, what, got)
	}
	flags, count = le.Uint16(hdr[8:]), int(le.Uint16(hdr[10:]))
	overflow := uint64(le.Uint32(hdr[12:]))
	pages = 1 + overflow
	if id+overflow >= w.hwm || id+overflow < id {
		return nil, 0, 0, 0, fmt.Sprintf("page %d (%s) says it runs over %d more pages, past the %d pages in use", id, what, overflow, w.hwm)
	}
	if end := int64(id+pages) * w.pageSize; end > w.size || end <= 0 {
		return nil, 0, 0, 0, fmt.Sprintf("page %d (%s) ends at byte %d, past the end of the %d-byte file", id, what, end, w.size)
	}
	n = max(n, pageHeaderSize)
	if n > int64(pages)*w.pageSize {
		return nil, 0, 0, 0, fmt.Sprintf("page %d (%s): %d entries do not fit in its %d bytes", id, what, count, int64(pages)*w.pageSize)
	}
	buf = make([]byte, n)
	if _, err := w.r.ReadAt(buf, off); err != nil {
		return nil, 0, 0, 0, fmt.Sprintf("page %d (%s): read: %v", id, what, err)
	}
	return buf, flags, count, pages, ""
}

func (w *pageWalk) freelist(id uint64) string {
	const what = "the freelist"
	_, flags, count, _, problem := w.span(id, pageHeaderSize, what)
	if problem != "" {
		return problem
	}
	if flags != freelistPageFlag {
		return fmt.Sprintf("page %d (%s) has page type %#x, not a freelist page", id, what, flags)
	}
	first := int64(pageHeaderSize)
	if count == 0xFFFF { // the real count is the first id slot
		buf, _, _, _, problem := w.span(id, pageHeaderSize+8, what)
		if problem != "" {
			return problem
		}
		c := binary.LittleEndian.Uint64(buf[pageHeaderSize:])
		if c > w.hwm {
			return fmt.Sprintf("page %d (%s) lists %d free pages, more than the %d in use", id, what, c, w.hwm)
		}
		count, first = int(c), pageHeaderSize+8
	}
	buf, _, _, _, problem := w.span(id, first+int64(count)*8, what)
	if problem != "" {
		return problem
	}
	for i := 0; i < count; i++ {
		if free := binary.LittleEndian.Uint64(buf[first+int64(i)*8:]); free < 2 || free >= w.hwm {
			return fmt.Sprintf("page %d (%s) lists page %d as free, outside pages 2..%d", id, what, free, w.hwm-1)
		}
	}
	w.mark(id, 1)
	return ""
}

func (w *pageWalk) mark(id, pages uint64) {
	for i := uint64(0); i < pages; i++ {
		w.seen[id+i] = true
	}
}

// page checks a branch or leaf page and what it reaches.
func (w *pageWalk) page(id uint64, depth int, what string) string {
	if depth > maxTreeDepth {
		return fmt.Sprintf("%s is more than %d levels deep at page %d (a loop of pages?)", what, maxTreeDepth, id)
	}
	if w.seen[id] {
		return fmt.Sprintf("page %d (%s) is reached twice", id, what)
	}
	_, _, count, _, problem := w.span(id, pageHeaderSize, what)
	if problem != "" {
		return problem
	}
	buf, flags, _, pages, problem := w.span(id, pageHeaderSize+int64(count)*elementSize, what)
	if problem != "" {
		return problem
	}
	w.mark(id, pages)
	spanLen := int64(pages) * w.pageSize
	le := binary.LittleEndian
	switch flags {
	case branchPageFlag:
		for i := 0; i < count; i++ {
			el := int64(pageHeaderSize + i*elementSize)
			pos, ksize := int64(le.Uint32(buf[el:])), int64(le.Uint32(buf[el+4:]))
			if el+pos+ksize > spanLen {
				return fmt.Sprintf("page %d (%s, branch): key %d lies past the page", id, what, i)
			}
			if p := w.page(le.Uint64(buf[el+8:]), depth+1, what); p != "" {
				return p
			}
		}
		return ""
	case leafPageFlag:
		return w.leaf(buf, count, spanLen, depth, what, fmt.Sprintf("page %d", id), func(off, n int64) ([]byte, error) {
			v := make([]byte, n)
			_, err := w.r.ReadAt(v, int64(id)*w.pageSize+off)
			return v, err
		})
	default:
		return fmt.Sprintf("page %d (%s) has page type %#x where a branch or leaf page belongs", id, what, flags)
	}
}

// leaf checks a leaf's element table (buf holds the header and the table;
// read fetches bytes of the page by offset) and the buckets it holds.
func (w *pageWalk) leaf(buf []byte, count int, spanLen int64, depth int, what, where string, read func(off, n int64) ([]byte, error)) string {
	le := binary.LittleEndian
	for i := 0; i < count; i++ {
		el := int64(pageHeaderSize + i*elementSize)
		flags := le.Uint32(buf[el:])
		pos, ksize, vsize := int64(le.Uint32(buf[el+4:])), int64(le.Uint32(buf[el+8:])), int64(le.Uint32(buf[el+12:]))
		if el+pos+ksize+vsize > spanLen {
			return fmt.Sprintf("%s (%s, leaf): entry %d lies past the page", where, what, i)
		}
		if flags&bucketLeafFlag == 0 {
			continue
		}
		if vsize < bucketHeaderSize {
			return fmt.Sprintf("%s (%s, leaf): bucket entry %d is %d bytes, shorter than a bucket header", where, what, i, vsize)
		}
		v, err := read(el+pos+ksize, vsize)
		if err != nil {
			return fmt.Sprintf("%s (%s): read: %v", where, what, err)
		}
		key, err := read(el+pos, min(ksize, 64))
		if err != nil {
			return fmt.Sprintf("%s (%s): read: %v", where, what, err)
		}
		child := fmt.Sprintf("bucket %q", key)
		if root := le.Uint64(v); root != 0 {
			if p := w.page(root, depth+1, child); p != "" {
				return p
			}
			continue
		}
		if p := w.inline(v[bucketHeaderSize:], depth+1, child); p != "" {
			return p
		}
	}
	return ""
}

// inline checks a bucket small enough to live inside its parent's value:
// a leaf page with no page id of its own.
func (w *pageWalk) inline(page []byte, depth int, what string) string {
	if depth > maxTreeDepth {
		return fmt.Sprintf("%s is more than %d levels deep", what, maxTreeDepth)
	}
	if len(page) < pageHeaderSize {
		return fmt.Sprintf("%s: its inline page is %d bytes", what, len(page))
	}
	le := binary.LittleEndian
	flags, count := le.Uint16(page[8:]), int(le.Uint16(page[10:]))
	if flags != leafPageFlag {
		return fmt.Sprintf("%s: its inline page has page type %#x, not a leaf", what, flags)
	}
	if pageHeaderSize+count*elementSize > len(page) {
		return fmt.Sprintf("%s: %d entries do not fit in its %d-byte inline page", what, count, len(page))
	}
	return w.leaf(page, count, int64(len(page)), depth, what, "inline page", func(off, n int64) ([]byte, error) {
		if off < 0 || off+n > int64(len(page)) {
			return nil, io.ErrUnexpectedEOF
		}
		return page[off : off+n], nil
	})
}

// PageKinds lists the first pages of the file's tree by kind ("branch",
// "leaf", "freelist") as the open check reaches them, with the page size
// and the meta page (0 or 1) bbolt uses: for tools and damage tests. The
// file is only read.
func PageKinds(path string) (pageSize int64, newestMeta int, kinds map[string][]uint64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("wal: pages of %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, nil, fmt.Errorf("wal: pages of %s: %w", path, err)
	}
	buf := make([]byte, pageHeaderSize+metaSize)
	_, _ = f.ReadAt(buf, 0)
	m0, err := parseMeta(buf)
	if err != nil {
		return 0, 0, nil, &DamagedError{Path: path, Problem: fmt.Sprintf("meta page 0 is unreadable (%v)", err)}
	}
	_, _ = f.ReadAt(buf, int64(m0.pageSize))
	m1, err := parseMeta(buf)
	if err != nil {
		return 0, 0, nil, &DamagedError{Path: path, Problem: fmt.Sprintf("meta page 1 is unreadable (%v)", err)}
	}
	m := m0
	if m1.txid > m0.txid {
		m, newestMeta = m1, 1
	}
	w, problem := walkTree(f, m, fi.Size())
	if problem != "" {
		return 0, 0, nil, &DamagedError{Path: path, Problem: problem}
	}
	kinds = map[string][]uint64{}
	hdr := make([]byte, pageHeaderSize)
	for id := range w.seen {
		if _, err := f.ReadAt(hdr, int64(id)*int64(m.pageSize)); err != nil {
			return 0, 0, nil, fmt.Errorf("wal: pages of %s: %w", path, err)
		}
		if binary.LittleEndian.Uint64(hdr) != id {
			continue // an overflow page
		}
		kind := map[uint16]string{branchPageFlag: "branch", leafPageFlag: "leaf", freelistPageFlag: "freelist"}[binary.LittleEndian.Uint16(hdr[8:])]
		kinds[kind] = append(kinds[kind], id)
	}
	for _, ids := range kinds {
		slices.Sort(ids)
	}
	return int64(m.pageSize), newestMeta, kinds, nil
}
