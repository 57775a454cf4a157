package dedup

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNormalize(t *testing.T) {
	assert.Equal(t, "the fano plane has exactly 7 points and 7 lines", Normalize("The Fano plane has exactly seven points, and SEVEN lines!"))
	assert.Equal(t, "psl 2 7 has order 168", Normalize("PSL(2,7) has order 168."))
	assert.Equal(t, "", Normalize(" ... "))
}

func TestSimilarity(t *testing.T) {
	a := "The Fano plane has exactly 7 points and 7 lines."
	assert.Equal(t, 1.0, Similarity(a, "the fano plane has exactly seven points and seven lines"))
	// A rephrasing is close, an unrelated statement is far.
	re := "In the Fano plane there are exactly seven points and seven lines."
	assert.GreaterOrEqual(t, Similarity(a, re), 0.6)
	assert.Less(t, Similarity(a, "There is no projective plane of order 6."), 0.2)
	// Negation is content.
	assert.Less(t, Similarity("The Fano plane has a blocking set.", "The Fano plane has no blocking set."), 1.0)
	assert.Equal(t, 0.0, Similarity("", "The Fano plane"))
	assert.Equal(t, 1.0, Similarity("the", "The!"))
}

func TestCheckFindsDuplicateAndBorderline(t *testing.T) {
	c := New(Config{Threshold: 0.6, BorderlineLow: 0.3})
	c.Add("ins-1", "The Fano plane has exactly 7 points and 7 lines.", "explorer/blessed")
	c.Add("ins-2", "There is no projective plane of order 6.", "explorer/blessed")
	c.Add("sec-1", "The automorphism group of the Fano plane has order 168.", "documenter/section")

	id, score, border := c.Check("the Fano plane has exactly seven points and seven lines")
	assert.Equal(t, "ins-1", id)
	assert.Equal(t, 1.0, score)
	assert.False(t, border)

	id, score, border = c.Check("The automorphism group of the Fano plane is PSL(2,7), isomorphic to GL(3,2), and has order 168.")
	assert.Equal(t, "sec-1", id, "sections are checked like insights (C4)")
	assert.True(t, border, "score %.2f", score)

	id, _, _ = c.Check("Bruck–Ryser: n is a sum of two squares")
	assert.Equal(t, "", id)

	// Kinds and ids narrow the check.
	id, _, _ = c.Check("the Fano plane has exactly seven points and seven lines", SkipIDs("ins-1"))
	assert.Equal(t, "", id)
	id, _, _ = c.Check("The automorphism group of the Fano plane has order 168.", OnlyKinds("explorer/blessed"))
	assert.Equal(t, "", id)
	id, _, _ = c.Check("The automorphism group of the Fano plane has order 168.", SkipKinds("explorer/blessed"))
	assert.Equal(t, "sec-1", id)
}

func TestAddReplacesRemoveAndLoad(t *testing.T) {
	c := New(Config{})
	c.Add("a", "There is no projective plane of order 6.", "explorer/pending")
	c.Add("a", "The Fano plane is self-dual.", "explorer/blessed")
	assert.Equal(t, 1, c.Len())
	id, _, _ := c.Check("There is no projective plane of order 6.")
	assert.Equal(t, "", id, "the old text is gone")
	it, ok := c.Get("a")
	require.True(t, ok)
	assert.Equal(t, "explorer/blessed", it.Kind)

	assert.True(t, c.Remove("a"))
	assert.False(t, c.Remove("a"))
	assert.Equal(t, 0, c.Len())

	c.Add("s", "The Heawood graph has 14 vertices.", "documenter/section")
	c.Add("x", "The Fano plane is self-dual.", "explorer/blessed")
	c.Load("explorer/blessed", []Item{{ID: "y", Text: "There is no projective plane of order 10."}})
	assert.Equal(t, 2, c.Len(), "Load replaced the kind's items and kept the others")
	_, ok = c.Get("x")
	assert.False(t, ok)
	it, ok = c.Get("y")
	require.True(t, ok)
	assert.Equal(t, "explorer/blessed", it.Kind)
}

// TestIndexMatchesExhaustive: above ExactBelow the LSH index answers; its
// matches equal the exhaustive ones for near-duplicates (recall) and it
// never invents a match (scores are exact).
func TestIndexMatchesExhaustive(t *testing.T) {
	cp := newCorpus(7)
	items := cp.items(1000)
	c := New(Config{ExactBelow: 1})
	c.Load("explorer/blessed", items)
	found, total := 0, 0
	for i := 0; i < 150; i++ {
		q := cp.variant(items[i*6].Text)
		want := c.Exhaustive(q)
		got := c.Match(q)
		if got.ID != "" {
			assert.Equal(t, want.Score, got.Score, "exact scores")
			assert.GreaterOrEqual(t, want.Score, got.Score)
		}
		if want.Duplicate {
			total++
			if got.ID == want.ID {
				found++
			}
		}
	}
	require.Greater(t, total, 50)
	assert.GreaterOrEqual(t, float64(found)/float64(total), 0.97, "recall of duplicates: %d of %d", found, total)
}

func TestRebuildAfterRemovals(t *testing.T) {
	cp := newCorpus(3)
	items := cp.items(2500)
	c := New(Config{ExactBelow: 1})
	c.Load("k", items)
	for _, it := range items[:2000] {
		c.Remove(it.ID)
	}
	assert.Equal(t, 500, c.Len())
	c.mu.RLock()
	slots := len(c.items)
	c.mu.RUnlock()
	assert.Less(t, slots, 2500, "dead slots were reclaimed")
	for _, it := range items[2000:2100] {
		id, score, _ := c.Check(it.Text)
		assert.Equal(t, it.ID, id)
		assert.Equal(t, 1.0, score)
	}
	id, _, _ := c.Check(items[0].Text)
	assert.NotEqual(t, items[0].ID, id)
}

func TestConcurrentUse(t *testing.T) {
	cp := newCorpus(5)
	items := cp.items(400)
	c := New(Config{ExactBelow: 100})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < len(items); i += 4 {
				c.Add(items[i].ID, items[i].Text, fmt.Sprintf("k%d", w))
				c.Check(items[(i*13)%len(items)].Text)
				if i%10 == 0 {
					c.Remove(items[i].ID)
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 360, c.Len())
}
