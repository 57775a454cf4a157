package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
)

// ErrDamaged is wrapped by the error Open returns for a file whose bbolt
// structure does not fit its size (cut short by a failed copy, a full
// disk or a truncation): bbolt would map it and fault on the missing
// pages, so Open refuses it before mapping and leaves it as it is.
var ErrDamaged = errors.New("wal: database file is damaged")

// DamagedError names the file and what is wrong with it.
type DamagedError struct {
	Path    string
	Problem string
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("wal: %s is damaged: %s; the file was left unchanged", e.Path, e.Problem)
}

func (e *DamagedError) Unwrap() error { return ErrDamaged }

// bbolt's on-disk meta page (go.etcd.io/bbolt/internal/common): a 16-byte
// page header, then magic, version, page size, flags, root bucket (root
// page id, sequence), freelist page id, page count (high-water mark),
// transaction id and an FNV-64a checksum of the fields before it. Written
// in the machine's byte order; every platform fano runs on is
// little-endian.
const (
	boltMagic        = 0xED0CDAED
	boltVersion      = 2
	pageHeaderSize   = 16
	metaSize         = 64
	metaChecksumFrom = 0  // offsets inside the meta, after the page header
	metaChecksumTo   = 56 // the checksum covers the fields before it
	noFreelistPgid   = 0xFFFFFFFFFFFFFFFF
	defaultPageSize  = 4096
)

type boltMeta struct {
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64 // pages in use: the file must hold at least this many
	txid     uint64
}

// parseMeta reads the meta page at the start of buf; the error says why it
// is not a valid one.
func parseMeta(buf []byte) (boltMeta, error) {
	if len(buf) < pageHeaderSize+metaSize {
		return boltMeta{}, fmt.Errorf("%d bytes, a meta page needs %d", len(buf), pageHeaderSize+metaSize)
	}
	m := buf[pageHeaderSize : pageHeaderSize+metaSize]
	le := binary.LittleEndian
	if le.Uint32(m[0:]) != boltMagic {
		return boltMeta{}, errors.New("no bbolt magic number")
	}
	if v := le.Uint32(m[4:]); v != boltVersion {
		return boltMeta{}, fmt.Errorf("bbolt version %d, want %d", v, boltVersion)
	}
	h := fnv.New64a()
	_, _ = h.Write(m[metaChecksumFrom:metaChecksumTo])
	if h.Sum64() != le.Uint64(m[56:]) {
		return boltMeta{}, errors.New("meta page checksum mismatch")
	}
	return boltMeta{
		pageSize: le.Uint32(m[8:]),
		root:     le.Uint64(m[16:]),
		freelist: le.Uint64(m[32:]),
		pgid:     le.Uint64(m[40:]),
		txid:     le.Uint64(m[48:]),
	}, nil
}

// CheckFile looks at an existing database file's two meta pages, without
// mapping it, and returns a *DamagedError when the newest valid meta asks
// for more pages than the file holds (or neither meta page is valid), an
// error wrapping ErrNotDatabase for a file that is not a bbolt file at
// all, and nil for a file that looks whole, an empty file or no file.
func CheckFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("wal: check %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("wal: check %s: %w", path, err)
	}
	if fi.IsDir() {
		return &notDatabaseError{path: path, why: "it is a directory"}
	}
	size := fi.Size()
	if size == 0 {
		return nil
	}
	read := func(off int64) []byte {
		buf := make([]byte, pageHeaderSize+metaSize)
		n, _ := f.ReadAt(buf, off)
		return buf[:n]
	}
	m0, err0 := parseMeta(read(0))
	pageSize := int64(defaultPageSize)
	if err0 == nil {
		pageSize = int64(m0.pageSize)
	}
	m1, err1 := parseMeta(read(pageSize))
	if err0 != nil && err1 != nil {
		// No bbolt magic anywhere: some other file. Magic but no valid
		// meta: a bbolt file whose header was damaged.
		if !hasMagic(read(0)) && !hasMagic(read(pageSize)) {
			return &notDatabaseError{path: path, why: fmt.Sprintf("not a bbolt file (%v)", err0)}
		}
		return &DamagedError{Path: path, Problem: fmt.Sprintf("both meta pages are unreadable (first: %v; second: %v)", err0, err1)}
	}
	if size < 2*pageSize {
		return &DamagedError{Path: path, Problem: fmt.Sprintf("the file is %d bytes, shorter than its two meta pages of %d bytes: it was cut short", size, pageSize)}
	}
	// bbolt would fall back to the other meta page, i.e. to an older
	// transaction, and silently drop the newest one: that is a decision
	// for a person (salvage or restore), never for an open.
	if err0 != nil {
		return &DamagedError{Path: path, Problem: fmt.Sprintf("meta page 0 is unreadable (%v)", err0)}
	}
	if err1 != nil {
		return &DamagedError{Path: path, Problem: fmt.Sprintf("meta page 1 is unreadable (%v)", err1)}
	}
	m := m0
	if m1.txid > m0.txid {
		m = m1
	}
	if m.pageSize < 512 || m.pageSize&(m.pageSize-1) != 0 {
		return &DamagedError{Path: path, Problem: fmt.Sprintf("the meta page gives an impossible page size %d", m.pageSize)}
	}
	want := int64(m.pgid) * int64(m.pageSize)
	if m.pgid < 4 || want/int64(m.pageSize) != int64(m.pgid) {
		return &DamagedError{Path: path, Problem: fmt.Sprintf("the meta page gives an impossible page count %d", m.pgid)}
	}
	if size < want {
		return &DamagedError{Path: path, Problem: fmt.Sprintf("the file is %d bytes but its meta page (transaction %d) says it holds %d pages of %d bytes (%d bytes): it was cut short",
			size, m.txid, m.pgid, m.pageSize, want)}
	}
	if m.root >= m.pgid || (m.freelist >= m.pgid && m.freelist != noFreelistPgid) {
		return &DamagedError{Path: path, Problem: fmt.Sprintf("the meta page points past its %d pages (root page %d, freelist page %d)", m.pgid, m.root, m.freelist)}
	}
	if problem := walkPages(f, m, size); problem != "" {
		return &DamagedError{Path: path, Problem: problem}
	}
	return nil
}

func hasMagic(buf []byte) bool {
	return len(buf) >= pageHeaderSize+4 && binary.LittleEndian.Uint32(buf[pageHeaderSize:]) == boltMagic
}
