package actors

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"fano/modules"
	"fano/modules/probe"
	"fano/pb"
	"fano/wal"
)

// orderStore records the order of AppendAsync calls, beside what the test
// records, and can hold the fsync of one owner's appends.
type orderStore struct {
	Store
	mu    sync.Mutex
	trace []string
	hold  string        // owner whose appends wait for release ("" none)
	held  chan struct{} // closed by release
	// before, if set, runs in AppendAsync before the entries are queued.
	before func(entries []wal.Entry)
}

func (s *orderStore) note(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trace = append(s.trace, what)
}

func (s *orderStore) AppendAsync(entries ...wal.Entry) func() ([]uint64, error) {
	s.mu.Lock()
	before := s.before
	s.mu.Unlock()
	if before != nil {
		before(entries)
	}
	s.note("append " + entries[0].Owner)
	wait := s.Store.AppendAsync(entries...)
	s.mu.Lock()
	hold, held := s.hold, s.held
	s.mu.Unlock()
	if hold == "" || entries[0].Owner != hold {
		return wait
	}
	return func() ([]uint64, error) {
		<-held
		return wait()
	}
}

// A batch's queued callback runs only once its events are queued in the
// log: whatever it makes another owner write lands behind them, so the
// log never holds the later write without the earlier (a crash leaves a
// prefix). That is what lets an executor go on without an fsync.
func TestQueuedRunsOnceTheEventsAreInTheLog(t *testing.T) {
	b := setup(t, setupOpts{memory: true})
	store := &orderStore{Store: b.log}
	root := actor.NewActorSystem().Root
	sink := root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	s := &System{log: store, root: root, desks: &desks{notices: &notices{}}}
	first := newJournal(s, "module/a", sink)
	second := newJournal(s, "module/b", sink)
	defer first.close()
	defer second.close()

	written := make(chan struct{})
	ev := func() []*pb.Event {
		return []*pb.Event{{At: 1, Body: &pb.Event_ModuleEvent{ModuleEvent: &pb.ModuleEvent{Type: "x"}}}}
	}
	first.persistQueued(ev(), nil, func(err error) {
		require.NoError(t, err)
		store.note("queued module/a")
		second.persist(ev(), nil)
		close(written)
	}, nil)
	<-written
	second.close()
	first.close()

	assert.Equal(t, []string{"append module/a", "queued module/a", "append module/b"}, store.trace)
	var owners []string
	require.NoError(t, store.Replay(1, func(e wal.Entry) error { owners = append(owners, e.Owner); return nil }))
	assert.Equal(t, []string{"module/a", "module/b"}, owners, "the dependent write is behind in the log")
}

// startHeldProbe starts a system on an in-memory log whose fsyncs of one
// owner a test can hold (orderStore), with a probe module of two turns
// proposing nothing, and an actor that collects the replies sent to it.
// The actor runs in the sender's goroutine: a reply is in the channel
// before the module host takes its next message.
func startHeldProbe(t *testing.T) (*System, *orderStore, *actor.PID, chan proto.Message) {
	b := setup(t, setupOpts{memory: true, probe: probe.Config{NoPropose: true, Turns: 2}})
	store := &orderStore{Store: b.log}
	b.log, b.opts.Log = store, store
	sys := b.start()
	replies := make(chan proto.Message, 4)
	props := actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(proto.Message); ok {
			replies <- m
		}
	}, actor.WithDispatcher(actor.NewSynchronizedDispatcher(10)))
	return sys, store, sys.root.Spawn(props), replies
}

// A module answers an answer's events once they are queued, but its next
// action for the task only once they are applied: it decides on its
// state, which must hold the answer (the probe asks its follow-up only
// after the first answer is recorded).
func TestNextActionWaitsForTheAnswersEvents(t *testing.T) {
	sys, store, me, replies := startHeldProbe(t)
	host := sys.modulePIDs[probe.Name]
	task := &pb.Task{Id: "probe/exploration/w1", Module: probe.Name, Context: map[string]string{"question": "why?"}}

	store.mu.Lock()
	store.hold, store.held = moduleOwner(probe.Name), make(chan struct{})
	store.mu.Unlock()
	sys.root.RequestWithCustomSender(host, &pb.ModuleAnswer{Task: task, Answer: "because", ReplyWhenQueued: true}, me)
	done, ok := (<-replies).(*pb.Done)
	require.True(t, ok, "the answer is acknowledged once queued, its fsync held")
	require.Nil(t, done.Error)

	sys.root.RequestWithCustomSender(host, &pb.NextAction{Task: task}, me)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := request[*pb.BarrierReply](sys.asks, ctx, host, &pb.Barrier{})
	require.NoError(t, err) // the host has taken the NextAction
	select {
	case r := <-replies:
		t.Fatalf("next action answered before the answer's events were applied: %v", r)
	default:
	}

	close(store.held)
	next, ok := (<-replies).(*pb.NextActionReply)
	require.True(t, ok)
	assert.Equal(t, int32(modules.ActionLLMRequest), next.Kind)
	assert.Contains(t, next.Prompt, "Follow-up 1", "decided on the state with the first answer")
}

