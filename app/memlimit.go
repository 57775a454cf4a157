package app

import (
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// memoryLimit is the soft memory limit `fano run` sets for the Go runtime
// from orchestrator.state.memory_limit_mb: past it the collector runs more
// often rather than letting the heap double (GOGC). A GOMEMLIMIT in the
// environment was already applied by the runtime and wins, as does 0 (no
// limit). It returns the limit in bytes and who set it.
func memoryLimit(limitMB int) (bytes int64, source string) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return debug.SetMemoryLimit(-1), "GOMEMLIMIT"
	}
	if limitMB <= 0 {
		return 0, "none"
	}
	b := int64(limitMB) << 20
	debug.SetMemoryLimit(b)
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercentFor(b, 0))
	}
	return b, configMemoryLimit
}

// gcPercentUnderLimit is the GOGC fano runs with under its own soft
// memory limit while the live heap is small (a GOGC in the environment
// wins): collecting at three times the live heap rather than twice halves
// the collections of a small heap; a pipeline run of 20k items took 8-10 %
// less CPU for 10-15 MB more peak RSS (300 gained nothing more). See
// gcPercentFor for a large heap.
const gcPercentUnderLimit = 200

// gcPercentFor is the GOGC for a live heap of live bytes under a
// configured limit: gcPercentUnderLimit while three times the live heap
// stays well within the limit (the live heap under a quarter of it), else
// the runtime's 100. Past a third of the limit a heap at 200 would run up
// to the limit where 100 collects at twice the live heap; a quarter keeps
// a margin for the two seconds between looks.
func gcPercentFor(configured, live int64) int {
	if live < configured/4 {
		return gcPercentUnderLimit
	}
	return 100
}

// configMemoryLimit names the config's soft memory limit as its source.
const configMemoryLimit = "orchestrator.state.memory_limit_mb"

// SetMemoryLimit sets the config's soft memory limit for this process,
// as `fano run` does; `fano pipeline run` calls it. It returns the limit
// in bytes (0: none) and who set it.
func SetMemoryLimit(limitMB int) (bytes int64, source string) { return memoryLimit(limitMB) }

// limitFor is the soft memory limit to hold for a live heap of live
// bytes under a configured limit: the configured one while the live heap
// stays within two thirds of it, else twice the live heap (what GOGC=100
// gives). A limit the live heap itself nears makes the collector run
// without end: a run of a million pipeline items (225 MB live under
// 256 MB) went at 0.44x the items/s of one of 10k; at 1.43x the live heap
// 0.72x, at twice it 0.85x. Within two thirds the configured limit costs
// little: a million items at 140-160 MB live ran 3-5 % slower under
// 256 MB than under twice the live heap, at 314-322 MB peak RSS instead
// of 366-374. Past that point the limit follows the heap, and fano says
// so.
func limitFor(configured, live int64) int64 {
	if live <= configured/3*2 {
		return configured
	}
	return max(configured, live*2)
}

// followLiveHeap keeps the soft memory limit at limitFor(configured, the
// live heap after the last collection), and with setGC GOGC at
// gcPercentFor, looked at every interval until stop is closed; raised
// tells (once per rise past the last) how far.
func followLiveHeap(configured int64, setGC bool, interval time.Duration, stop <-chan struct{}, raised func(live, limit int64)) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	t := time.NewTicker(interval)
	defer t.Stop()
	current, told := configured, configured
	percent := gcPercentFor(configured, 0)
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return
		}
		live := int64(sample[0].Value.Uint64())
		if p := gcPercentFor(configured, live); setGC && p != percent {
			debug.SetGCPercent(p)
			percent = p
		}
		next := limitFor(configured, live)
		// Moved only by a tenth or more: no call per look.
		if d := next - current; d > current/10 || -d > current/10 || (next == configured && current != configured) {
			debug.SetMemoryLimit(next)
			current = next
			if next > told+told/4 {
				told = next
				raised(live, next)
			}
		}
	}
}
