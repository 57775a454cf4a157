package actors

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
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

// Warm goroutines run every piece of work at once (none waits for
// another), hand the next one to a goroutine that is waiting instead of
// starting a new one, and keep at most maxParked waiting.
func TestWarmGoroutinesReuseAndBound(t *testing.T) {
	w := &warmGoroutines{throughput: 1, maxParked: 2, work: make(chan func())}
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
	require.Equal(t, int32(n), w.live.Load(), "one goroutine each")
	close(release)
	ended.Wait()
	settled := func(cond func() bool) {
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			require.True(t, time.Now().Before(deadline), "parked %d, live %d", w.parked.Load(), w.live.Load())
			runtime.Gosched()
		}
	}
	settled(func() bool { return w.parked.Load() == 2 && w.live.Load() == 2 })

	// The next work goes to one of the two waiting goroutines: inside it,
	// one is left waiting (a new goroutine would leave two).
	parkedDuring := make(chan int32, 1)
	w.Schedule(func() { parkedDuring <- w.parked.Load() })
	require.Equal(t, int32(1), <-parkedDuring)
	settled(func() bool { return w.parked.Load() == 2 && w.live.Load() == 2 })
}

// recordingInvoker is the actor side of a mailbox under test: it records
// what it is handed and panics on "panic".
type recordingInvoker struct {
	mu        sync.Mutex
	user      []any
	system    []any
	escalated []any
	got       chan struct{} // one per user message handled
}

func (r *recordingInvoker) InvokeSystemMessage(m any) {
	r.mu.Lock()
	r.system = append(r.system, m)
	r.mu.Unlock()
}

func (r *recordingInvoker) InvokeUserMessage(m any) {
	if m == "panic" {
		panic("boom")
	}
	r.mu.Lock()
	r.user = append(r.user, m)
	r.mu.Unlock()
	r.got <- struct{}{}
}

func (r *recordingInvoker) EscalateFailure(_ any, m any) {
	r.mu.Lock()
	r.escalated = append(r.escalated, m)
	r.mu.Unlock()
	r.got <- struct{}{}
}

// Goroutines posting at once, in rounds that each end with the mailbox
// going idle (where a wake-up can be lost): every message is handled once,
// each poster's in the order it posted them, and the depth counter ends
// at zero.
func TestMailboxLosesNothingUnderConcurrentPosts(t *testing.T) {
	const posters, rounds = 4, 3000
	depth := &mailboxCount{}
	m := newMailbox(depth)
	inv := &recordingInvoker{got: make(chan struct{}, posters*rounds)}
	m.RegisterHandlers(inv, &warmGoroutines{throughput: 7, maxParked: 4, work: make(chan func())})
	deadline := time.After(60 * time.Second)
	for i := range rounds {
		start := make(chan struct{})
		var wg sync.WaitGroup
		for p := range posters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				m.PostUserMessage([2]int{p, i})
				if i%100 == 0 {
					m.PostSystemMessage(i)
				}
			}()
		}
		close(start)
		wg.Wait()
		for n := 0; n < posters; n++ {
			select {
			case <-inv.got:
			case <-deadline:
				t.Fatalf("round %d: a message was never handled (a wake-up was lost)", i)
			}
		}
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	next := make([]int, posters)
	for _, x := range inv.user {
		pi := x.([2]int)
		require.Equal(t, next[pi[0]], pi[1], "poster %d out of order", pi[0])
		next[pi[0]]++
	}
	require.Len(t, inv.user, posters*rounds)
	require.Len(t, inv.system, posters*(rounds/100))
	require.Equal(t, int64(0), depth.n.Load())
	require.Equal(t, 0, m.UserMessageCount())
}

// A suspended mailbox holds user messages back until it is resumed; a
// panic goes to the supervisor with its message, and the depth counter
// does not keep it.
func TestMailboxSuspendsAndEscalates(t *testing.T) {
	depth := &mailboxCount{}
	m := newMailbox(depth)
	inv := &recordingInvoker{got: make(chan struct{}, 10)}
	m.RegisterHandlers(inv, actor.NewSynchronizedDispatcher(300))
	m.PostSystemMessage(&actor.SuspendMailbox{})
	m.PostUserMessage("a")
	m.PostUserMessage("panic")
	require.Empty(t, inv.user, "handled while suspended")
	require.Equal(t, int64(2), depth.n.Load())
	m.PostSystemMessage(&actor.ResumeMailbox{})
	<-inv.got
	<-inv.got
	require.Equal(t, []any{"a"}, inv.user)
	require.Equal(t, []any{"panic"}, inv.escalated)
	require.Equal(t, int64(0), depth.n.Load())
	m.PostUserMessage("b") // it goes on after the panic
	<-inv.got
	require.Equal(t, []any{"a", "b"}, inv.user)
}

// The queue keeps order and reuses its room: a steady stream that never
// drains it (ten waiting at all times) does not grow it.
func TestFifoReusesItsRoom(t *testing.T) {
	var q fifo
	for i := range 10 {
		q.push(i)
	}
	for i := 10; i < 100000; i++ {
		q.push(i)
		x, ok := q.pop()
		require.True(t, ok)
		require.Equal(t, i-10, x)
	}
	require.LessOrEqual(t, cap(q.items), 32)
	for i := 100000 - 10; i < 100000; i++ {
		x, _ := q.pop()
		require.Equal(t, i, x)
	}
	_, ok := q.pop()
	require.False(t, ok)
}

// A message posted just as a run ends, before it lets go, finds the
// mailbox running and starts no run of its own: the ending run handles it.
func TestMailboxHandlesWhatArrivesAsItEnds(t *testing.T) {
	m := newMailbox(&mailboxCount{})
	inv := &recordingInvoker{got: make(chan struct{}, 10)}
	m.RegisterHandlers(inv, actor.NewSynchronizedDispatcher(300))
	late := true
	m.ending = func() {
		if late {
			late = false
			m.PostUserMessage("late")
		}
	}
	m.PostUserMessage("first")
	require.Equal(t, []any{"first", "late"}, inv.user)
}
