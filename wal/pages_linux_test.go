//go:build linux

package wal

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// mappedKB is how much of the file at path is resident in this process
// through its mappings (smaps "Rss"), in kB.
func mappedKB(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/smaps")
	require.NoError(t, err)
	kb, in := 0, false
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			in = len(f) >= 6 && f[5] == path
			continue
		}
		if in && len(f) >= 2 && f[0] == "Rss:" {
			n, err := strconv.Atoi(f[1])
			require.NoError(t, err)
			kb += n
		}
	}
	return kb
}

// fill appends about mb MB of entries and returns them as replayed.
func fill(t *testing.T, l *Log, mb int) []Entry {
	t.Helper()
	payload := bytes.Repeat([]byte("x"), 4000)
	for i := 0; i < mb; i++ {
		batch := make([]Entry, 256)
		for j := range batch {
			batch[j] = Entry{Owner: "o", Type: "t", Payload: payload}
		}
		_, err := l.Append(context.Background(), batch...)
		require.NoError(t, err)
	}
	return replayAll(t, l, 1)
}

// The pages of the file a replay read leave the resident set when
// ReleasePages says so, and what is read afterwards is the same.
func TestReleasePagesDropsMappedPages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fano.db")
	opts := testOptions()
	opts.ReleasePagesEvery = -1 // only by hand
	l := openTest(t, path, opts)
	before := fill(t, l, 16)
	require.Greater(t, mappedKB(t, path), 8<<10, "a replay of 16 MB maps most of the file")

	l.ReleasePages()
	require.Less(t, mappedKB(t, path), 1<<10)
	after := replayAll(t, l, 1)
	require.Equal(t, before, after)
}

// By default the log releases the pages itself as it writes and replays,
// and at open (bbolt reads every page of an existing file then).
func TestReleasePagesByDefault(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fano.db")
	l := openTest(t, path, testOptions())
	before := fill(t, l, 24)
	require.Less(t, mappedKB(t, path), 6<<10, "at most ReleasePagesEvery plus a little stays mapped")
	require.NoError(t, l.Close())

	l2 := openTest(t, path, testOptions())
	require.Less(t, mappedKB(t, path), 1<<10, "open releases what bbolt read")
	require.Equal(t, before, replayAll(t, l2, 1))
}

// A compaction reads every block through the mapping: it releases the
// pages as it goes, as appends and replays do, so the resident set does
// not grow to the file's size (a pipeline run's stop compacts).
func TestCompactReleasesPages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fano.db")
	l := openTest(t, path, testOptions())
	fill(t, l, 24)
	require.NoError(t, l.SaveCheckpoint("o", l.LastSeq()/2, []byte("snapshot")))
	l.ReleasePages()
	res, err := l.Compact()
	require.NoError(t, err)
	require.Greater(t, res.EntriesDeleted, 0)
	require.Less(t, mappedKB(t, path), 6<<10, "at most ReleasePagesEvery plus a little stays mapped")
}

// While it compacts, the log holds at most one chunk's bytes of the file
// resident (compactChunkBytes), however many blocks fit in it: a fast
// run's blocks are small, and 1,024 of them were 100 MB and more.
func TestCompactHoldsOneChunkResident(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fano.db")
	l := openTest(t, path, testOptions())
	fill(t, l, 40)
	require.NoError(t, l.SaveCheckpoint("o", l.LastSeq(), []byte("snapshot")))
	l.ReleasePages()
	peak, chunks := 0, 0
	l.chunkCompacted = func() {
		chunks++
		peak = max(peak, mappedKB(t, path))
	}
	res, err := l.Compact()
	require.NoError(t, err)
	require.Greater(t, res.EntriesDeleted, 0)
	require.Greater(t, chunks, 3, "40 MB of blocks take more than one chunk")
	require.Less(t, peak, (compactChunkBytes>>10)+(4<<10), "one chunk and the pages not yet released stay mapped")
}

