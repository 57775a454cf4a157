package scheduler

import (
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// The set holds what was added, across merges, and nothing else; all
// lists it sorted, once each.
func TestHashSet(t *testing.T) {
	var h hashSet
	r := rand.New(rand.NewPCG(1, 2))
	in := map[uint64]bool{}
	for range 3*mergeAt + 17 {
		x := r.Uint64()
		h.add(x)
		in[x] = true
		if r.IntN(4) == 0 {
			h.add(x) // again: still once
		}
	}
	require.Len(t, in, h.len())
	for x := range in {
		require.True(t, h.has(x))
	}
	for range 10000 {
		if x := r.Uint64(); !in[x] {
			require.False(t, h.has(x))
		}
	}
	all := h.all()
	require.True(t, slices.IsSorted(all))
	require.Len(t, slices.Compact(slices.Clone(all)), len(in))
}

// Snapshots hold the hashes: forgottenHash must stay FNV-1a 64.
func TestForgottenHashIsFNV1a(t *testing.T) {
	for _, id := range []string{"", "a", "pipeline/pipeline_llm/bench·verdict·c0000001·api"} {
		h := fnv.New64a()
		_, _ = h.Write([]byte(id))
		require.Equal(t, h.Sum64(), forgottenHash(id), id)
	}
	require.Equal(t, uint64(0xaf63dc4c8601ec8c), forgottenHash("a"))
}
