package actors

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"fano/actors/allocator"
	"fano/actors/scheduler"
	"fano/gateway"
	"fano/modules"
	"fano/modules/probe"
	"fano/pb"
)

// roundTrip sends m through protobuf's encoding, as a remote actor would
// receive it.
func roundTrip[M proto.Message](t *testing.T, m M) M {
	t.Helper()
	data, err := proto.Marshal(m)
	require.NoError(t, err)
	out := m.ProtoReflect().New().Interface().(M)
	require.NoError(t, proto.Unmarshal(data, out))
	return out
}

// An error that crosses an actor boundary keeps its text and what callers
// match on.
func TestActorErrorsKeepWhatCallersMatch(t *testing.T) {
	until := time.Date(2026, 1, 5, 13, 0, 0, 0, time.UTC)
	cases := []struct {
		err   error
		match func(error) bool
	}{
		{&scheduler.NotFoundError{TaskID: "p/t/1"}, func(err error) bool {
			var nf *scheduler.NotFoundError
			return errors.As(err, &nf) && nf.TaskID == "p/t/1"
		}},
		{fmt.Errorf("scheduler: cancel %q: %w", "p/t/1", scheduler.ErrFinished), func(err error) bool { return errors.Is(err, scheduler.ErrFinished) }},
		{fmt.Errorf("allocator: backend %q: %w", "x", allocator.ErrUnknownBackend), func(err error) bool { return errors.Is(err, allocator.ErrUnknownBackend) }},
		{&allocator.NoQuotaError{Backend: "a", Deep: true, Until: until, Reason: "spent"}, func(err error) bool {
			var nq *allocator.NoQuotaError
			return errors.As(err, &nq) && nq.Until.Equal(until) && nq.Deep && nq.Backend == "a"
		}},
		{&modules.ValidationError{TaskID: "p/t/1", Phase: "schema", Msg: "no json", Raw: "hi"}, modules.IsValidation},
		{errors.New("disk full"), func(err error) bool { return err != nil }},
	}
	for _, c := range cases {
		got := errorFromWire(roundTrip(t, errorToWire(c.err)))
		assert.Equal(t, c.err.Error(), got.Error())
		assert.True(t, c.match(got), "%v lost what callers match on", c.err)
	}
	assert.NoError(t, errorFromWire(errorToWire(nil)))
	assert.False(t, modules.IsValidation(errorFromWire(errorToWire(errors.New("plain")))))
}

// A backend's failure routes the same after the wire as before it.
func TestLLMErrorsKeepTheirKind(t *testing.T) {
	errs := []error{
		gateway.Transient("a", "503"),
		gateway.Permanent("a", "400"),
		gateway.Unavailable("a", "login wall"),
		&gateway.Error{Backend: "a", Kind: gateway.ErrUnavailable, Msg: "circuit open", Err: gateway.ErrNotSent},
		gateway.Classified("a", gateway.ErrCredentials, "401"),
		gateway.Classified("a", gateway.ErrBadAnswer, "refusal"),
		gateway.Classified("a", gateway.ErrHung, "stalled"),
		gateway.Classified("a", gateway.ErrConversationGone, "404"),
		fmt.Errorf("a: %w", context.Canceled),
		fmt.Errorf("a: %w", errTimeout),
		fmt.Errorf("a: wrapped: %w", &gateway.RateLimitedError{Backend: "a", RetryAfter: time.Minute, Cap: true, Reason: "cap", NotSent: true}),
		errors.New("unclassified"),
	}
	for _, err := range errs {
		w := roundTrip(t, llmResponseToWire(7, "a", gateway.Response{}, err))
		_, got := llmResponseFromWire(w)
		require.Error(t, got)
		assert.Equal(t, err.Error(), got.Error())
		assert.Equal(t, gateway.Kind(err), gateway.Kind(got), "%v", err)
		assert.Equal(t, errors.Is(err, gateway.ErrNotSent), errors.Is(got, gateway.ErrNotSent), "%v", err)
		var rl, gotRL *gateway.RateLimitedError
		if errors.As(err, &rl) {
			require.True(t, errors.As(got, &gotRL))
			assert.Equal(t, *rl, *gotRL)
		}
	}
}

// Answers cross the wire whole.
func TestLLMResponseRoundTrip(t *testing.T) {
	resp := gateway.Response{Content: "answer", ConversationURL: "https://chat/1", PrimedTurns: 3, FromPage: true,
		Incomplete: "stalled", Model: "mini", Duration: time.Second, PromptTokens: 10, CompletionTokens: 20}
	got, err := llmResponseFromWire(roundTrip(t, llmResponseToWire(9, "a", resp, nil)))
	require.NoError(t, err)
	assert.Equal(t, resp, got)
}

// A request open when fano stops, and one made after, fail at once
// instead of waiting for an actor that is gone.
func TestRequestsAtStopFail(t *testing.T) {
	b := setup(t, setupOpts{clock: clockwork.NewFakeClock(), probe: probe.Config{NoPropose: true}, memory: true})
	sys := b.start()
	// An actor that never answers stands for one that stopped with the
	// request still in its mailbox.
	silent := sys.root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	open := sys.asks.ask(context.Background(), silent, &pb.Barrier{})
	require.NoError(t, sys.Stop())

	done := make(chan error, 4)
	go func() {
		_, err := await[*pb.BarrierReply](sys.asks, open, silent, &pb.Barrier{})
		done <- err
		done <- sys.Cancel("probe/x/1", "test")
		done <- sys.WithModule(probe.Name, func(modules.Module) {})
		done <- sys.PauseBackend("chatgpt", "test", true)
	}()
	for range 4 {
		select {
		case err := <-done:
			require.ErrorIs(t, err, errStopping)
		case <-time.After(10 * time.Second):
			t.Fatal("a request is still waiting after the stop")
		}
	}
}

// A task's run asks no future, on the answer's path as on a fault's: the
// executor's requests are answered at its own PID. About ten futures a
// task (a process-registry insert and a wake-up each) made the end-to-end
// benchmark 0.8x of the code before.
func TestATaskRunAsksNoFuture(t *testing.T) {
	for _, fault := range []bool{false, true} {
		t.Run(fmt.Sprintf("rate_limited=%v", fault), func(t *testing.T) {
			b, _ := fakeRig(t, "a", "b")
			failed := !fault
			b.simNamed("a").Inject(func(context.Context, gateway.Request) error {
				if failed {
					return nil
				}
				failed = true // the backend is parked, the task fails over to b
				return &gateway.RateLimitedError{Backend: "a", RetryAfter: time.Minute, Reason: "HTTP 429"}
			})
			sys := b.start()
			before := sys.asks.futures.Load()
			task := probeTask(1, 0)
			task.LlmPreference = "" // as in TestErrorTable: a is taken first, b after the failover
			_, err := sys.Submit(task)
			require.NoError(t, err)
			sys.Tick()
			if fault {
				b.waitEvent("the failover", func(n Notice) bool { return n.Event.GetTaskPaused() != nil })
				assert.Zero(t, sys.asks.futures.Load()-before, "futures asked by the run that met the fault")
				b.waitSlotsFree() // reads the allocator through futures
				before = sys.asks.futures.Load()
				sys.Tick()
			}
			b.waitCompleted(1)
			assert.True(t, failed, "the fault was met")
			assert.Zero(t, sys.asks.futures.Load()-before, "futures asked while a task of two requests ran")
		})
	}
}
