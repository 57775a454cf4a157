package wal

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// denseLog writes a log of many small entries (about 12 MiB, thousands of
// leaves under branch pages), the shape of a long fano run.
func denseLog(t *testing.T, path string) {
	t.Helper()
	l := openTest(t, path, testOptions())
	payload := strings.Repeat("event ", 50)
	for i := 0; i < 2000; i++ {
		batch := make([]Entry, 20)
		for j := range batch {
			batch[j] = ent("scheduler", "task_started", fmt.Sprintf("%d/%d %s", i, j, payload))
		}
		appendT(t, l, batch...)
	}
	require.NoError(t, l.Close())
}

// withFreelist rewrites path once through bbolt with its freelist synced,
// as a bbolt tool would: the meta page then names a freelist page.
func withFreelist(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoFreelistSync: false})
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists([]byte("touched-by-a-tool"))
		return err
	}))
	require.NoError(t, db.Close())
}

// pagesOf returns the reachable pages of the file by type, and its newest
// meta, from fano's own walk of a whole file.
func pagesOf(t *testing.T, path string) (byType map[uint16][]uint64, m boltMeta) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	fi, err := f.Stat()
	require.NoError(t, err)
	buf := make([]byte, 2*defaultPageSize)
	_, err = f.ReadAt(buf, 0)
	require.NoError(t, err)
	m0, err := parseMeta(buf)
	require.NoError(t, err)
	m1, err := parseMeta(buf[m0.pageSize:])
	require.NoError(t, err)
	m = m0
	if m1.txid > m0.txid {
		m = m1
	}
	w, problem := walkTree(f, m, fi.Size())
	require.Empty(t, problem)
	byType = map[uint16][]uint64{}
	hdr := make([]byte, pageHeaderSize)
	for id := range w.seen {
		_, err := f.ReadAt(hdr, int64(id)*int64(m.pageSize))
		require.NoError(t, err)
		if binary.LittleEndian.Uint64(hdr) != id {
			continue // an overflow page
		}
		typ := binary.LittleEndian.Uint16(hdr[8:])
		byType[typ] = append(byType[typ], id)
	}
	for _, ids := range byType {
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	}
	return byType, m
}

// xorAt flips bits of the byte at off.
func xorAt(t *testing.T, path string, off int64, mask byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	b := make([]byte, 1)
	_, err = f.ReadAt(b, off)
	require.NoError(t, err)
	b[0] ^= mask
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
}

// Damage inside a real, full-size file (meta pages, the freelist, branch
// and leaf page headers, a cut in the middle of a page) is one clear
// error from a writable and a read-only open, never a crash (bbolt's own
// check runs in a goroutine where a bad page faults the process), and the
// file keeps its bytes.
func TestDamagedPagesAreOneClearError(t *testing.T) {
	dir := t.TempDir()
	whole := filepath.Join(dir, "whole.db")
	denseLog(t, whole)
	// A copy touched by a bbolt tool has a freelist page (fano's own files
	// do not: bbolt rebuilds the freelist by walking the tree at open).
	tool := filepath.Join(dir, "tool.db")
	fi, err := os.Stat(whole)
	require.NoError(t, err)
	require.Greater(t, fi.Size(), int64(10<<20))
	copyFile(t, whole, tool, fi.Size())
	withFreelist(t, tool)
	for _, p := range []string{whole, tool} {
		l := openTest(t, p, Options{ReadOnly: true})
		require.Len(t, replayAll(t, l, 1), 40000)
		require.NoError(t, l.Close())
	}

	byType, m := pagesOf(t, whole)
	require.NotEmpty(t, byType[branchPageFlag], "the file must have branch pages")
	require.NotEmpty(t, byType[leafPageFlag])
	require.Equal(t, uint64(noFreelistPgid), m.freelist)
	_, tm := pagesOf(t, tool)
	require.NotEqual(t, uint64(noFreelistPgid), tm.freelist, "the tool's file must have a freelist page")
	ps := int64(m.pageSize)
	tfi, err := os.Stat(tool)
	require.NoError(t, err)
	newest := int64(m.txid % 2) // the meta page bbolt would use
	branch := int64(byType[branchPageFlag][len(byType[branchPageFlag])/2])
	leaf := int64(byType[leafPageFlag][len(byType[leafPageFlag])/2])
	root := int64(m.root)

	cases := []struct {
		name string
		base string
		size int64
		off  int64 // byte to flip; -1: cut instead
		mask byte
		cut  int64
		want string
	}{
		{name: "newest meta txid", off: newest*ps + pageHeaderSize + 48, mask: 0x01, want: "meta page"},
		{name: "older meta magic", off: (1-newest)*ps + pageHeaderSize, mask: 0xff, want: "meta page"},
		{name: "freelist type", base: tool, off: int64(tm.freelist)*ps + 8, mask: 0x30, want: "freelist"},
		{name: "freelist count", base: tool, off: int64(tm.freelist)*ps + 11, mask: 0x7f, want: "freelist"},
		{name: "root page id", off: root * ps, mask: 0x04, want: "carries the id"},
		{name: "branch page type", off: branch*ps + 8, mask: 0x20, want: "page type"},
		{name: "branch child id", off: branch*ps + pageHeaderSize + 8 + 5, mask: 0x40, want: "outside pages"},
		{name: "branch count", off: branch*ps + 11, mask: 0x40, want: "do not fit"},
		{name: "leaf page id", off: leaf * ps, mask: 0x10, want: "carries the id"},
		{name: "leaf type", off: leaf*ps + 8, mask: 0x12, want: "page type"},
		{name: "leaf overflow", off: leaf*ps + 15, mask: 0x20, want: "more pages"},
		{name: "leaf entry offset", off: leaf*ps + pageHeaderSize + 4 + 2, mask: 0x70, want: "past the page"},
		{name: "cut mid-page", off: -1, cut: fi.Size() - ps - ps/2, want: "cut short"},
		{name: "cut mid-page early", off: -1, cut: leaf*ps + ps/3, want: "cut short"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base, size := whole, fi.Size()
			if c.base != "" {
				base, size = c.base, tfi.Size()
			}
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".db")
			if c.off >= 0 {
				copyFile(t, base, path, size)
				xorAt(t, path, c.off, c.mask)
			} else {
				copyFile(t, base, path, c.cut)
			}
			before := fileSum(t, path)
			// Writable first: that is the open where bbolt walks the tree
			// in a goroutine of its own.
			for _, ro := range []bool{false, true} {
				opts := testOptions()
				opts.ReadOnly = ro
				l, err := Open(path, opts)
				if err == nil {
					_ = l.Close()
				}
				require.ErrorIs(t, err, ErrDamaged, "read-only %v", ro)
				require.ErrorContains(t, err, path)
				require.ErrorContains(t, err, c.want)
				require.Equal(t, 1, strings.Count(err.Error(), "is damaged"), err.Error())
			}
			require.Equal(t, before, fileSum(t, path), "a damaged file is left as it is")

			// What the error says to do never crashes either: salvage copies
			// what the tree still reaches into a file that opens. (Below a
			// damaged root or branch page it reaches nothing.)
			dst := path + ".salvaged"
			rep, err := Salvage(path, dst)
			require.NoError(t, err)
			l := openTest(t, dst, testOptions())
			require.Len(t, replayAll(t, l, 1), rep.Entries)
			require.NoError(t, l.Close())
			require.Equal(t, before, fileSum(t, path), "salvage never writes its source")
		})
	}
}
