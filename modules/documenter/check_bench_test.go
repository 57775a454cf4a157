package documenter

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"fano/modules/clean"
	"fano/modules/dedup"
)

// benchDocument is a document of n sections of 8 sentences each, drawn
// from a vocabulary large enough that sentences rarely repeat by chance.
func benchDocument(n int) DocumentFile {
	r := rand.New(rand.NewPCG(7, 11))
	words := make([]string, 4000)
	for i := range words {
		words[i] = fmt.Sprintf("w%dx%d", i, r.IntN(1000))
	}
	doc := DocumentFile{Title: "Bench"}
	for i := range n {
		var sb strings.Builder
		for s := range 8 {
			if s == 4 {
				sb.WriteString("\n\n")
			}
			for w := range 12 {
				if w > 0 {
					sb.WriteByte(' ')
				}
				sb.WriteString(words[r.IntN(len(words))])
			}
			sb.WriteString(". ")
		}
		id := fmt.Sprintf("sec-%04d", i)
		doc.Sections = append(doc.Sections, SectionFile{ID: id, Anchor: id, Title: fmt.Sprintf("Section %d", i), Markdown: sb.String()})
	}
	return doc
}

// BenchmarkCheckDocument: `fano doc check` on 1,000 sections (goal ≤ 1 s
// per check), beside the brute-force baseline in the same run: every
// sentence compared with every sentence of every earlier section
// (shingles precomputed, exact Jaccard).
func BenchmarkCheckDocument(b *testing.B) {
	doc := benchDocument(1000)
	cl := clean.Default()

	start := time.Now()
	type sent struct {
		sec int
		sh  []uint32
	}
	var all []sent
	for i, s := range doc.Sections {
		for _, t := range dedup.Sentences(s.Markdown) {
			all = append(all, sent{i, dedup.Shingles(t)})
		}
	}
	repeats := 0
	for i := range all {
		for j := range i {
			if all[j].sec != all[i].sec && jaccardOf(all[i].sh, all[j].sh) >= 0.6 {
				repeats++
			}
		}
	}
	baseline := time.Since(start)

	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if f := CheckDocument(doc, "", cl, dedup.Config{}); len(f) != repeats {
			b.Fatalf("%d findings, the baseline found %d repeats", len(f), repeats)
		}
	}
	b.StopTimer()
	per := b.Elapsed() / time.Duration(max(1, b.N))
	b.ReportMetric(float64(baseline.Nanoseconds()), "baseline-ns/op")
	b.ReportMetric(float64(baseline)/float64(max(1, per)), "speedup")
}

func jaccardOf(a, b []uint32) float64 {
	inter := 0
	for _, x := range a {
		if _, ok := slices.BinarySearch(b, x); ok {
			inter++
		}
	}
	if u := len(a) + len(b) - inter; u > 0 {
		return float64(inter) / float64(u)
	}
	return 0
}
