package actors

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"fano/modules/probe"
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

// BenchmarkMemoryCurve is BenchmarkEndToEnd's fano run at several sizes:
// how resident memory and the live heap grow with the number of tasks (all
// finished and, with the default retention, still in memory). RSS only
// grows within a process, so run one size per process:
//
//	go test -run '^$' -bench 'BenchmarkMemoryCurve/tasks=200000$' -benchtime 1x ./actors/
func BenchmarkMemoryCurve(b *testing.B) {
	for _, n := range []int{1_000, 20_000, 200_000} {
		b.Run(fmt.Sprintf("tasks=%d", n), func(b *testing.B) {
			for range b.N {
				runtime.GC()
				bu := setup(&testing.T{}, setupOpts{backends: []string{"api"}, conc: 64, hourly: 1 << 30,
					probe: probe.Config{NoPropose: true, Turns: 1, TaskType: benchTaskType}})
				bu.t = nil
				bu.opts.TickInterval = 100 * time.Millisecond
				bu.opts.Scheduler.MaxPending = n + 1
				completed := awaitCompletions(&bu.opts, n)
				sys, err := Start(bu.opts)
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				peak := heapPeak()
				var wg sync.WaitGroup
				for w := range 64 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for j := w; j < n; j += 64 {
							// At 200k a busy machine can time a submit out;
							// it is tried again (then it may be a duplicate).
							for try := 0; ; try++ {
								r, err := sys.Submit(benchTask(j))
								if err == nil && (r.Accepted || (try > 0 && r.Duplicate)) {
									break
								}
								if err == nil || try == 5 {
									panic(fmt.Sprint(r, err))
								}
							}
						}
					}()
				}
				completed(b, 30*time.Minute)
				elapsed := time.Since(start)
				wg.Wait()
				b.ReportMetric(float64(n)/elapsed.Seconds(), "tasks/s")
				b.ReportMetric(rssMB(), "rss-MB")
				b.ReportMetric(procStatusMB("RssFile:"), "rss-file-MB")
				b.ReportMetric(peak(), "peak-heap-MB")
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "live-heap-MB")
				_ = sys.Stop()
				_ = bu.file.Close()
				os.RemoveAll(bu.dir)
			}
		})
	}
}
