package app

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The soft limit is the configured one while the live heap is within two
// thirds of it, then twice the live heap, and the configured one again when the
// heap shrinks.
func TestLimitForFollowsALiveHeapThatOutgrowsIt(t *testing.T) {
	const mb = 1 << 20
	require.Equal(t, int64(256*mb), limitFor(256*mb, 60*mb))
	require.Equal(t, int64(256*mb), limitFor(256*mb, 128*mb), "half of it")
	require.Equal(t, int64(256*mb), limitFor(256*mb, 160*mb), "a million items' live heap, within two thirds of it")
	require.Equal(t, int64(360*mb), limitFor(256*mb, 180*mb), "past two thirds: twice the live heap")
	require.Equal(t, int64(450*mb), limitFor(256*mb, 225*mb), "a million items' live heap: the collector must not run without end")
	require.Equal(t, int64(256*mb), limitFor(256*mb, 50*mb), "back to the configured one")
}
