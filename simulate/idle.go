package simulate

import (
	"runtime/metrics"
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

// othersBlocked: no goroutine but the caller runs or waits to run. One
// in a system call does not count: a goroutine parked for good in one
// (os/signal's receiver) would hold every instant open; the system's own
// system calls (a WAL write) are counted by the actors instead (their
// work handed off the actors, see actors.System.QueuedMessages).
func (c schedCounts) othersBlocked() bool { return c.running <= 1 && c.runnable == 0 }
