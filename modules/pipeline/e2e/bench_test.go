package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"fano/actors"
	"fano/actors/allocator"
	"fano/actors/scheduler"
	"fano/gateway"
	"fano/gateway/sim"
	"fano/modules"
	"fano/modules/probe"
	"fano/pb"
	"fano/wal"
)

// benchConfig: one zero-latency simulated model, 64 requests at once.
const benchConfig = `
backends:
  api: {type: sim, hourly_limit: 1000000000, max_concurrency: 64, sim: {seed: 1, style: api, latency_ms: 0}}
orchestrator:
  scheduler: {max_pending_tasks: 100000, max_running_tasks: 64}
explorer: {enabled: false}
documenter: {enabled: false}
researcher: {enabled: false}
control: {enabled: false}
logging: {level: warn, console: json}
`

const benchPipeline = `
name: bench
items: {source: items.jsonl, key: id}
models: [api]
steps:
  - name: verdict
    llm:
      prompt: 'Is this claim true? {{.item.claim}}'
      schema: {type: object, required: [verdict], properties: {verdict: {type: boolean}}}
`

// BenchmarkPipelineRun: the peers' workload (../shared/peers: 20,000
// durable jobs, a zero-latency step, 64 at once) through a real `fano
// pipeline run` process, from its start (WAL open, items read) to its exit
// with every result durable and results.jsonl written. Beside it, in the
// same run: fano's own end-to-end shape (actors' BenchmarkEndToEnd: the
// same 20,000 zero-latency tasks submitted straight to the actor system,
// probe module, no pipeline), so the ratio is the pipeline layer's cost.
func BenchmarkPipelineRun(b *testing.B) {
	const items = 20000
	var pipelineRate, baseRate float64
	// FANO_BENCH_BEFORE names another fano binary (say, built from the
	// commit before a change): it runs the same workload first, so a
	// change is measured against its before in the same run.
	if before := os.Getenv("FANO_BENCH_BEFORE"); before != "" {
		b.Run("before-fano-pipeline-run", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				runPipelineBench(b, before, items)
			}
		})
	}
	b.Run("fano-pipeline-run", func(b *testing.B) {
		bin := fano.Require(b)
		for i := 0; i < b.N; i++ {
			pipelineRate = runPipelineBench(b, bin, items)
		}
	})
	b.Run("baseline-fano-end-to-end", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			baseRate = endToEnd(b, items)
			b.ReportMetric(baseRate, "tasks/s")
		}
	})
	if baseRate > 0 && pipelineRate > 0 {
		b.Logf("pipeline items/s ÷ end-to-end tasks/s = %.2f", pipelineRate/baseRate)
	}
}