// An answer names its request's intent, and closes it: the first write of
// a run carries the task's start before the intent, and the answer must
// close the intent, not the start (verify reports an intent no answer
// closes).
func TestAnswersNameTheirIntents(t *testing.T) {
	b := setup(t, setupOpts{probe: probe.Config{Questions: questions(4), Turns: 2}})
	sys := b.start()
	b.waitCompleted(4)
	require.NoError(t, sys.Stop())

	intents := map[uint64]string{} // seq -> task
	answers := 0
	require.NoError(t, b.log.Replay(1, func(ent wal.Entry) error {
		e, err := decodeEvent(ent)
		if err != nil {
			return err
		}
		if r := e.GetLlmRequestStarted(); r != nil {
			require.True(t, ent.Intent, "seq %d", ent.Seq)
			intents[ent.Seq] = r.TaskId
		}
		if a := e.GetLlmResponseReceived(); a != nil {
			answers++
			assert.Equal(t, a.TaskId, intents[a.RequestSeq], "answer at seq %d names seq %d", ent.Seq, a.RequestSeq)
		}
		return nil
	}))
	assert.Equal(t, 8, answers)
	open, err := b.log.Uncommitted()
	require.NoError(t, err)
	assert.Empty(t, seqsOf(open), "every answer closed its intent as it was written")
}

// blockedNext is the probe whose first NextAction waits for release: the
// run handed out holds its start, unwritten, until then.
type blockedNext struct {
	*probe.Module
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (m *blockedNext) NextAction(t *pb.Task) (modules.Action, error) {
	m.once.Do(func() {
		close(m.entered)
		<-m.release
	})
	return m.Module.NextAction(t)
}

// A task handed out is running even before its start is durable: a
// person's cancel goes to its executor, which ends it, instead of a
// cancel written behind the executor's back while it goes on to ask.
func TestCancelReachesARunNotYetStarted(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC))
	b := setup(t, setupOpts{clock: clock, backends: []string{"a"}, memory: true,
		probe: probe.Config{NoPropose: true, Turns: 1}, mutate: func(o *Options) { o.TickInterval = time.Hour }})
	mod := &blockedNext{Module: b.probe, entered: make(chan struct{}), release: make(chan struct{})}
	b.opts.Modules = []modules.Module{mod}
	store := &orderStore{Store: b.log}
	b.log, b.opts.Log = store, store
	sys := b.start()
	task := probeTask(1, 0)
	_, err := sys.Submit(task)
	require.NoError(t, err)
	// The scheduler's writes from now on wait for a slow disk: the run's
	// start is queued, not applied.
	store.mu.Lock()
	store.hold, store.held = ownerScheduler, make(chan struct{})
	store.mu.Unlock()
	sys.Tick()
	<-mod.entered

	// Posted before the barrier below (Cancel itself waits for its
	// answer, which, written by the scheduler, would wait for the disk).
	cancelled := sys.root.RequestFuture(sys.schedulerPID, &pb.CancelTask{TaskId: task.Id, Reason: "not needed"}, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = request[*pb.BarrierReply](sys.asks, ctx, sys.schedulerPID, &pb.Barrier{}) // the cancel was handled
	require.NoError(t, err)
	// A cancel of no task is the orchestrator's barrier: a cancel the
	// scheduler sent it before has reached the executor.
	_, err = request[*pb.Done](sys.asks, ctx, sys.orchestratorPID, &pb.CancelTask{TaskId: "none"})
	require.NoError(t, err)
	close(mod.release)
	close(store.held)
	res, err := cancelled.Result()
	require.NoError(t, err)
	require.Nil(t, res.(*pb.Done).GetError())
	b.waitEvent("the cancel", func(n Notice) bool { return n.Event.GetTaskCancelled() != nil })
	require.NoError(t, sys.Stop())
	var types []string
	require.NoError(t, b.log.Replay(1, func(ent wal.Entry) error {
		if ent.Owner == ownerScheduler {
			types = append(types, ent.Type)
		}
		return nil
	}))
	assert.Equal(t, []string{"task_submitted", "task_started", "task_cancelled"}, types)
}