// Compaction checks every checkpoint through the mapping: a large one
// (a million-item run's is tens of megabytes) does not stay resident.
func TestCompactReleasesCheckpointPages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fano.db")
	l := openTest(t, path, testOptions())
	fill(t, l, 1)
	require.NoError(t, l.SaveCheckpoint("o", l.LastSeq(), bytes.Repeat([]byte("s"), 20<<20)))
	require.NoError(t, l.Close())
	l = openTest(t, path, testOptions())
	require.Less(t, mappedKB(t, path), 1<<10)
	_, err := l.Compact()
	require.NoError(t, err)
	require.Less(t, mappedKB(t, path), 6<<10, "at most ReleasePagesEvery plus a little stays mapped")
}

// Saving a small checkpoint beside a large one has bbolt rewrite both in
// their page, reading the large one through the mapping: it does not
// stay resident after the save.
func TestSmallCheckpointBesideALargeOneReleasesPages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fano.db")
	l := openTest(t, path, testOptions())
	payload := bytes.Repeat([]byte("x"), 200)
	for round := range 2 {
		for range 200 {
			batch := make([]Entry, 500)
			for j := range batch {
				batch[j] = Entry{Owner: "o", Type: "t", Payload: payload}
			}
			_, err := l.Append(context.Background(), batch...)
			require.NoError(t, err)
		}
		for _, owner := range []string{"allocator", "scheduler"} {
			require.NoError(t, l.SaveCheckpoint(owner, l.LastSeq(), bytes.Repeat([]byte("s"), 3<<20)))
			require.Less(t, mappedKB(t, path), 6<<10, "round %d, after %s's checkpoint", round, owner)
		}
		require.NoError(t, l.SaveCheckpoint("module/pipeline", l.LastSeq(), bytes.Repeat([]byte("p"), 24<<20)))
	}
}

// Loading a large checkpoint reads it through the mapping: it does not
// stay resident (status and recovery load them).
func TestLoadCheckpointReleasesPages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fano.db")
	l := openTest(t, path, testOptions())
	fill(t, l, 1)
	require.NoError(t, l.SaveCheckpoint("module/pipeline", l.LastSeq(), bytes.Repeat([]byte("p"), 24<<20)))
	l.ReleasePages()
	_, ok, err := l.LoadCheckpoint("module/pipeline")
	require.NoError(t, err)
	require.True(t, ok)
	require.Less(t, mappedKB(t, path), 6<<10, "after LoadCheckpoint")
	_, err = l.Checkpoints()
	require.NoError(t, err)
	require.Less(t, mappedKB(t, path), 6<<10, "after Checkpoints")
}

// Stats during a compaction (a heartbeat's, every few seconds of one that
// runs tens of seconds) counts from what it knew and reads no block back
// through the mapping.
func TestStatsDuringCompactionReadsNoBlockBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fano.db")
	l := openTest(t, path, testOptions())
	fill(t, l, 40)
	require.NoError(t, l.SaveCheckpoint("o", l.LastSeq()/2, []byte("snapshot")))
	before, err := l.Stats()
	require.NoError(t, err)
	read := l.statsReadBack.Load()
	during := 0
	l.chunkCompacted = func() {
		s, err := l.Stats()
		require.NoError(t, err)
		require.Positive(t, s.Entries)
		during++
	}
	_, err = l.Compact()
	require.NoError(t, err)
	require.Greater(t, during, 1)
	require.Equal(t, read, l.statsReadBack.Load(), "no block read back during the compaction")
	after, err := l.Stats()
	require.NoError(t, err)
	require.Less(t, after.Entries, before.Entries)
	require.Equal(t, read, l.statsReadBack.Load(), "nor after it")
}

// With releases off (ReleasePagesEvery < 0), a compaction leaves what it
// read mapped: the releases it makes keep to the switch.
func TestCompactKeepsToReleasesOff(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fano.db")
	opts := testOptions()
	opts.ReleasePagesEvery = -1
	l := openTest(t, path, opts)
	fill(t, l, 16)
	require.NoError(t, l.SaveCheckpoint("o", l.LastSeq()/2, []byte("snapshot")))
	l.ReleasePages()
	_, err := l.Compact()
	require.NoError(t, err)
	require.Greater(t, mappedKB(t, path), 4<<10, "nothing released by itself")
}
