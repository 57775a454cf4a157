package pipeline

import (
	"testing"

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
