package dedup

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// BenchmarkCheck measures one duplicate check against 10k and 100k stored
// insights (goal: ≤ 1 ms at 100k, so the check never shows in a task's
// latency). In the same run it times the baseline, an exhaustive exact
// comparison with every stored item (same precomputed shingles, no index),
// and reports:
//
//	ns/op           the indexed check (MinHash + LSH candidates, exact Jaccard)
//	baseline-ns/op  the exhaustive check
//	speedup         baseline / indexed
//	recall          share of near-duplicate queries whose exhaustive best
//	                match (≥ threshold) the indexed check also returns
//	candidates/op   items the index compared exactly per check
//	index-bytes/item  heap the checker holds per stored item (texts included)
func BenchmarkCheck(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("stored=%d", n), func(b *testing.B) {
			cp := newCorpus(uint64(n))
			items := cp.items(n)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			c := New(DefaultConfig())
			c.Load("explorer/blessed", items)
			runtime.GC()
			runtime.ReadMemStats(&after)
			heap := float64(after.HeapAlloc) - float64(before.HeapAlloc)
			// Half near-duplicates of stored items, half new statements.
			queries := make([]string, 512)
			for i := range queries {
				if i%2 == 0 {
					queries[i] = cp.variant(items[(i*7919)%n].Text)
				} else {
					queries[i] = cp.text()
				}
			}

			// Baseline and recall, in this run.
			const baseN = 64
			found, dups := 0, 0
			start := time.Now()
			want := make([]Match, baseN)
			for i := range baseN {
				want[i] = c.Exhaustive(queries[i])
			}
			baseline := time.Since(start) / baseN
			for i := range baseN {
				if want[i].Duplicate {
					dups++
					if c.Match(queries[i]).ID == want[i].ID {
						found++
					}
				}
			}
			cands := 0
			for _, q := range queries[:baseN] {
				c.mu.RLock()
				cands += len(c.candidatesLocked(c.signature(Shingles(q))))
				c.mu.RUnlock()
			}

			i := 0
			for b.Loop() {
				c.Check(queries[i%len(queries)])
				i++
			}
			per := b.Elapsed() / time.Duration(b.N)
			b.ReportMetric(float64(baseline.Nanoseconds()), "baseline-ns/op")
			b.ReportMetric(float64(baseline)/float64(per), "speedup")
			if dups > 0 {
				b.ReportMetric(float64(found)/float64(dups), "recall")
			}
			b.ReportMetric(float64(cands)/baseN, "candidates/op")
			b.ReportMetric(heap/float64(n), "index-bytes/item")
		})
	}
}

// BenchmarkAdd measures adding one statement to a store of 100k.
func BenchmarkAdd(b *testing.B) {
	cp := newCorpus(11)
	c := New(DefaultConfig())
	c.Load("explorer/blessed", cp.items(100_000))
	texts := make([]string, 1024)
	for i := range texts {
		texts[i] = cp.text()
	}
	i := 0
	for b.Loop() {
		c.Add(fmt.Sprintf("new-%d", i), texts[i%len(texts)], "explorer/pending")
		i++
	}
}
