package actors

// Tests of the round trips a task no longer makes: each checks that what
// the removed message did is still done.

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"fano/gateway"
	"fano/modules/probe"
	"fano/pb"
	"fano/wal"
)

// A module that says a task is done ends it in the same ask
// (NextAction.end_if_done): its completion events are written once, and
// before the task's completion in the log.
func TestModuleEndsADoneTaskOnceBeforeItsCompletion(t *testing.T) {
	b := setup(t, setupOpts{probe: probe.Config{Questions: questions(20), Turns: 2}})
	sys := b.start()
	b.waitCompleted(20)
	require.NoError(t, sys.Stop())
	ended := map[string]int{}
	completed := 0
	require.NoError(t, b.log.Replay(1, func(ent wal.Entry) error {
		e, err := decodeEvent(ent)
		if err != nil {
			return err
		}
		if me := e.GetModuleEvent(); me != nil && me.Type == "question_done" {
			ended[me.TaskId]++
		}
		if c := e.GetTaskCompleted(); c != nil {
			completed++
			require.Equal(t, 1, ended[c.TaskId], "task %s: its module's completion, once, before its own", c.TaskId)
		}
		return nil
	}))
	require.Equal(t, 20, completed)
	for id, n := range ended {
		require.Equal(t, 1, n, "task %s ended by its module %d times", id, n)
	}
}

// A call's goroutine takes the call out of its gateway host's running
// calls as it ends (no message to the host): once every task is done,
// none is in flight.
func TestGatewayCallsLeaveAsTheyEnd(t *testing.T) {
	b := setup(t, setupOpts{probe: probe.Config{Questions: questions(10), Turns: 2}})
	sys := b.start()
	b.waitCompleted(10)
	for _, h := range sys.BackendHealth(context.Background()) {
		require.Zero(t, h.Running, "backend %s", h.Name)
	}
}

// The archive key of a completed task, built by hand, is the one fmt
// wrote: zero-padded to 20 digits so keys sort by completion time.
func TestCompletedKeyAsFmtWroteIt(t *testing.T) {
	for _, at := range []int64{0, 7, 1767607200000000000, math.MaxInt64, -5} {
		tk := &pb.Task{Id: "probe/exploration/q1", CompletedAt: at}
		require.Equal(t, fmt.Sprintf("done/%020d/%s", at, tk.Id), completedKey(tk))
	}
}

// An executor hands its request straight to the backend's calls: the
// gateway host's mailbox carries none of them, and the calls still ran
// and were answered.
func TestRequestsSkipTheGatewayMailbox(t *testing.T) {
	b := setup(t, setupOpts{probe: probe.Config{Questions: questions(10), Turns: 2}})
	sys := b.start()
	b.waitCompleted(10)
	var posted int64
	for _, pid := range sys.gatewayPIDs {
		posted += sys.mailboxes.posted(pid.Id)
	}
	require.Zero(t, posted, "messages through the gateway hosts' mailboxes")
	answers := b.logged(t, func(e *pb.Event) bool { return e.GetLlmResponseReceived() != nil })
	require.Equal(t, 20, answers, "two answered calls a task")
}

// A cancelled call's backend sees why, as the executor gave it: a
// person's cancel by its reason, a shutdown as gateway.ErrShutdown (a
// browser leaves an answer running then).
func TestCancelledCallSeesItsCause(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop func(b *bundle, id string)
		want func(t *testing.T, cause error)
	}{
		{"by a person", func(b *bundle, id string) { require.NoError(t, b.sys.Cancel(id, "by me")) },
			func(t *testing.T, cause error) { require.EqualError(t, cause, "cancelled: by me") }},
		{"shutdown", func(b *bundle, _ string) { go func() { _ = b.sys.Stop() }() },
			func(t *testing.T, cause error) { require.ErrorIs(t, cause, gateway.ErrShutdown) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := fakeRig(t)
			entered, causes := make(chan struct{}, 1), make(chan error, 1)
			b.simNamed("a").Inject(func(ctx context.Context, _ gateway.Request) error {
				entered <- struct{}{}
				<-ctx.Done()
				causes <- context.Cause(ctx)
				return ctx.Err()
			})
			b.start()
			task := probeTask(1, 0)
			_, err := b.sys.Submit(task)
			require.NoError(t, err)
			b.sys.Tick()
			select {
			case <-entered:
			case <-time.After(30 * time.Second):
				t.Fatal("the call never reached the backend")
			}
			tc.stop(b, task.Id)
			select {
			case cause := <-causes:
				tc.want(t, cause)
			case <-time.After(30 * time.Second):
				t.Fatal("the call was never cancelled")
			}
		})
	}
}

