package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkPipelineCurve: the peers' workload (one zero-latency step, 64
// at once, durable) through `fano pipeline run` at growing sizes, the
// smallest the baseline of the others in the same run: items/s should
// stay flat and peak RSS should not grow with the items finished. Mid-run
// it times `fano pipeline status` (a separate process, its start
// included). Sizes: FANO_BENCH_CURVE (default 10000,100000; add 1000000
// for the million).
func BenchmarkPipelineCurve(b *testing.B) {
	bin := fano.Require(b)
	sizes := []int{10000, 100000}
	if s := os.Getenv("FANO_BENCH_CURVE"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				b.Fatalf("FANO_BENCH_CURVE: %q is not a size", f)
			}
			sizes = append(sizes, n)
		}
	}
	rates := map[int]float64{}
	rss := map[int]float64{}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("items-%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				rates[n], rss[n] = curvePoint(b, bin, n)
			}
		})
	}
	base := sizes[0]
	for _, n := range sizes[1:] {
		if rates[base] > 0 {
			b.Logf("%d items: items/s %.0f = %.2f x the %d-item run's; peak RSS %.0f MB (%.0f MB at %d)",
				n, rates[n], rates[n]/rates[base], base, rss[n], rss[base], base)
		}
	}
}

// curvePoint runs one size and reports items/s, peak RSS and how long
// `pipeline status` took mid-run.
func curvePoint(b *testing.B, bin string, items int) (rate, peakMB float64) {
	e := newEnv(&testing.T{}, benchPipeline, benchConfig, items)
	defer os.RemoveAll(e.dir)
	start := time.Now()
	run := e.cmdOf(context.Background(), bin, "pipeline", "run", e.def, "--no-progress", "--json")
	if err := run.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- run.Wait() }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var status time.Duration
	var err error
wait:
	for {
		select {
		case err = <-exited:
			break wait
		case <-tick.C:
			if status > 0 {
				continue
			}
			if _, serr := os.Stat(filepath.Join(e.data, "progress.json")); serr != nil {
				continue
			}
			t0 := time.Now()
			if out, serr := e.cmdOf(context.Background(), bin, "pipeline", "status", e.def).CombinedOutput(); serr == nil && strings.Contains(string(out), "is running") {
				status = time.Since(t0)
			}
		}
	}
	elapsed := time.Since(start)
	if err != nil {
		b.Fatalf("fano pipeline run: %v", err)
	}
	ru := run.ProcessState.SysUsage().(*syscall.Rusage)
	rate, peakMB = float64(items)/elapsed.Seconds(), float64(ru.Maxrss)/1024
	b.ReportMetric(rate, "items/s")
	b.ReportMetric(peakMB, "peak-rss-MB")
	if status > 0 {
		b.ReportMetric(float64(status.Milliseconds()), "status-ms")
	}
	return rate, peakMB
}
