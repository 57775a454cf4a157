package actors

import (
	"fmt"
	"runtime/debug"
	"testing"
)

// BenchmarkEndToEndMemoryLimit is BenchmarkEndToEnd under the soft memory
// limit `fano run` would set with orchestrator.state.memory_limit_mb: what
// the limit does to resident memory (rss-MB) and to throughput, beside the
// run without a limit (BenchmarkEndToEnd) in the same `make bench`.
func BenchmarkEndToEndMemoryLimit(b *testing.B) {
	for _, mb := range []int64{64} {
		b.Run(fmt.Sprintf("limit=%dMB", mb), func(b *testing.B) {
			prev := debug.SetMemoryLimit(mb << 20)
			defer debug.SetMemoryLimit(prev)
			BenchmarkEndToEnd(b)
		})
	}
}
