package dedup

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSentences(t *testing.T) {
	md := "## Title\n\nGreat question! The Fano plane has $7$ points. It is PG(2,2).\n\n" +
		"**Incidence:**\n- Every line has 3 points.\n1. Every point is on 3 lines.\n\n```\ncode. here.\n```\n<sub>footer. x</sub>"
	assert.Equal(t, []string{"Great question!", "The Fano plane has $7$ points.", "It is PG(2,2).", "**Incidence:**",
		"Every line has 3 points.", "Every point is on 3 lines."}, Sentences(md))
}

// A draft's sentences that stand in another section are found, with the
// section, also when a lead-in wraps them; the draft's own section and
// short sentences are not counted; Set replaces and Remove forgets.
func TestPassagesOverlaps(t *testing.T) {
	p := NewPassages(DefaultConfig())
	p.Set("sec-a", "## Size\n\nThe Fano plane has exactly 7 points and 7 lines. It is the smallest projective plane: no plane with fewer points satisfies the axioms.")
	p.Set("sec-b", "PSL(2,7), of order 168, is the second smallest nonabelian simple group, after A5 of order 60.")
	require.Equal(t, 3, p.Len())

	draft := "We now turn to duality. The Fano plane is self-dual: exchanging points and lines yields an isomorphic plane.\n\n" +
		"It also helps to note that the Fano plane has exactly seven points and seven lines. It follows.\n\n" +
		"Separately, I think the cleanest way to see it: PSL(2,7), of order 168, is the second smallest nonabelian simple group, after A5 of order 60."
	ov := p.Overlaps(draft)
	require.Len(t, ov, 2, "%+v", ov)
	assert.Equal(t, "sec-a", ov[0].Owner)
	assert.Equal(t, "The Fano plane has exactly 7 points and 7 lines.", ov[0].Stored)
	assert.Contains(t, ov[0].Sentence, "seven points")
	assert.Equal(t, "sec-b", ov[1].Owner)
	assert.GreaterOrEqual(t, ov[1].Score, 0.6)

	assert.Len(t, p.Overlaps(draft, "sec-a"), 1, "sec-a skipped")
	assert.Equal(t, ov, p.OverlapsExhaustive(draft))

	p.Set("sec-a", "Duality exchanges points and lines.")
	assert.Len(t, p.Overlaps(draft), 1, "sec-a's old sentences are gone")
	p.Remove("sec-b")
	assert.Empty(t, p.Overlaps(draft))
	assert.Equal(t, 1, p.Len())

	p.Load(map[string]string{"sec-c": "The Fano plane has exactly 7 points and 7 lines."})
	ov = p.Overlaps(draft)
	require.Len(t, ov, 1)
	assert.Equal(t, "sec-c", ov[0].Owner)
}

// A section-sized text: sentences from the corpus.
func sectionText(cp *corpus, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 && i%3 == 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(cp.text())
		b.WriteString(". ")
	}
	return b.String()
}

// BenchmarkPassageOverlaps: checking one drafted section (8 sentences)
// against a 1,000-section document (8,000 indexed sentences), goal
// ≤ 5 ms, beside the brute-force baseline in the same run (every draft
// sentence against every stored sentence).
func BenchmarkPassageOverlaps(b *testing.B) {
	const sections, perSection = 1000, 8
	cp := newCorpus(1000)
	texts := map[string]string{}
	var all []string
	for i := range sections {
		t := sectionText(cp, perSection)
		texts[fmt.Sprintf("sec-%04d", i)] = t
		all = append(all, t)
	}
	p := NewPassages(DefaultConfig())
	p.Load(texts)
	drafts := make([]string, 64)
	for i := range drafts {
		// Half the sentences repeat a stored one, half are new.
		ss := Sentences(all[(i*37)%sections])
		var parts []string
		for k := range perSection {
			if k%2 == 0 {
				parts = append(parts, cp.variant(strings.TrimSuffix(ss[k%len(ss)], "."))+".")
			} else {
				parts = append(parts, cp.text()+".")
			}
		}
		drafts[i] = strings.Join(parts, " ")
	}
	start := time.Now()
	const baseN = 8
	for i := range baseN {
		p.OverlapsExhaustive(drafts[i])
	}
	baseline := time.Since(start) / baseN
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p.Overlaps(drafts[i%len(drafts)])
	}
	b.StopTimer()
	per := b.Elapsed() / time.Duration(max(1, b.N))
	b.ReportMetric(float64(baseline.Nanoseconds()), "baseline-ns/op")
	b.ReportMetric(float64(baseline)/float64(max(1, per)), "speedup")
	b.ReportMetric(float64(p.Len()), "sentences")
}
