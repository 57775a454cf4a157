package pipeline

import (
	"testing"
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
				if _, err := h.m.results(c.raw); err != nil {
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
