package actors

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"fano/modules/probe"
	"fano/pb"
)

// The dump's mailbox depths count what waits: a scheduler held busy with
// ten ticks behind it shows them, and is listed first.
func TestMailboxesCountWaitingMessages(t *testing.T) {
	b := setup(t, setupOpts{clock: clockwork.NewFakeClock(), probe: probe.Config{NoPropose: true}, memory: true})
	sys := b.start()
	require.NoError(t, sys.state.barrier(sys.schedulerPID))

	// The scheduler takes its guard for each message: holding it keeps
	// the first tick in hand and the rest in the mailbox.
	sys.desks.desk(ownerScheduler).guard.Lock()
	for range 10 {
		sys.root.Send(sys.schedulerPID, &pb.Tick{Now: nanos(b.clock.Now())})
	}
	boxes := sys.Mailboxes()
	held := sys.QueuedMessages()
	sys.desks.desk(ownerScheduler).guard.Unlock()
	require.GreaterOrEqual(t, held, 10, "the simulator's clock must not move while they wait")
	require.Eventually(t, func() bool { return sys.QueuedMessages() == 0 }, 10*time.Second, time.Millisecond, "handled: none wait")

	require.NotEmpty(t, boxes)
	require.Equal(t, sys.schedulerPID.Id, boxes[0].Actor, "deepest first: %v", boxes)
	require.GreaterOrEqual(t, boxes[0].Depth, 10, "%v", boxes)
	names := map[string]bool{}
	for _, bx := range boxes {
		names[bx.Actor] = true
	}
	for _, pid := range []string{sys.orchestratorPID.Id, sys.allocatorPID.Id, sys.modulePIDs[probe.Name].Id} {
		require.True(t, names[pid], "%s missing from %v", pid, boxes)
	}
}

// Warm goroutines run every piece of work at once (none waits for
// another), hand the next one to a goroutine that is waiting instead of
// starting a new one, and keep at most maxParked waiting.
func TestWarmGoroutinesReuseAndBound(t *testing.T) {
	w := &warmGoroutines{throughput: 1, maxParked: 2, work: make(chan func())}
	before := runtime.NumGoroutine()
	const n = 50
	release := make(chan struct{})
	var started, ended sync.WaitGroup
	started.Add(n)
	ended.Add(n)
	for range n {
		w.Schedule(func() {
			started.Done()
			<-release
			ended.Done()
		})
	}
	started.Wait() // all n at once
	close(release)
	ended.Wait()
	settled := func(cond func() bool) {
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			require.True(t, time.Now().Before(deadline), "parked %d, goroutines %d (before %d)", w.parked.Load(), runtime.NumGoroutine(), before)
			runtime.Gosched()
		}
	}
	settled(func() bool { return w.parked.Load() == 2 && runtime.NumGoroutine() <= before+2 })

	// The next work goes to one of the two waiting goroutines: inside it,
	// one is left waiting (a new goroutine would leave two).
	parkedDuring := make(chan int32, 1)
	w.Schedule(func() { parkedDuring <- w.parked.Load() })
	require.Equal(t, int32(1), <-parkedDuring)
	settled(func() bool { return w.parked.Load() == 2 })
}
