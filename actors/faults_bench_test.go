package actors

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"fano/gateway"
	"fano/gateway/breaker"
	"fano/modules/probe"
	"fano/pb"
)

// faultRun is what one benchmark run measured.
type faultRun struct {
	completed, failed, quotaUsed int64
	took                         time.Duration
}

// runFaultWorkload runs tasks multi-turn probe tasks on three sim
// backends (latency each, one request at a time) until all are finished,
// with prepare injecting faults, and counts what happened.
func runFaultWorkload(b *testing.B, tasks, turns int, latency time.Duration, prepare func(*bundle)) faultRun {
	bu := setup(b, setupOpts{backends: []string{"a", "b", "c"}, hourly: 1 << 30, latency: latency, noSync: true,
		probe: probe.Config{NoPropose: true, Turns: turns},
		mutate: func(o *Options) {
			o.TickInterval = 5 * time.Millisecond
			// The 60/300/900 s backoff scaled down 1:6000, like the outage.
			o.RetryBackoff = []time.Duration{10 * time.Millisecond, 50 * time.Millisecond, 150 * time.Millisecond}
		}})
	var run faultRun
	all := make(chan struct{})
	var finished atomic.Int64
	bu.opts.Observe = func(_ string, e *pb.Event) {
		switch {
		case e.GetQuotaUsed() != nil:
			atomic.AddInt64(&run.quotaUsed, 1)
		case e.GetTaskCompleted() != nil:
			atomic.AddInt64(&run.completed, 1)
		case e.GetTaskFailed() != nil:
			atomic.AddInt64(&run.failed, 1)
		default:
			return
		}
		if e.GetQuotaUsed() == nil && finished.Add(1) == int64(tasks) {
			close(all)
		}
	}
	if prepare != nil {
		prepare(bu)
	}
	sys, err := Start(bu.opts)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = sys.Stop() }()
	start := time.Now()
	for i := range tasks {
		t := probeTask(i, 0)
		t.MaxRequests = int32(turns)
		if r, err := sys.Submit(t); err != nil || !r.Accepted {
			b.Fatal(r, err)
		}
	}
	sys.Tick()
	select {
	case <-all:
	case <-time.After(5 * time.Minute):
		b.Fatalf("only %d of %d tasks finished", finished.Load(), tasks)
	}
	run.took = time.Since(start)
	return run
}

// BenchmarkTransientFaults: 500 three-turn tasks, every request failing
// with a 503 one time in five, beside the same run without faults. Goal:
// 0 tasks FAILED (a flaky backend is never the task's fault) and quota
// used per second >= 95 % of the fault-free run's: backed-off tasks leave
// no slot idle.
func BenchmarkTransientFaults(b *testing.B) {
	for range b.N {
		base := runFaultWorkload(b, 500, 3, 2*time.Millisecond, nil)
		faulty := runFaultWorkload(b, 500, 3, 2*time.Millisecond, func(bu *bundle) {
			var n atomic.Int64
			for _, s := range bu.sims {
				s.Inject(func(context.Context, gateway.Request) error {
					if n.Add(1)%5 == 0 {
						return gateway.Transient("sim", "HTTP 503")
					}
					return nil
				})
			}
		})
		rate := func(r faultRun) float64 { return float64(r.quotaUsed) / r.took.Seconds() }
		b.ReportMetric(float64(faulty.failed), "faulty-tasks-failed")
		b.ReportMetric(float64(base.failed), "baseline-tasks-failed")
		b.ReportMetric(rate(faulty), "faulty-quota/s")
		b.ReportMetric(rate(base), "baseline-quota/s")
		b.Logf("fault-free: %d requests in %s; 20%% 503s: %d requests in %s, %d completed, %d failed",
			base.quotaUsed, base.took, faulty.quotaUsed, faulty.took, faulty.completed, faulty.failed)
	}
}

// BenchmarkBackendOutage: one of three backends fails every request for
// an outage (its circuit opens for the recovery time), beside the same run
// without the outage. The 5-minute outage and 300 s recovery are scaled
// down 1:300 (1 s) against a 10 ms answer. Goal: the other two take its
// work: throughput >= 2/3 of the fault-free run.
func BenchmarkBackendOutage(b *testing.B) {
	const tasks, outage = 300, time.Second
	wrap := func(bu *bundle) {
		bu.opts.Backends[0] = breaker.Wrap(bu.opts.Backends[0], breaker.Config{FailureThreshold: 5, RecoveryTimeout: outage})
	}
	for range b.N {
		base := runFaultWorkload(b, tasks, 1, 10*time.Millisecond, wrap)
		faulty := runFaultWorkload(b, tasks, 1, 10*time.Millisecond, func(bu *bundle) {
			wrap(bu)
			var until atomic.Pointer[time.Time]
			bu.simNamed("a").Inject(func(context.Context, gateway.Request) error {
				now := time.Now()
				until.CompareAndSwap(nil, ptr(now.Add(outage)))
				if now.Before(*until.Load()) {
					return gateway.Transient("a", "HTTP 503 (outage)")
				}
				return nil
			})
		})
		tput := func(r faultRun) float64 { return float64(r.completed) / r.took.Seconds() }
		b.ReportMetric(tput(faulty), "outage-tasks/s")
		b.ReportMetric(tput(base), "baseline-tasks/s")
		b.ReportMetric(float64(faulty.failed), "outage-tasks-failed")
		b.Logf("fault-free: %d tasks in %s; outage of a: %d tasks in %s (%d failed)",
			base.completed, base.took, faulty.completed, faulty.took, faulty.failed)
	}
}

func ptr[T any](v T) *T { return &v }
