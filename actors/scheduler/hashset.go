package scheduler

import (
	"maps"
	"slices"
)

// hashSet is a set of 64-bit hashes that costs about 8 bytes each: most
// live in a sorted slice (binary search), the newest in a small map that
// is merged into it once it holds mergeAt. Not safe for concurrent use.
type hashSet struct {
	sorted []uint64
	recent map[uint64]struct{}
}

// mergeAt is the recent map's size at which it is merged: a merge is O(n),
// so a set of a million merges about 15 times on its way there.
const mergeAt = 1 << 16

func (h *hashSet) has(x uint64) bool {
	if _, ok := h.recent[x]; ok {
		return true
	}
	_, ok := slices.BinarySearch(h.sorted, x)
	return ok
}

func (h *hashSet) add(x uint64) {
	if h.has(x) {
		return
	}
	if h.recent == nil {
		h.recent = map[uint64]struct{}{}
	}
	h.recent[x] = struct{}{}
	if len(h.recent) >= max(mergeAt, len(h.sorted)/8) {
		h.merge()
	}
}

// merge moves the recent hashes into the sorted slice.
func (h *hashSet) merge() {
	if len(h.recent) == 0 {
		return
	}
	add := slices.Sorted(maps.Keys(h.recent))
	out := make([]uint64, 0, len(h.sorted)+len(add))
	i, j := 0, 0
	for i < len(h.sorted) && j < len(add) {
		if h.sorted[i] < add[j] {
			out = append(out, h.sorted[i])
			i++
		} else {
			out = append(out, add[j])
			j++
		}
	}
	out = append(append(out, h.sorted[i:]...), add[j:]...)
	h.sorted, h.recent = out, nil
}

func (h *hashSet) len() int { return len(h.sorted) + len(h.recent) }

// all returns the hashes in ascending order (merging first).
func (h *hashSet) all() []uint64 {
	h.merge()
	return h.sorted
}
