package wal

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// Blocks and completion records are only ever added at the end of their
// buckets, so their leaves are filled before bbolt splits them: each
// commit then reads and rewrites fewer inodes (the leaves are half as
// many as at bbolt's default fill of one half).
func TestAppendedBucketsFillTheirLeaves(t *testing.T) {
	l := openTest(t, "", testOptions())
	for i := range 3000 {
		e := ent("scheduler", "task_completed", "x")
		e.Archive = &ArchiveRecord{Key: fmt.Sprintf("done/%020d/t%d", i, i), Value: []byte("a finished task, a little under a hundred bytes of it as an encoded record.")}
		appendT(t, l, e)
	}
	require.NoError(t, l.db.View(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketBlocks, bucketArchive} {
			st := tx.Bucket(name).Stats()
			require.Greater(t, st.LeafPageN, 1, "%s: too few leaves to tell", name)
			fill := float64(st.LeafInuse) / float64(st.LeafPageN*l.db.Info().PageSize)
			require.Greater(t, fill, 0.85, "%s: leaves %.0f%% full (%d leaves)", name, 100*fill, st.LeafPageN)
		}
		return nil
	}))
}
