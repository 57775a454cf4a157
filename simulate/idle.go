package simulate

import (
	"runtime"
	"runtime/metrics"
	"time"
)

// goroutineStates reads what the Go scheduler says of every goroutine of
// the process: how many run, wait for a P, or are in a system call. The
// driver uses it to tell when the system under simulation has nothing
// left to do at the current instant: every goroutine but the driver's own
// is blocked (on a channel, a lock, the fake clock). Nothing can then
// happen until the driver moves the clock, since the simulation has no
// socket and no real timer that could wake one; the counters the actors
// keep (mailboxes, waiting calls) can only say what they were told of.
type goroutineStates struct {
	samples [3]metrics.Sample
}

func newGoroutineStates() *goroutineStates {
	g := &goroutineStates{}
	g.samples[0].Name = "/sched/goroutines/running:goroutines"
	g.samples[1].Name = "/sched/goroutines/runnable:goroutines"
	g.samples[2].Name = "/sched/goroutines/not-in-go:goroutines"
	return g
}

// schedCounts is one reading of the scheduler.
type schedCounts struct {
	running, runnable, notInGo uint64
}

// read takes a reading; it allocates nothing and takes the scheduler's
// lock only briefly, so the driver can call it in a loop.
func (g *goroutineStates) read() schedCounts {
	metrics.Read(g.samples[:])
	var c schedCounts
	for i, p := range []*uint64{&c.running, &c.runnable, &c.notInGo} {
		if g.samples[i].Value.Kind() == metrics.KindUint64 {
			*p = g.samples[i].Value.Uint64()
		}
	}
	return c
}

// othersBlocked: no goroutine but the caller runs, waits to run, or is in
// a system call beyond the floor: the goroutines that sit in one for good
// (os/signal's receiver waits for signals in one), counted before the
// simulated system starts (syscallFloor).
func (c schedCounts) othersBlocked(floor uint64) bool {
	return c.running <= 1 && c.runnable == 0 && c.notInGo <= floor
}

// syscallFloor is the goroutines in a system call while nothing else
// runs, the fewest over a few readings: those that stay in one. Taken
// before anything of the simulation runs; the driver corrects it as it
// goes (see driver.quiet).
func (g *goroutineStates) syscallFloor() uint64 {
	floor, seen := uint64(0), false
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
		runtime.Gosched()
		if c := g.read(); c.running <= 1 && c.runnable == 0 {
			if !seen || c.notInGo < floor {
				floor = c.notInGo
			}
			if seen {
				return floor
			}
			seen = true
		}
	}
	return floor
}
