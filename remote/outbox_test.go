package remote

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/pb"
)

// flushes records the flushes an outbox hands to the writer.
type flushes struct {
	sent    []outboxFlush
	targets []*actor.PID
}

func (f *flushes) send(t *actor.PID, m any) {
	f.sent = append(f.sent, m.(outboxFlush))
	f.targets = append(f.targets, t)
}

// What is queued while a flush is on its way goes with it, as one
// message; an outbox with none on its way sends a new flush at once.
func TestOutboxCoalescesWhatIsQueued(t *testing.T) {
	var f flushes
	at := time.Unix(1000, 0)
	inbox := actor.NewPID("desk:1", hostInboxName)
	o := &outbox{target: inbox, send: f.send}

	o.call(&pb.RemoteCall{Call: 1}, at)
	require.Len(t, f.sent, 1, "the first call waits for nothing")
	o.call(&pb.RemoteCall{Call: 2}, at)
	o.call(&pb.RemoteCall{Call: 3}, at)
	o.cancel(&pb.RemoteCancel{Call: 2}, at)
	require.Len(t, f.sent, 1, "a flush was on its way: no other is needed")

	batch := f.sent[0].o.take().(wireCalls).RemoteCalls
	assert.Equal(t, []uint64{1, 3}, callNumbers(batch.Calls), "a call cancelled before it left is not sent")
	require.Len(t, batch.Cancels, 1)
	assert.EqualValues(t, 2, batch.Cancels[0].Call)
	assert.Same(t, inbox, f.targets[0])

	o.call(&pb.RemoteCall{Call: 4}, at)
	o.cancel(&pb.RemoteCancel{Call: 1}, at)
	require.Len(t, f.sent, 2, "the flush was taken: the next call needs a new one")
	batch = f.sent[1].o.take().(wireCalls).RemoteCalls
	assert.Equal(t, []uint64{4}, callNumbers(batch.Calls))
	require.Len(t, batch.Cancels, 1, "a call that left is cancelled at the host")
	assert.EqualValues(t, 1, batch.Cancels[0].Call)
}

// A flush the writer dropped (no link) is replaced once it has waited a
// tick with messages queued; a retarget sends what waits to the new
// address, or drops it for a new process.
func TestOutboxKickAndRetarget(t *testing.T) {
	var f flushes
	at := time.Unix(1000, 0)
	o := &outbox{target: actor.NewPID("desk:1", hostInboxName), send: f.send}
	o.call(&pb.RemoteCall{Call: 1}, at)
	o.kick(at, at.Add(time.Second))
	require.Len(t, f.sent, 1, "a flush handed over at the tick is not stale")
	o.kick(at.Add(time.Millisecond), at.Add(time.Second))
	require.Len(t, f.sent, 2, "a stale flush with calls queued was not replaced")

	moved := actor.NewPID("desk:2", hostInboxName)
	o.retarget(moved, false, at.Add(2*time.Second))
	require.Len(t, f.sent, 3)
	assert.Same(t, moved, f.targets[2], "what waits goes to the new address")
	assert.Equal(t, []uint64{1}, callNumbers(f.sent[2].o.take().(wireCalls).Calls))

	o.call(&pb.RemoteCall{Call: 2}, at.Add(3*time.Second))
	require.Len(t, f.sent, 4)
	o.reflush(at.Add(3 * time.Second))
	require.Len(t, f.sent, 5, "the peer is back: what waits is flushed again at once")
	o.retarget(moved, true, at.Add(4*time.Second))
	assert.Empty(t, f.sent[4].o.take().(wireCalls).Calls, "a new process got the calls of the one before")
	o.kick(at.Add(time.Hour), at.Add(time.Hour))
	assert.Len(t, f.sent, 5, "an empty outbox sends nothing")
}

// A lost peer's queue is dropped: what is still wanted is queued again
// when it is back.
func TestOutboxDrop(t *testing.T) {
	var f flushes
	at := time.Unix(1000, 0)
	o := &outbox{target: actor.NewPID("desk:1", hostInboxName), send: f.send}
	o.call(&pb.RemoteCall{Call: 1}, at)
	o.cancel(&pb.RemoteCancel{Call: 1}, at)
	o.drop()
	o.kick(at.Add(time.Millisecond), at.Add(time.Hour))
	require.Len(t, f.sent, 1, "a dropped queue is not flushed again")
	batch := f.sent[0].o.take().(wireCalls)
	assert.Empty(t, batch.Calls)
	assert.Empty(t, batch.Cancels)
}

func TestOutboxAnswers(t *testing.T) {
	var f flushes
	o := &outbox{target: actor.NewPID("orch:1", hubInboxName), send: f.send, answers: true}
	o.answer(&pb.RemoteAnswer{Call: 7}, time.Unix(1, 0))
	o.answer(&pb.RemoteAnswer{Call: 8}, time.Unix(1, 0))
	require.Len(t, f.sent, 1)
	got := f.sent[0].o.take().(wireAnswers).Answers
	require.Len(t, got, 2)
	assert.EqualValues(t, 7, got[0].Call)
	assert.EqualValues(t, 8, got[1].Call)
}

