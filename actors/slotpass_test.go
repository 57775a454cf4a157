package actors

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"fano/gateway"
	"fano/modules/probe"
	"fano/pb"
)

// A slot an ended run passes straight to the next task (no trip through
// the allocator) goes only to work the backend's quota can take: at the
// hourly limit the slot is given back and the rest wait, PENDING. Passed
// past the limit, each would start, have its request refused by the
// allocator, and be paused for quota.
func TestAPassedSlotStopsAtTheHourlyQuota(t *testing.T) {
	b := setup(t, setupOpts{clock: clockwork.NewFakeClock(), backends: []string{"api"}, conc: 1, hourly: 10,
		probe: probe.Config{NoPropose: true, Turns: 1}})
	sys := b.start()
	var tasks []*pb.Task
	for i := range 12 {
		tasks = append(tasks, probeTask(i, 0))
	}
	rs, err := sys.SubmitBatch(tasks)
	require.NoError(t, err)
	for _, r := range rs {
		require.True(t, r.Accepted, r.Reason)
	}
	usable := 9 // 10 an hour less the 10 % buffer
	b.waitCompleted(usable)
	b.waitSlotsFree()
	counts := sys.Counts()[probe.Name]
	require.Equal(t, map[pb.TaskState]int{pb.TaskState_TASK_STATE_COMPLETED: usable, pb.TaskState_TASK_STATE_PENDING: 3}, counts)
	for _, q := range sys.Quotas() {
		require.Equal(t, usable, q.HourlyUsed, q.Name)
	}
}

// The slot of an ended run is passed on only where the allocator could
// choose no other backend. Here b is free too (only one task may run at a
// time) and has more of its hour left than a: the allocator puts the next
// task there, and so must the scheduler.
func TestASlotIsPassedOnOnlyWhereNoOtherBackendIsFree(t *testing.T) {
	b := setup(t, setupOpts{backends: []string{"a", "b"}, conc: 1, hourly: 100,
		probe:  probe.Config{NoPropose: true, Turns: 1},
		mutate: func(o *Options) { o.MaxRunning = 1 }})
	sys := b.start()
	first, second := probeTask(1, 0), probeTask(2, 0)
	rs, err := sys.SubmitBatch([]*pb.Task{first, second})
	require.NoError(t, err)
	for _, r := range rs {
		require.True(t, r.Accepted, r.Reason)
	}
	started := map[string]string{}
	for len(started) < 2 {
		n := b.waitEvent("a task start", func(n Notice) bool { return n.Event.GetTaskStarted() != nil })
		s := n.Event.GetTaskStarted()
		started[s.TaskId] = s.Llm
	}
	require.Equal(t, map[string]string{first.Id: "a", second.Id: "b"}, started,
		fmt.Sprintf("a ran %s first; b had its whole hour left", first.Id))
}

// While fano takes no new work (SetAccepting(false): low disk), the slot
// of a run that ends is given back, not passed to the next task: running
// tasks go on, waiting ones wait.
func TestAnEndedRunPassesNoSlotWhileNoWorkIsTaken(t *testing.T) {
	b := setup(t, setupOpts{backends: []string{"api"}, conc: 1, probe: probe.Config{NoPropose: true, Turns: 1}})
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	b.simNamed("api").Inject(func(context.Context, gateway.Request) error {
		once.Do(func() {
			close(entered)
			<-release
		})
		return nil
	})
	sys := b.start()
	rs, err := sys.SubmitBatch([]*pb.Task{probeTask(1, 0), probeTask(2, 0), probeTask(3, 0)})
	require.NoError(t, err)
	for _, r := range rs {
		require.True(t, r.Accepted, r.Reason)
	}
	<-entered
	sys.SetAccepting(false)
	close(release)
	b.waitCompleted(1)
	b.waitSlotsFree()
	require.Equal(t, map[pb.TaskState]int{pb.TaskState_TASK_STATE_COMPLETED: 1, pb.TaskState_TASK_STATE_PENDING: 2},
		sys.Counts()[probe.Name])
}

