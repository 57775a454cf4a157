package app

import (
	"runtime/debug"
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

// GOGC 200 while three times the live heap stays well within the limit,
// 100 above: a large heap at 200 would fill the limit.
func TestGCPercentForASmallHeapOnly(t *testing.T) {
	const mb = 1 << 20
	require.Equal(t, 200, gcPercentFor(256*mb, 0))
	require.Equal(t, 200, gcPercentFor(256*mb, 30*mb), "20k pipeline items")
	require.Equal(t, 200, gcPercentFor(256*mb, 63*mb))
	require.Equal(t, 100, gcPercentFor(256*mb, 64*mb), "a quarter of the limit")
	require.Equal(t, 100, gcPercentFor(256*mb, 160*mb), "a million items")
	require.Equal(t, 100, gcPercentFor(256*mb, 400*mb), "past the limit")
}

// Under the config's soft limit the collector starts at GOGC 200; a GOGC
// in the environment is left as the runtime read it.
func TestMemoryLimitCollectsLessOftenUnderTheLimit(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	t.Setenv("GOGC", "")
	prevPercent, prevLimit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetGCPercent(prevPercent); debug.SetMemoryLimit(prevLimit) })

	b, source := memoryLimit(256)
	require.Equal(t, int64(256<<20), b)
	require.Equal(t, configMemoryLimit, source)
	require.Equal(t, gcPercentUnderLimit, debug.SetGCPercent(100), "GOGC under the config's limit")

	t.Setenv("GOGC", "100")
	memoryLimit(256)
	require.Equal(t, 100, debug.SetGCPercent(100), "the environment's GOGC wins")

	t.Setenv("GOGC", "")
	b, source = memoryLimit(0)
	require.Equal(t, int64(0), b)
	require.Equal(t, "none", source)
	require.Equal(t, 100, debug.SetGCPercent(100), "no limit: GOGC stays")
}