// runPipelineBench runs the peers' workload through one `fano pipeline
// run` of binary bin and reports items/s, peak RSS and the WAL's size.
func runPipelineBench(b *testing.B, bin string, items int) float64 {
	e := newEnv(&testing.T{}, benchPipeline, benchConfig, items)
	defer os.RemoveAll(e.dir)
	start := time.Now()
	cmd := e.cmdOf(context.Background(), bin, "pipeline", "run", e.def, "--no-progress", "--json")
	out, err := cmd.CombinedOutput()
	elapsed := time.Since(start)
	if err != nil {
		b.Fatalf("fano pipeline run: %v\n%s", err, out)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	rate := float64(items) / elapsed.Seconds()
	b.ReportMetric(rate, "items/s")
	b.ReportMetric(float64(ru.Maxrss)/1024, "peak-rss-MB")
	b.ReportMetric(float64(ru.Utime.Nano()+ru.Stime.Nano())/1e3/float64(items), "cpu-us/item")
	if st, err := os.Stat(filepath.Join(e.data, "fano.db")); err == nil {
		b.ReportMetric(float64(st.Size())/float64(items), "db-bytes/item")
	}
	if log, err := wal.Open(filepath.Join(e.data, "fano.db"), wal.Options{LockTimeout: time.Second}); err == nil {
		var payload int64
		var entries int
		_ = log.Replay(1, func(ent wal.Entry) error {
			payload += int64(len(ent.Payload))
			entries++
			return nil
		})
		b.ReportMetric(float64(payload)/float64(items), "wal-bytes/item")
		b.ReportMetric(float64(entries)/float64(items), "wal-entries/item")
		_ = log.Close()
	}
	return rate
}

// endToEnd is actors' BenchmarkEndToEnd through the public API: 64
// submitters, one zero-latency sim backend of 64 slots, the probe module
// answering each task in one turn, until every task's completion is
// durable. It returns tasks/s.
func endToEnd(b *testing.B, tasks int) float64 {
	runtime.GC()
	dir := b.TempDir()
	log, err := wal.Open(filepath.Join(dir, "fano.db"), wal.Options{LockTimeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	var done atomic.Int64
	all := make(chan struct{})
	opts := actors.Options{
		Log: log, Logger: zerolog.Nop(),
		Scheduler:    scheduler.Config{PreemptionThreshold: 20, MaxPending: 100000, MessageLimit: 50},
		Allocator:    allocator.Config{BufferPercent: 10, Backends: []allocator.BackendConfig{{Name: "api", Kind: "sim", HourlyLimit: 1 << 30, MaxConcurrency: 64}}},
		Backends:     []gateway.Backend{sim.New(sim.Config{Name: "api", Style: "api", Seed: 1, HourlyLimit: 1 << 30}, nil)},
		Modules:      []modules.Module{probe.New(probe.Config{NoPropose: true, Turns: 1, TaskType: "bench"})},
		TickInterval: 100 * time.Millisecond, MaxRunning: 64,
		OutputDir: filepath.Join(dir, "output"),
		Observe: func(_ string, e *pb.Event) {
			if e.GetTaskCompleted() != nil && done.Add(1) == int64(tasks) {
				close(all)
			}
		},
	}
	sys, err := actors.Start(opts)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for j := w; j < tasks; j += 64 {
				subject := fmt.Sprintf("t%06d", j)
				t := &pb.Task{Id: modules.TaskKey(probe.Name, "bench", subject), Module: probe.Name, TaskType: "bench", Subject: subject,
					MaxRequests: 1, Context: map[string]string{"question": "q " + subject}}
				if r, err := sys.Submit(t); err != nil || !r.Accepted {
					panic(fmt.Sprint(r, err))
				}
			}
		}(w)
	}
	select {
	case <-all:
	case <-time.After(5 * time.Minute):
		b.Fatalf("only %d of %d completed", done.Load(), tasks)
	}
	elapsed := time.Since(start)
	wg.Wait()
	_ = sys.Stop()
	return float64(tasks) / elapsed.Seconds()
}

const threeSteps = `
name: three
items: {source: items.jsonl, key: id}
models: [api]
steps:
  - name: extract
    llm: {prompt: 'Extract the claim: {{.item.claim}}', schema: {type: object, required: [text], properties: {text: {type: string}}}}
  - name: judge
    needs: [extract]
    llm: {prompt: 'Judge: {{.steps.extract.text}}', schema: {type: object, required: [verdict], properties: {verdict: {type: boolean}}}}
  - name: explain
    needs: [judge]
    llm: {prompt: 'Explain {{.steps.judge.verdict}} for {{.item.claim}}', schema: {type: object, required: [text], properties: {text: {type: string}}}}
`

// BenchmarkPipelineThreeSteps: 10,000 items through three chained llm
// steps on a zero-latency simulated model (30,000 durable calls), through
// a real `fano pipeline run`; beside it the same number of calls as
// fano's end-to-end shape, so the ratio is per call.
func BenchmarkPipelineThreeSteps(b *testing.B) {
	const items = 10000
	var rate, base float64
	run := func(b *testing.B, bin string) float64 {
		e := newEnv(&testing.T{}, threeSteps, benchConfig, items)
		defer os.RemoveAll(e.dir)
		start := time.Now()
		cmd := e.cmdOf(context.Background(), bin, "pipeline", "run", e.def, "--no-progress", "--json")
		out, err := cmd.CombinedOutput()
		elapsed := time.Since(start)
		if err != nil {
			b.Fatalf("fano pipeline run: %v\n%s", err, out)
		}
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		r := items / elapsed.Seconds()
		b.ReportMetric(r, "items/s")
		b.ReportMetric(3*r, "calls/s")
		b.ReportMetric(float64(ru.Maxrss)/1024, "peak-rss-MB")
		b.ReportMetric(float64(ru.Utime.Nano()+ru.Stime.Nano())/1e3/(3*items), "cpu-us/call")
		return r
	}
	if before := os.Getenv("FANO_BENCH_BEFORE"); before != "" {
		b.Run("before-fano-pipeline-run", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				run(b, before)
			}
		})
	}
	b.Run("fano-pipeline-run", func(b *testing.B) {
		bin := fano.Require(b)
		for i := 0; i < b.N; i++ {
			rate = run(b, bin)
		}
	})
	b.Run("baseline-fano-end-to-end", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			base = endToEnd(b, 3*items)
			b.ReportMetric(base, "tasks/s")
		}
	})
	if base > 0 {
		b.Logf("pipeline calls/s ÷ end-to-end tasks/s = %.2f", 3*rate/base)
	}
}