// MaxRunning bounds the runs under way, slots passed on included. A
// dispatch can land between a run's end and its TaskComplete (here a
// tick, queued in the scheduler's mailbox before it) and take the place
// the run left; the slot that run frees is then given back, not passed
// to a third task.
func TestAPassedSlotKeepsToMaxRunning(t *testing.T) {
	b := setup(t, setupOpts{backends: []string{"a", "b"}, conc: 1, hourly: 100,
		probe: probe.Config{NoPropose: true, Turns: 1},
		mutate: func(o *Options) {
			o.MaxRunning = 1
			o.TickInterval = time.Hour // the one tick is the test's
		}})
	entered := make(chan string, 3)
	release := make(chan struct{}, 3)
	for _, name := range []string{"a", "b"} {
		b.simNamed(name).Inject(func(ctx context.Context, r gateway.Request) error {
			entered <- r.TaskID
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}
	sys := b.start()
	rs, err := sys.SubmitBatch([]*pb.Task{probeTask(1, 0), probeTask(2, 0), probeTask(3, 0)})
	require.NoError(t, err)
	for _, r := range rs {
		require.True(t, r.Accepted, r.Reason)
	}
	first := <-entered

	// Hold the module host, so the first run stops just before its end
	// (the module ends the task as it takes the answer).
	host := sys.modulePIDs[probe.Name].Id
	moduleGuard := &sys.desks.desk(moduleOwner(probe.Name)).guard
	moduleGuard.Lock()
	release <- struct{}{}
	waitUntil(t, "the answer at the module host", func() bool { return sys.mailboxes.queued(host) > 0 })

	// Hold the scheduler with a tick queued, then let the run end: its
	// TaskComplete queues behind the tick, whose dispatch sees the place
	// free.
	schedulerGuard := &sys.desks.desk(ownerScheduler).guard
	schedulerGuard.Lock()
	sys.root.Send(sys.schedulerPID, &pb.Tick{Now: nanos(sys.clock.Now())})
	moduleGuard.Unlock()
	waitUntil(t, "the first run's end", func() bool {
		n := 0
		sys.executors.each(func(*executor) { n++ })
		return n == 0
	})
	schedulerGuard.Unlock()

	// Once the scheduler, then the allocator, then the scheduler again
	// handled all they were sent, every run they started is counted.
	for _, pid := range []*actor.PID{sys.schedulerPID, sys.allocatorPID, sys.schedulerPID} {
		require.NoError(t, sys.state.barrier(pid))
	}
	require.Equal(t, 1, sys.Running(), "runs under way with MaxRunning 1")
	second := <-entered
	require.NotEqual(t, first, second)
	release <- struct{}{}
	third := <-entered
	require.NotContains(t, []string{first, second}, third)
	release <- struct{}{}
	b.waitCompleted(3)
}

// waitUntil yields until cond holds: for a state another goroutine
// reaches with no signal of its own.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; !cond(); i++ {
		require.Less(t, i, 10_000_000, "never: %s", what)
		runtime.Gosched()
	}
}

// The allocator publishes the quota view a charge changes before it
// answers the charge: whoever goes on from the answer (a run that ends
// and passes its slot on, schedulerActor.refill) reads a view with the
// charge in it. The charge here comes from a process that reads the view
// as the answer reaches it, on the allocator's goroutine: answered first,
// it would read the view from before.
func TestTheQuotaViewHoldsAChargeBeforeItIsAnswered(t *testing.T) {
	b := setup(t, setupOpts{backends: []string{"api"}, conc: 1, hourly: 2, // one usable, less the buffer
		probe: probe.Config{NoPropose: true, Turns: 1}})
	sys := b.start()
	sys.Tick() // the allocator publishes its first view
	require.NoError(t, sys.state.barrier(sys.allocatorPID))
	normal, _ := sys.inputs.canTake("api")
	require.True(t, normal, "the view before the charge: quota left")
	seen := make(chan bool, 1)
	charger := &funcProcess{fn: func(m any) {
		if _, ok := m.(*pb.Done); ok {
			normal, _ := sys.inputs.canTake("api")
			seen <- normal
		}
	}}
	pid, _ := sys.as.ProcessRegistry.Add(charger, "test-charger")
	defer sys.as.ProcessRegistry.Remove(pid)
	sys.root.RequestWithCustomSender(sys.allocatorPID, &pb.UseQuota{Backend: "api", TaskId: "charge-1"}, pid)
	require.False(t, <-seen, "the view still had quota left when the charge that used it up was answered")
}

// funcProcess is a process that runs fn on each message that reaches it,
// in the sender's goroutine.
type funcProcess struct{ fn func(msg any) }

func (p *funcProcess) SendUserMessage(_ *actor.PID, message any) {
	p.fn(actor.UnwrapEnvelopeMessage(message))
}
func (p *funcProcess) SendSystemMessage(*actor.PID, any) {}
func (p *funcProcess) Stop(*actor.PID)                   {}