// An executor asks its module what a task does next in its own goroutine
// (moduleHost.nextActionNow): with nothing to wait for, no such ask goes
// through the module host's mailbox, and the tasks still make the
// requests their module decides. A stopped host is asked through its
// mailbox again.
func TestNextActionSkipsTheModuleMailbox(t *testing.T) {
	b := setup(t, setupOpts{probe: probe.Config{Questions: questions(10), Turns: 1}})
	sys := b.start()
	b.waitCompleted(10)
	host := sys.moduleHosts[probe.Name].Load()
	require.NotNil(t, host)
	require.Zero(t, host.mailed.Load(), "NextAction asks through the module host's mailbox")
	require.NoError(t, sys.Stop())
	require.Nil(t, sys.moduleHosts[probe.Name].Load(), "a stopped host is not asked in place")
	asked := b.logged(t, func(e *pb.Event) bool { return e.GetLlmRequestStarted() != nil })
	require.Equal(t, 10, asked, "one request a task, decided by NextAction")
}

// A request's intent is queued in the scheduler's journal by its
// executor, not sent through the scheduler's mailbox: with the scheduler
// held busy from just before the intent, the intent and the quota still
// become durable and the call goes out. Through the mailbox the call
// would wait for the scheduler.
func TestRequestIntentSkipsTheSchedulersMailbox(t *testing.T) {
	b := setup(t, setupOpts{probe: probe.Config{NoPropose: true, Turns: 1}})
	called := make(chan struct{}, 1)
	b.sims[0].Inject(func(context.Context, gateway.Request) error {
		select {
		case called <- struct{}{}:
		default:
		}
		return nil
	})
	sys := b.start()
	guard := &sys.desks.desk(ownerScheduler).guard
	ready, held := make(chan string), make(chan struct{})
	sys.execEnv.hookBeforeIntent = func(id string) {
		ready <- id
		<-held
	}
	_, err := sys.Submit(probeTask(1, 0))
	require.NoError(t, err)
	sys.Tick()
	id := <-ready
	guard.Lock() // the scheduler handles no message until Unlock
	sys.execEnv.hookBeforeIntent = nil
	close(held)
	select {
	case <-called:
	case <-time.After(20 * time.Second):
		guard.Unlock()
		t.Fatalf("task %s: no call while the scheduler was busy: its intent waited in the scheduler's mailbox", id)
	}
	guard.Unlock()
	b.waitCompleted(1)

	// Written once, after the run's start and before the answer.
	var kinds []string
	require.NoError(t, b.log.Replay(1, func(ent wal.Entry) error {
		e, err := decodeEvent(ent)
		if err != nil {
			return err
		}
		switch {
		case e.GetTaskStarted() != nil:
			kinds = append(kinds, "started")
		case e.GetLlmRequestStarted() != nil:
			kinds = append(kinds, "intent")
		case e.GetLlmResponseReceived() != nil:
			kinds = append(kinds, "answer")
		}
		return nil
	}))
	require.Equal(t, []string{"started", "intent", "answer"}, kinds)
}

// An intent the scheduler's journal refuses (it is closing: the scheduler
// stops or restarts) goes through the scheduler's mailbox: the request
// still leaves and the task completes, nothing written through the
// closed journal.
func TestRefusedIntentGoesThroughTheSchedulersMailbox(t *testing.T) {
	b := setup(t, setupOpts{probe: probe.Config{NoPropose: true, Turns: 2}})
	sys := b.start()
	owner := &funcProcess{fn: func(any) {}}
	pid, _ := sys.as.ProcessRegistry.Add(owner, "test-closed-journal")
	defer sys.as.ProcessRegistry.Remove(pid)
	closed := newJournal(sys, ownerScheduler, pid)
	closed.close()
	sys.execEnv.schedulerJournal.Store(closed)
	for i := range 3 {
		_, err := sys.Submit(probeTask(i, 0))
		require.NoError(t, err)
	}
	sys.Tick()
	b.waitCompleted(3)
	// Its queue, not its pending count: that count is the system's
	// (offActor), which the other journals move.
	closed.mu.Lock()
	taken := len(closed.queue)
	closed.mu.Unlock()
	require.Zero(t, taken, "nothing offered to the closed journal was taken")
	intents := 0
	require.NoError(t, b.log.Replay(1, func(ent wal.Entry) error {
		e, err := decodeEvent(ent)
		if err != nil {
			return err
		}
		if e.GetLlmRequestStarted() != nil {
			intents++
		}
		return nil
	}))
	require.Equal(t, 6, intents, "two requests for each of three tasks")
}
