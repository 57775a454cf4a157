package actors

import (
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
	held := sys.Simulation().QueuedMessages()
	sys.desks.desk(ownerScheduler).guard.Unlock()
	require.GreaterOrEqual(t, held, 10, "the simulator's clock must not move while they wait")
	require.Eventually(t, func() bool { return sys.Simulation().QueuedMessages() == 0 }, 10*time.Second, time.Millisecond, "handled: none wait")

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
