package main

import (
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// BenchmarkShutdown measures, on real `fano run` processes, the time from
// SIGTERM to exit while an LLM call is in flight (the call must really be
// cancelled, the task paused, a checkpoint written), beside the time the
// same binary takes to exit when it is idle. Each of b.N rounds runs five
// of each; the medians are reported. Goal: in flight <= 2 s.
func BenchmarkShutdown(b *testing.B) {
	const runs = 5
	dir := b.TempDir()
	slow := writeConfig(b, b.TempDir(), slowConfig(60_000))
	fast := writeConfig(b, b.TempDir(), slowConfig(5))
	busyData := filepath.Join(dir, "busy")
	idleData := filepath.Join(dir, "idle")
	if _, errOut, err := runQuick(b, "run", "--until-idle", "--config", fast, "--data-dir", idleData); err != nil {
		b.Fatalf("prepare the idle data dir: %v\n%s", err, errOut)
	}
	var inFlight, idle []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := 0; j < runs; j++ {
			r := startFano(b, slow, busyData, true)
			took, err := r.stop(syscall.SIGTERM)
			if err != nil {
				b.Fatalf("in flight: %v\n%s", err, r.stderrText())
			}
			inFlight = append(inFlight, took)

			r = startFano(b, slow, idleData, false)
			took, err = r.stop(syscall.SIGTERM)
			if err != nil {
				b.Fatalf("idle: %v\n%s", err, r.stderrText())
			}
			idle = append(idle, took)
		}
	}
	b.StopTimer()
	mf, mi := median(inFlight), median(idle)
	b.ReportMetric(float64(mf)/float64(time.Millisecond), "inflight-exit-ms")
	b.ReportMetric(float64(mi)/float64(time.Millisecond), "idle-exit-ms")
	b.ReportMetric(float64(mf)/float64(mi), "inflight/idle")
	b.ReportMetric(2000, "goal-ms")
	if mf > 2*time.Second {
		b.Errorf("median exit with a call in flight took %v, goal 2s", mf)
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
