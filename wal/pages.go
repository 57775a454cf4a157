package wal

import (
	bolt "go.etcd.io/bbolt"
)

// defaultReleaseBytes is Options.ReleasePagesEvery's default.
const defaultReleaseBytes = 4 << 20

// The bbolt file is mapped into memory, and every page of it that a
// transaction reads (the B+tree path an append walks, every block a
// replay decodes, every page bbolt scans at open to rebuild its freelist)
// stays in the process's resident set until the kernel needs it back:
// the whole file after a recovery, and a growing share of it while fano
// writes. The pages are the file's, shared with the OS page cache; fano
// never writes through the mapping (bbolt writes with pwrite), so telling
// the kernel we do not need them (MADV_DONTNEED) loses nothing: the next
// read maps them again from the page cache, or reads the disk.

// noteTouched counts n bytes read or written through the mapping and
// drops the mapped pages once ReleasePagesEvery bytes were counted.
func (l *Log) noteTouched(n int) {
	every := l.opts.ReleasePagesEvery
	if every <= 0 || n <= 0 {
		return
	}
	if l.touched.Add(int64(n)) < int64(every) {
		return
	}
	l.touched.Store(0)
	l.ReleasePages()
}

// ReleasePages drops the file's pages from the process's resident memory
// (they stay in the OS page cache and are mapped again when read). It is
// safe at any time: a read transaction holds bbolt's mapping in place
// while the kernel is told. Errors change nothing and are not reported:
// the pages just stay resident.
func (l *Log) ReleasePages() {
	_ = l.view(func(tx *bolt.Tx) error {
		return dropMapped(l.db.Info().Data, tx.Size())
	})
}