func callNumbers(cs []*pb.RemoteCall) []uint64 {
	var out []uint64
	for _, c := range cs {
		out = append(out, c.Call)
	}
	return out
}

// A handler that panics on a message loses that message, says so, and
// the inbox takes the next.
func TestInboxSurvivesAPanickingHandler(t *testing.T) {
	var dropped []any
	var got []uint64
	p := &inbox{
		handle: func(msg any, _ *actor.PID) {
			c := msg.(*pb.RemoteCall)
			if c.Call == 1 {
				panic("broken")
			}
			got = append(got, c.Call)
		},
		failed: func(msg any, _ any) { dropped = append(dropped, msg) },
	}
	p.SendUserMessage(nil, &pb.RemoteCall{Call: 1})
	p.SendUserMessage(nil, &actor.MessageEnvelope{Message: &pb.RemoteCall{Call: 2}})
	assert.Equal(t, []uint64{2}, got)
	require.Len(t, dropped, 1)
	assert.EqualValues(t, 1, dropped[0].(*pb.RemoteCall).Call)
}

// A host lost with calls queued for it does not get them when it is
// back: the hub sends again those it still waits for (and not one that
// failed or was cancelled meanwhile).
func TestLostHostsQueueDropped(t *testing.T) {
	var f flushes
	now := time.Unix(1000, 0)
	h := &Hub{cfg: HubConfig{Logger: zerolog.Nop()}, table: newHostTable("v", map[string][]string{"desk": {"s1"}}),
		outbox: map[string]*outbox{}, calls: map[uint64]*pendingCall{}}
	h.table.hello(&pb.HostHello{Host: "desk", Version: "v", Instance: "i1"}, now)
	ob := &outbox{target: actor.NewPID("desk:1", hostInboxName), send: f.send}
	h.outbox["desk"] = ob
	ob.call(&pb.RemoteCall{Call: 1}, now)
	ob.call(&pb.RemoteCall{Call: 2}, now)

	h.loseLocked("desk", "its link ended", now)
	assert.Empty(t, f.sent[0].o.take().(wireCalls).Calls, "a lost host's queued calls were kept")
}

// The calls of goroutines that became runnable together (the executors
// a WAL commit wakes) go together: the first lets the others queue
// theirs before its flush goes. The writer here takes each flush as it
// gets it, as an idle one does.
func TestOutboxLetsRunnableCallersJoin(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const callers = 8
	var mu sync.Mutex
	var batches [][]uint64
	o := &outbox{target: actor.NewPID("desk:1", hostInboxName)}
	o.send = func(_ *actor.PID, m any) {
		batch := m.(outboxFlush).o.take().(wireCalls).RemoteCalls
		mu.Lock()
		batches = append(batches, callNumbers(batch.Calls))
		mu.Unlock()
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := 1; i <= callers; i++ {
		wg.Add(1)
		go func(call uint64) {
			defer wg.Done()
			<-start
			o.call(&pb.RemoteCall{Call: call}, time.Unix(1000, 0))
		}(uint64(i))
	}
	close(start)
	wg.Wait()
	// The scheduler now and then runs the yielding caller first (it
	// looks at the global queue every so many turns): a second message
	// at most, where each call went alone without the yield.
	assert.LessOrEqual(t, len(batches), 2, "the calls queued together go as one message: %v", batches)
	n := 0
	for _, b := range batches {
		n += len(b)
	}
	assert.Equal(t, callers, n)
}

// While a batch of calls is being started, the answers its calls give go
// nowhere; the batch's release sends them as one message at once, and
// an answer after it goes as before.
func TestOutboxHoldsAnswersUntilTheBatchHasStarted(t *testing.T) {
	var f flushes
	at := time.Unix(1, 0)
	o := &outbox{target: actor.NewPID("orch:1", hubInboxName), send: f.send, answers: true}
	o.hold()
	o.hold() // a second batch from the same orchestrator, started meanwhile
	o.answer(&pb.RemoteAnswer{Call: 1}, at)
	o.answer(&pb.RemoteAnswer{Call: 2}, at)
	o.release(at)
	assert.Empty(t, f.sent, "the other batch is still starting")
	o.answer(&pb.RemoteAnswer{Call: 3}, at)
	o.release(at)
	require.Len(t, f.sent, 1, "the last release sends what the batches answered")
	assert.Equal(t, []uint64{1, 2, 3}, answerCalls(f.sent[0].o.take().(wireAnswers).Answers))

	o.hold()
	o.release(at)
	assert.Len(t, f.sent, 1, "a batch whose calls all wait on their backends sends nothing")

	o.answer(&pb.RemoteAnswer{Call: 4}, at)
	require.Len(t, f.sent, 2, "an answer outside a batch goes as before")
	o.hold()
	o.answer(&pb.RemoteAnswer{Call: 5}, at)
	o.release(at)
	assert.Len(t, f.sent, 2, "a flush on its way takes what the batch answered")
	assert.Equal(t, []uint64{4, 5}, answerCalls(f.sent[1].o.take().(wireAnswers).Answers))
}

func answerCalls(as []*pb.RemoteAnswer) []uint64 {
	out := make([]uint64, len(as))
	for i, a := range as {
		out[i] = a.Call
	}
	return out
}
