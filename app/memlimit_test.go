package app

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The soft limit is the configured one while the live heap is within three
// fifths of it, then twice the live heap, and the configured one again when the
// heap shrinks.
func TestLimitForFollowsALiveHeapThatOutgrowsIt(t *testing.T) {
	const mb = 1 << 20
	require.Equal(t, int64(256*mb), limitFor(256*mb, 60*mb))
	require.Equal(t, int64(256*mb), limitFor(256*mb, 128*mb), "half of it")
	require.Equal(t, int64(256*mb), limitFor(256*mb, 150*mb), "a million items' live heap, within three fifths of it")
	require.Equal(t, int64(320*mb), limitFor(256*mb, 160*mb), "past three fifths: twice the live heap")
	require.Equal(t, int64(450*mb), limitFor(256*mb, 225*mb), "a million items' live heap: the collector must not run without end")
	require.Equal(t, int64(256*mb), limitFor(256*mb, 50*mb), "back to the configured one")
}
