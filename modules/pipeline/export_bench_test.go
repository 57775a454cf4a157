package pipeline

import (
	"runtime"
	"testing"
	"time"

	"fano/pb"
)

const exportBenchDef = `
name: bench
items: {source: items.jsonl, key: id}
models: [api]
steps:
  - name: verdict
    llm:
      prompt: 'Is this claim true? {{.item.claim}}'
      schema: {type: object, required: [verdict], properties: {verdict: {type: boolean}}}
`

// BenchmarkExportResults: results.jsonl of 20,000 finished items (the end
// of BenchmarkPipelineRun's run), written by the module's own writer from
// the stored outputs; beside it, the same file through encoding/json from
// decoded outputs (how it was written before, and still is with
// expression steps).
func BenchmarkExportResults(b *testing.B) {
	t := &testing.T{}
	def, items := writeDef(t, exportBenchDef, 20000)
	h := newHarness(t, def, items)
	h.runAll()
	for _, c := range []struct {
		name string
		raw  bool
	}{{"writer-stored-outputs", true}, {"baseline-encoding-json-decoded", false}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := h.m.results(c.raw, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("failures", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := h.m.Export(FailuresFile); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("snapshot", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := h.m.Snapshot(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkModulePerItem: the module's own work for one item of the
// peers' workload (one llm step, one model), as its host drives it:
// propose, NextAction (prompt), DecideResponse (validation), Apply,
// DecideCompletion. Per op: one item.
func BenchmarkModulePerItem(b *testing.B) {
	t := &testing.T{}
	def, items := writeDef(t, exportBenchDef, 20000)
	b.ReportAllocs()
	b.ResetTimer()
	done := 0
	for done < b.N {
		b.StopTimer()
		if done > 0 {
			// Fresh items: a finished item let go of its prompt fields.
			var err error
			if items, err = def.LoadItems(); err != nil {
				b.Fatal(err)
			}
		}
		h := newHarness(t, def, items)
		h.answer = func(*pb.Task, string) string { return `{"verdict": true}` }
		b.StartTimer()
		for done < b.N {
			tasks := h.m.Propose(h.now)
			if len(tasks) == 0 {
				break
			}
			for _, tk := range tasks {
				h.runTask(tk)
				if done++; done == b.N {
					break
				}
			}
		}
	}
}

// BenchmarkModuleLiveHeap: what a run of 100,000 items (one llm step,
// one model) keeps in memory once every item is finished, per item: the
// items (items-B/item) and the module's state (module-B/item), beside
// the items' JSONL text (source-B/item, the reference: heap/source is
// their ratio); and the time of a snapshot of that state and of its
// restore.
func BenchmarkModuleLiveHeap(b *testing.B) {
	const n = 100000
	live := func() int64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	t := &testing.T{}
	for b.Loop() {
		before := live()
		def, items := writeDef(t, exportBenchDef, n)
		withItems := live()
		h := newHarness(t, def, items)
		h.answer = func(*pb.Task, string) string { return `{"verdict": true}` }
		for {
			tasks := h.m.Propose(h.now)
			if len(tasks) == 0 {
				break
			}
			for _, tk := range tasks {
				h.runTask(tk)
			}
			h.log = nil // the harness's own record of events: not the module's
		}
		if h.m.finished != n {
			b.Fatalf("%d of %d items finished", h.m.finished, n)
		}
		withRun := live()
		source := 0
		for _, it := range items {
			line, err := it.vals.src.line(it)
			if err != nil {
				b.Fatal(err)
			}
			source += len(line) + 1
		}
		start := time.Now()
		snap, err := h.m.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		snapshotTime := time.Since(start)
		m2 := New(Config{Def: def, Items: items})
		start = time.Now()
		if err := m2.Restore(snap); err != nil {
			b.Fatal(err)
		}
		restoreTime := time.Since(start)
		b.ReportMetric(float64(withItems-before)/n, "items-B/item")
		b.ReportMetric(float64(withRun-withItems)/n, "module-B/item")
		b.ReportMetric(float64(source)/n, "source-B/item")
		b.ReportMetric(float64(withRun-before)/float64(source), "heap/source")
		b.ReportMetric(float64(snapshotTime.Microseconds())/1e3, "snapshot-ms")
		b.ReportMetric(float64(restoreTime.Microseconds())/1e3, "restore-ms")
		runtime.KeepAlive(h)
		runtime.KeepAlive(m2)
	}
}