// An answer asked with end_if_done that ends its task (the probe's last
// turn) has the module's completion written with it, and is answered as
// ended once both are queued, before they are durable: no NextAction
// waits for the answer's events to be applied. An answer that leaves a
// turn to go is answered not ended.
func TestAnEndingAnswerEndsItsTaskWithoutWaitingForItsEvents(t *testing.T) {
	sys, store, me, replies := startHeldProbe(t)
	host := sys.modulePIDs[probe.Name]
	task := &pb.Task{Id: "probe/exploration/e1", Module: probe.Name, Context: map[string]string{"question": "why?"}}
	reply := func() *pb.NextActionReply {
		t.Helper()
		select {
		case r := <-replies:
			next, ok := r.(*pb.NextActionReply)
			require.True(t, ok, "reply %T", r)
			require.Nil(t, next.Error)
			return next
		case <-time.After(30 * time.Second):
			t.Fatal("no reply")
			return nil
		}
	}
	answer := &pb.ModuleAnswer{Task: task, Answer: "because", ReplyWhenQueued: true, EndIfDone: true}

	sys.root.RequestWithCustomSender(host, answer, me)
	require.False(t, reply().Ended, "one turn is left")
	sys.root.RequestWithCustomSender(host, &pb.NextAction{Task: task}, me)
	require.Equal(t, int32(modules.ActionLLMRequest), reply().Kind, "the second turn")

	store.mu.Lock()
	store.hold, store.held = moduleOwner(probe.Name), make(chan struct{})
	store.mu.Unlock()
	sys.root.RequestWithCustomSender(host, answer, me)
	last := reply() // with the module's fsync held
	require.True(t, last.Ended, "the last answer ends the task")
	require.Nil(t, last.EndError)
	close(store.held)
	require.NoError(t, sys.Stop())

	var mine []string
	var seqs []uint64
	require.NoError(t, store.Replay(1, func(ent wal.Entry) error {
		e, err := decodeEvent(ent)
		if err != nil {
			return err
		}
		if me := e.GetModuleEvent(); me != nil && me.TaskId == task.Id {
			mine, seqs = append(mine, me.Type), append(seqs, ent.Seq)
		}
		return nil
	}))
	require.Equal(t, []string{"answer_recorded", "answer_recorded", "question_done"}, mine)
	require.Equal(t, seqs[1]+1, seqs[2], "the completion is written with the last answer")
}

// A task seen completed has its module's events for it in what
// WithModule shows. Its completion is written after them, but each owner
// applies its own events as its journal hands them back: here the
// module's are durable and held from it, and WithModule waits for them.
func TestWithModuleShowsTheEventsOfACompletedTask(t *testing.T) {
	b := setup(t, setupOpts{clock: clockwork.NewFakeClock(), memory: true, backends: []string{"api"},
		probe: probe.Config{NoPropose: true, Turns: 1}})
	store := &orderStore{Store: b.log, hold: moduleOwner(probe.Name), held: make(chan struct{})}
	b.log, b.opts.Log = store, store
	sys := b.start()
	task := probeTask(1, 0)
	_, err := sys.Submit(task)
	require.NoError(t, err)
	b.waitCompleted(1)

	held := sys.offActor.Load() // the module's batch, its Persisted not yet posted
	seen := make(chan int, 1)
	go func() {
		_ = sys.WithModule(probe.Name, func(m modules.Module) { seen <- len(m.(*probe.Module).Answers()[task.Id]) })
	}()
	released := false
	for {
		select {
		case n := <-seen:
			require.True(t, released, "WithModule read the module before its events were applied")
			require.Equal(t, 1, n, "the module's answer for the completed task")
			return
		default:
		}
		// Released once WithModule's wait is queued behind the held batch.
		if !released && sys.offActor.Load() > held {
			close(store.held)
			released = true
		}
		runtime.Gosched()
	}
}

// The scheduler hands an answer to the module (TaskEvents then_module)
// only once the answer's event is queued in the log: the module's events
// for it land behind it, so the log never holds them without it. The
// store lets the module host take everything sent to it so far, and
// write what it decided, before the answer is queued.
func TestTheModuleTakesAnAnswerOnceItIsQueued(t *testing.T) {
	b := setup(t, setupOpts{memory: true, probe: probe.Config{NoPropose: true, Turns: 1}})
	store := &orderStore{Store: b.log}
	b.log, b.opts.Log = store, store
	sys := b.start()
	host := sys.modulePIDs[probe.Name]
	store.mu.Lock()
	store.before = func(entries []wal.Entry) {
		for _, e := range entries {
			if e.Type != "llm_response_received" {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := request[*pb.BarrierReply](sys.asks, ctx, host, &pb.Barrier{Applied: true})
			assert.NoError(t, err)
			store.note("answer")
		}
	}
	store.mu.Unlock()
	_, err := sys.Submit(probeTask(1, 0))
	require.NoError(t, err)
	b.waitCompleted(1)

	store.mu.Lock()
	trace := slices.Clone(store.trace)
	store.mu.Unlock()
	answer := slices.Index(trace, "answer")
	require.GreaterOrEqual(t, answer, 0, "trace %v", trace)
	module := slices.Index(trace, "append "+moduleOwner(probe.Name))
	require.GreaterOrEqual(t, module, 0, "trace %v", trace)
	assert.Less(t, answer, module, "the module wrote before the answer was queued: %v", trace)
}
