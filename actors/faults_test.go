package actors

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/actors/scheduler"
	"fano/gateway"
	"fano/gateway/api"
	"fano/gateway/breaker"
	"fano/gateway/ratelimit"
	"fano/gateway/sim"
	"fano/modules"
	"fano/modules/probe"
	"fano/pb"
)

// simNamed returns the bundle's sim backend called name.
func (b *bundle) simNamed(name string) *sim.Backend {
	for _, s := range b.sims {
		if s.Name() == name {
			return s
		}
	}
	b.t.Fatalf("no sim %q", name)
	return nil
}

func probeTask(i int, base int32) *pb.Task {
	subject := fmt.Sprintf("f%03d", i)
	return &pb.Task{Id: modules.TaskKey(probe.Name, probe.TaskType, subject), Module: probe.Name, TaskType: probe.TaskType,
		Subject: subject, MaxRequests: 3, BasePriority: base, Context: map[string]string{"question": "fault " + subject}}
}

// A 429 reaches the allocator: the backend is paused until the reset (a
// rate limit, not a cap: no estimate changes) and the task fails over to
// the other backend instead of waiting.
func TestRateLimitReachesAllocatorAndTaskFailsOver(t *testing.T) {
	b := setup(t, setupOpts{backends: []string{"a", "b"}, probe: probe.Config{NoPropose: true, Turns: 1}})
	b.simNamed("a").Inject(func(context.Context, gateway.Request) error {
		return &gateway.RateLimitedError{Backend: "a", RetryAfter: 30 * time.Second, Reason: "HTTP 429"}
	})
	b.start()
	_, err := b.sys.Submit(probeTask(1, 0))
	require.NoError(t, err)
	b.sys.Tick()
	rl := b.waitEvent("a rate limit recorded", func(n Notice) bool { return n.Event.GetRateLimitRecorded() != nil })
	assert.Equal(t, "a", rl.Event.GetRateLimitRecorded().GetBackend())
	assert.False(t, rl.Event.GetRateLimitRecorded().GetCap())
	b.waitCompleted(1)
	tk, ok := b.sys.Task(probeTask(1, 0).Id)
	require.True(t, ok)
	assert.Equal(t, "b", tk.LlmAssigned, "failed over")
	for _, q := range b.sys.Quotas() {
		if q.Name == "a" {
			assert.Equal(t, "rate_limited", q.State)
			assert.Equal(t, 1000, q.LimitEstimate, "a rate limit changes no hourly estimate")
		}
	}
}

// fakeRig is a bundle on a fake clock with one backend "a".
func fakeRig(t *testing.T, backends ...string) (*bundle, *clockwork.FakeClock) {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC))
	if len(backends) == 0 {
		backends = []string{"a"}
	}
	b := setup(t, setupOpts{clock: clock, backends: backends, memory: true, probe: probe.Config{NoPropose: true, Turns: 2},
		mutate: func(o *Options) { o.TickInterval = time.Hour; o.RequestTimeout = time.Minute }})
	return b, clock
}

// Transient failures back off 1/2/3 s (the test's 60/300/900), then the
// last backoff again: a flaky backend never fails the task. An answer
// resets the run.
func TestTransientBackoffAndNoFailure(t *testing.T) {
	b, clock := fakeRig(t)
	a := b.simNamed("a")
	a.Inject(func(context.Context, gateway.Request) error { return gateway.Transient("a", "HTTP 503") })
	b.start()
	_, err := b.sys.Submit(probeTask(1, 0))
	require.NoError(t, err)
	want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second, 3 * time.Second}
	for i, w := range want {
		b.sys.Tick()
		n := b.waitEvent("a retry", func(n Notice) bool {
			require.Nil(t, n.Event.GetTaskFailed(), "a flaky backend must not fail the task")
			return n.Event.GetTaskRetryScheduled() != nil
		})
		r := n.Event.GetTaskRetryScheduled()
		assert.Equal(t, w, time.Duration(r.NotBefore-n.Event.At), "retry %d", i)
		clock.Advance(w)
	}
	a.Inject(nil)
	b.sys.Tick()
	b.waitCompleted(1)
	tk, _ := b.sys.Task(probeTask(1, 0).Id)
	assert.Zero(t, tk.Attempts, "an answer resets the count of consecutive failures")
	assert.Equal(t, pb.TaskState_TASK_STATE_COMPLETED, tk.State)
}

// A call that outlives the request timeout is retried after the backoff,
// never failed.
func TestTimeoutIsRetriedNotFailed(t *testing.T) {
	b, clock := fakeRig(t)
	entered := make(chan struct{}, 1)
	b.simNamed("a").Inject(func(ctx context.Context, _ gateway.Request) error {
		entered <- struct{}{}
		<-ctx.Done()
		return fmt.Errorf("hang: %w", ctx.Err())
	})
	b.start()
	_, err := b.sys.Submit(probeTask(1, 0))
	require.NoError(t, err)
	b.sys.Tick()
	<-entered
	clock.Advance(time.Minute)
	n := b.waitEvent("the timed-out call's outcome", func(n Notice) bool {
		return n.Event.GetTaskRetryScheduled() != nil || n.Event.GetTaskFailed() != nil
	})
	require.NotNil(t, n.Event.GetTaskRetryScheduled(), "a timeout is transient: %v", n.Event)
	assert.Equal(t, time.Second, time.Duration(n.Event.GetTaskRetryScheduled().NotBefore-n.Event.At))
	assert.Equal(t, "a", n.Event.GetTaskRetryScheduled().AvoidLlm, "a hung call is offered to another backend")
}

// A running task yields its backend at the next safe point to a waiting
// task more urgent by more than the preemption threshold.
func TestMoreUrgentTaskPreempts(t *testing.T) {
	b, _ := fakeRig(t)
	release := make(chan struct{})
	low := probeTask(1, 1)
	b.simNamed("a").Inject(func(ctx context.Context, req gateway.Request) error {
		if req.TaskID == low.Id {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil
	})
	b.start()
	_, err := b.sys.Submit(low)
	require.NoError(t, err)
	b.sys.Tick()
	b.waitEvent("the low task's request", func(n Notice) bool { return n.Event.GetLlmRequestStarted() != nil })
	high := probeTask(2, 500)
	_, err = b.sys.Submit(high)
	require.NoError(t, err)
	b.tickHandled() // recompute priorities with the urgent task waiting
	close(release)
	n := b.waitEvent("the low task's end", func(n Notice) bool {
		return (n.Event.GetTaskPaused() != nil && n.Event.GetTaskPaused().TaskId == low.Id) ||
			(n.Event.GetTaskCompleted() != nil && n.Event.GetTaskCompleted().TaskId == low.Id)
	})
	require.NotNil(t, n.Event.GetTaskPaused(), "the low task ran on instead of yielding")
	assert.Equal(t, "preempted", n.Event.GetTaskPaused().Reason)
}

// The error table: per kind and backend type, what happens to the task,
// the backend and the quota. Backend "a" fails once with the kind; "b"
// answers. The backend type changes nothing: types differ only in which
// kinds they return.
func TestErrorTable(t *testing.T) {
	type row struct {
		kind  string
		err   func(now time.Time) error
		task  string // the task event after the failure: "failover", "backoff", "elsewhere", "failed"
		state string // a's state in the allocator afterwards
		done  string // the backend that completes the task ("" = it fails)
	}
	rows := []row{
		{"rate_limited", func(time.Time) error {
			return &gateway.RateLimitedError{Backend: "a", RetryAfter: 20 * time.Second}
		}, "failover", "rate_limited", "b"},
		{"usage_cap", func(now time.Time) error {
			return &gateway.RateLimitedError{Backend: "a", Until: now.Add(3 * time.Hour), Cap: true}
		}, "failover", "capped", "b"},
		{"credentials", func(time.Time) error {
			return gateway.Classified("a", gateway.ErrCredentials, "HTTP 401: the key in A_KEY was refused")
		}, "failover", "credentials", "b"},
		{"unavailable", func(time.Time) error { return gateway.Unavailable("a", "login required") }, "failover", "down", "b"},
		{"hung", func(time.Time) error { return gateway.Classified("a", gateway.ErrHung, "no answer for 10 min") }, "failover", "ready", "b"},
		{"bad_answer", func(time.Time) error {
			return gateway.Classified("a", gateway.ErrBadAnswer, "refusal")
		}, "elsewhere", "ready", "b"},
		{"transient", func(time.Time) error { return gateway.Transient("a", "HTTP 503") }, "moved", "ready", "b"},
		{"permanent", func(time.Time) error { return gateway.Permanent("a", "HTTP 400") }, "failed", "ready", ""},
	}
	for _, kindOfBackend := range []string{"api", "browser", "sim"} {
		for _, r := range rows {
			t.Run(kindOfBackend+"/"+r.kind, func(t *testing.T) {
				b, clock := fakeRig(t, "a", "b")
				b.opts.Allocator.Backends[0].Kind = kindOfBackend
				failed := false
				b.simNamed("a").Inject(func(context.Context, gateway.Request) error {
					if failed {
						return nil
					}
					failed = true
					return r.err(clock.Now())
				})
				b.start()
				task := probeTask(1, 0)
				task.LlmPreference = ""
				_, err := b.sys.Submit(task)
				require.NoError(t, err)
				b.sys.Tick()
				n := b.waitEvent("the failure's outcome", func(n Notice) bool {
					e := n.Event
					return e.GetTaskPaused() != nil || e.GetTaskRetryScheduled() != nil || e.GetTaskFailed() != nil
				})
				e := n.Event
				switch r.task {
				case "failover":
					require.NotNil(t, e.GetTaskPaused(), "%v", e)
					assert.Equal(t, "a", e.GetTaskPaused().AvoidLlm)
					assert.Zero(t, e.GetTaskPaused().NotBefore, "offered to another backend at once")
				case "elsewhere":
					require.NotNil(t, e.GetTaskRetryScheduled(), "%v", e)
					assert.True(t, e.GetTaskRetryScheduled().Validation)
					assert.Equal(t, "a", e.GetTaskRetryScheduled().AvoidLlm)
				case "moved": // a passing fault delays the backend, not the task: b is free
					require.NotNil(t, e.GetTaskRetryScheduled(), "%v", e)
					assert.False(t, e.GetTaskRetryScheduled().Validation)
					assert.Equal(t, "a", e.GetTaskRetryScheduled().AvoidLlm)
					assert.Equal(t, e.At, e.GetTaskRetryScheduled().NotBefore, "at once")
				case "backoff":
					require.NotNil(t, e.GetTaskRetryScheduled(), "%v", e)
					assert.False(t, e.GetTaskRetryScheduled().Validation)
					assert.Equal(t, time.Second, time.Duration(e.GetTaskRetryScheduled().NotBefore-e.At))
				case "failed":
					require.NotNil(t, e.GetTaskFailed(), "%v", e)
				}
				b.sys.state.withScheduler(func(*scheduler.State) {})
				for _, q := range b.sys.Quotas() {
					if q.Name == "a" {
						assert.Equal(t, r.state, q.State, "a's state")
						if r.state == "credentials" {
							assert.Zero(t, q.HourlyUsed, "a person's condition is neither charged nor counted")
						} else {
							assert.Equal(t, 1, q.HourlyUsed, "the failed request reached the provider: it is charged")
						}
						if r.kind == "rate_limited" || r.kind == "usage_cap" {
							assert.Equal(t, 1000, q.HourlyLimit)
						}
					}
				}
				if r.done == "" {
					return
				}
				if r.task == "backoff" {
					b.waitSlotsFree()
					clock.Advance(time.Second)
				}
				b.sys.Tick()
				b.waitCompleted(1)
				tk, _ := b.sys.Task(task.Id)
				assert.Equal(t, r.done, tk.LlmAssigned)
			})
		}
	}
}

// A backend that says it cannot serve (an open circuit) is parked before
// the request is counted or charged, and the task goes elsewhere.
func TestOpenCircuitIsNotChargedAndFailsOver(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC))
	b := setup(t, setupOpts{clock: clock, backends: []string{"a", "b"}, memory: true, probe: probe.Config{NoPropose: true, Turns: 1},
		mutate: func(o *Options) {
			o.TickInterval = time.Hour
			o.Backends[0] = breaker.Wrap(o.Backends[0], breaker.Config{FailureThreshold: 1, RecoveryTimeout: 300 * time.Second, Clock: clock})
		}})
	// Trip a's circuit with one failure outside fano.
	b.simNamed("a").Inject(func(context.Context, gateway.Request) error { return gateway.Transient("a", "503") })
	_, err := b.opts.Backends[0].Send(context.Background(), gateway.Request{TaskID: "x"})
	require.Error(t, err)
	b.simNamed("a").Inject(nil)
	require.Equal(t, gateway.StateCircuitOpen, b.opts.Backends[0].(gateway.Conditioner).Condition().State)

	b.start()
	task := probeTask(1, 0)
	task.Conversation = nil
	_, err = b.sys.Submit(task)
	require.NoError(t, err)
	b.sys.Tick()
	p := b.waitEvent("the failover", func(n Notice) bool { return n.Event.GetTaskPaused() != nil })
	assert.Equal(t, "circuit_open", p.Event.GetTaskPaused().Reason)
	b.sys.Tick()
	b.waitCompleted(1)
	tk, _ := b.sys.Task(task.Id)
	assert.Equal(t, "b", tk.LlmAssigned)
	assert.EqualValues(t, 1, tk.RequestCount, "the refused request was never counted")
	for _, q := range b.sys.Quotas() {
		if q.Name == "a" {
			assert.Zero(t, q.HourlyUsed, "nothing charged to the open circuit")
			assert.Equal(t, "circuit_open", q.State)
			assert.True(t, clock.Now().Add(300*time.Second).Equal(q.Until), "until the half-open time, %v", q.Until)
		}
	}
}

// waitSlotsFree waits until no executor runs and the allocator got every
// slot back (an executor releases its slot just after it ends).
func (b *bundle) waitSlotsFree() {
	b.t.Helper()
	for b.sys.Running() > 0 {
		<-b.sys.executors.finishSignal()
	}
	for i := 0; ; i++ {
		busy := 0
		for _, q := range b.sys.Quotas() {
			busy += q.InUse
		}
		if busy == 0 {
			return
		}
		require.Less(b.t, i, 100000, "slots never came back")
	}
}

// A refused key parks the only backend in the credentials state: its task
// waits (never FAILED); a re-check after the key is fixed (SIGHUP, `fano
// backend resume`) lets it continue by itself.
func TestCredentialsParkBackendNotTask(t *testing.T) {
	b, _ := fakeRig(t)
	a := b.simNamed("a")
	a.Inject(func(context.Context, gateway.Request) error {
		return gateway.Classified("a", gateway.ErrCredentials, "HTTP 401: the key in A_KEY was refused")
	})
	b.start()
	task := probeTask(1, 0)
	_, err := b.sys.Submit(task)
	require.NoError(t, err)
	b.sys.Tick()
	p := b.waitEvent("the task parked", func(n Notice) bool { return n.Event.GetTaskPaused() != nil })
	assert.Equal(t, "credentials", p.Event.GetTaskPaused().Reason)
	b.waitSlotsFree()
	b.tickHandled()
	tk, _ := b.sys.Task(task.Id)
	assert.NotEqual(t, pb.TaskState_TASK_STATE_FAILED, tk.State)
	q := b.sys.Quotas()[0]
	assert.Equal(t, "credentials", q.State)
	assert.Contains(t, q.Reason, "A_KEY")

	a.Inject(nil) // the key was fixed
	// `fano backend resume a` re-checks it.
	require.NoError(t, b.sys.PauseBackend("a", "", false))
	assert.Equal(t, "ready", b.sys.Quotas()[0].State)
	b.waitCompleted(1)
	checks := b.sys.RecheckBackends()
	require.Len(t, checks, 1)
	assert.Equal(t, "ready", checks[0].State)
}

// Answers that keep failing validation fail the task on their own budget
// (3 here), whatever the transient failures did; `Retry` requeues it with
// fresh budgets and it completes.
func TestValidationBudgetThenRetry(t *testing.T) {
	b, _ := fakeRig(t)
	a := b.simNamed("a")
	a.Refuse(func(gateway.Request) (string, bool) { return "Sorry, I can't help with that.", true })
	b.start()
	task := probeTask(1, 0)
	_, err := b.sys.Submit(task)
	require.NoError(t, err)
	retries := 0
	for {
		b.sys.Tick()
		n := b.waitEvent("a retry or the failure", func(n Notice) bool {
			return n.Event.GetTaskRetryScheduled() != nil || n.Event.GetTaskFailed() != nil
		})
		if n.Event.GetTaskFailed() != nil {
			assert.Contains(t, n.Event.GetTaskFailed().Error, "refusal")
			break
		}
		assert.True(t, n.Event.GetTaskRetryScheduled().Validation)
		retries++
		b.waitSlotsFree()
	}
	assert.Equal(t, 3, retries, "the validation budget")
	var answers map[string][]string
	require.NoError(t, b.sys.WithModule(probe.Name, func(m modules.Module) { answers = m.(*probe.Module).Answers() }))
	assert.Empty(t, answers[task.Id], "a refusal is never saved as content")

	_, err = b.sys.Retry([]string{"probe/exploration/nope"}, "")
	var re *RetryError
	require.ErrorAs(t, err, &re)
	a.Refuse(nil)
	b.waitSlotsFree()
	ids, err := b.sys.Retry(nil, probe.Name)
	require.NoError(t, err)
	assert.Equal(t, []string{task.Id}, ids)
	b.waitCompleted(1)
	tk, _ := b.sys.Task(task.Id)
	assert.Zero(t, tk.ValidationAttempts)
}

// The rate a provider told (x-ratelimit-limit-requests) is a WAL event:
// after a restart the new limiter paces at it from the first request.
func TestLearnedRateSurvivesRestart(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(ratelimit.HeaderLimit, "120")
		w.Header().Set(ratelimit.HeaderRemaining, "119")
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"choices":[{"message":{"content":"an answer"}}]}`)
	}))
	defer srv.Close()
	newAPI := func() (*api.Backend, *ratelimit.Limiter) {
		lim := ratelimit.New(ratelimit.Config{Name: "m", InitialRPM: 20}, nil)
		be, err := api.New(api.Config{Name: "router", BaseURL: srv.URL + "/v1", Model: "m", APIKey: "sk-test-1234", Limiter: lim, Logger: zerolog.Nop()})
		require.NoError(t, err)
		return be, lim
	}
	first, lim1 := newAPI()
	b := setup(t, setupOpts{backends: []string{"router"}, probe: probe.Config{NoPropose: true, Turns: 1},
		mutate: func(o *Options) { o.Backends[0] = first; o.Allocator.Backends[0].Kind = "api" }})
	b.start()
	_, err := b.sys.Submit(probeTask(1, 0))
	require.NoError(t, err)
	b.sys.Tick()
	learned := b.waitEvent("the learned rate", func(n Notice) bool { return n.Event.GetRateLearned() != nil })
	assert.EqualValues(t, 120, learned.Event.GetRateLearned().LimitPerWindow)
	got, _ := lim1.Learned()
	require.Equal(t, 120, got)
	require.NoError(t, b.sys.Stop())

	second, lim2 := newAPI()
	before, _ := lim2.Learned()
	require.Zero(t, before)
	b2 := setup(t, setupOpts{backends: []string{"router"}, probe: probe.Config{NoPropose: true, Turns: 1},
		mutate: func(o *Options) { o.Backends[0] = second; o.Allocator.Backends[0].Kind = "api" }})
	b2.log, b2.opts.Log = b.log, b.log
	b2.start()
	after, window := lim2.Learned()
	assert.Equal(t, 120, after, "seeded from the WAL before any request")
	assert.Equal(t, time.Minute, window)
	q := b2.sys.Quotas()[0]
	assert.Equal(t, 120, q.LearnedLimit)
	assert.Zero(t, q.LimiterWaiting)
}

// loginWall is a backend that knows it is behind a login wall, as a
// browser backend reports it (gateway.Conditioner).
type loginWall struct {
	gateway.Backend
	on atomic.Bool
}

func (l *loginWall) Condition() gateway.Condition {
	if l.on.Load() {
		return gateway.Condition{State: gateway.StateLogin, Reason: "login required: run `fano login a`"}
	}
	return gateway.Condition{State: gateway.StateReady}
}

// A backend behind a login wall shows `login`, not ready, before any task
// met it; its task goes elsewhere uncharged; once logged in, a re-check
// makes it take work again.
func TestLoginWallShowsInStatusAndFailsOver(t *testing.T) {
	wall := &loginWall{}
	wall.on.Store(true)
	b := setup(t, setupOpts{backends: []string{"a", "b"}, probe: probe.Config{NoPropose: true, Turns: 1},
		mutate: func(o *Options) { wall.Backend = o.Backends[0]; o.Backends[0] = wall }})
	b.start()
	q := b.sys.Quotas()[0]
	assert.Equal(t, "login", q.State)
	assert.False(t, q.Available)
	assert.Contains(t, q.Reason, "fano login a")

	_, err := b.sys.Submit(probeTask(1, 0))
	require.NoError(t, err)
	b.sys.Tick()
	b.waitCompleted(1)
	tk, _ := b.sys.Task(probeTask(1, 0).Id)
	assert.Equal(t, "b", tk.LlmAssigned)
	assert.Zero(t, b.sys.Quotas()[0].HourlyUsed)

	wall.on.Store(false)
	checks := b.sys.RecheckBackends("a")
	require.Equal(t, []BackendCheck{{Backend: "a", State: "ready"}}, checks)
	assert.Equal(t, "ready", b.sys.Quotas()[0].State)
}

// A request our side refused before it left (a limiter paused after a
// 429, a circuit that opened meanwhile) is given back: no quota, no
// request counted.
func TestRefusedBeforeSendingIsNotChargedNorCounted(t *testing.T) {
	refusals := map[string]error{
		"paused limiter": &gateway.RateLimitedError{Backend: "a", RetryAfter: 30 * time.Second, Reason: "model paused", NotSent: true},
		"half-open":      &gateway.Error{Backend: "a", Kind: gateway.ErrUnavailable, Err: gateway.ErrNotSent, Msg: "circuit half-open"},
	}
	for name, refusal := range refusals {
		t.Run(name, func(t *testing.T) {
			b := setup(t, setupOpts{backends: []string{"a", "b"}, probe: probe.Config{NoPropose: true, Turns: 1}})
			b.simNamed("a").Inject(func(context.Context, gateway.Request) error { return refusal })
			b.start()
			task := probeTask(1, 0)
			_, err := b.sys.Submit(task)
			require.NoError(t, err)
			b.sys.Tick()
			n := b.waitEvent("the refusal", func(n Notice) bool { return n.Event.GetLlmRequestFailed() != nil })
			assert.True(t, n.Event.GetLlmRequestFailed().NotSent)
			b.waitEvent("the quota given back", func(n Notice) bool { return n.Event.GetQuotaReleased() != nil })
			b.waitSlotsFree()
			b.sys.Tick()
			b.waitCompleted(1)
			tk, _ := b.sys.Task(task.Id)
			assert.Equal(t, "b", tk.LlmAssigned)
			assert.EqualValues(t, 1, tk.RequestCount, "only the answered request counts")
			assert.Zero(t, b.sys.Quotas()[0].HourlyUsed, "nothing charged to a")
		})
	}
}

// The condition table as data: each fault, read once, routes by its
// class (and for a passing fault the backend's own state) to what
// happens to the task, the backend and the quota.
func TestRouteByClass(t *testing.T) {
	f := &backendFaults{clock: clockwork.NewFakeClock()}
	until := time.Date(2026, 1, 5, 11, 0, 0, 0, time.UTC)
	fault := func(st gateway.State) error {
		return &gateway.Fault{Backend: "a", Condition: gateway.Condition{State: st, Until: until}}
	}
	cases := []struct {
		name  string
		err   error
		cause error
		kind  faultKind
		want  faultRoute
	}{
		{"rate window", fault(gateway.StateRateLimited), nil, kindRateLimited, faultRoute{task: outcomeFailover, park: parkUntilEnd, charged: true}},
		{"quota window", fault(gateway.StateCapped), nil, kindRateLimited, faultRoute{task: outcomeFailover, park: parkUntilEnd, charged: true}},
		{"older 429", &gateway.RateLimitedError{Backend: "a", RetryAfter: time.Minute}, nil, kindRateLimited, faultRoute{task: outcomeFailover, park: parkUntilEnd, charged: true}},
		{"credits", fault(gateway.StateCredits), nil, kindUnavailable, faultRoute{task: outcomeFailover, park: parkForPerson}},
		{"login", fault(gateway.StateLogin), nil, kindUnavailable, faultRoute{task: outcomeFailover, park: parkForPerson}},
		{"challenge", fault(gateway.StateChallenge), nil, kindUnavailable, faultRoute{task: outcomeFailover, park: parkForPerson}},
		{"credentials", gateway.Classified("a", gateway.ErrCredentials, "HTTP 401"), nil, kindCredentials, faultRoute{task: outcomeFailover, park: parkForPerson}},
		{"circuit open", fault(gateway.StateCircuitOpen), nil, kindUnavailable, faultRoute{task: outcomeFailover, park: parkUntilRecheck, charged: true}},
		{"unavailable", gateway.Unavailable("a", "browser gone"), nil, kindUnavailable, faultRoute{task: outcomeFailover, park: parkUntilRecheck, charged: true}},
		{"hung", gateway.Classified("a", gateway.ErrHung, "no answer"), nil, kindHung, faultRoute{task: outcomeFailover, charged: true}},
		{"529", gateway.Transient("a", "HTTP 529"), nil, kindTransient, faultRoute{task: outcomeBackoff, charged: true}},
		{"our deadline", context.DeadlineExceeded, errTimeout, kindTransient, faultRoute{task: outcomeBackoff, charged: true}},
		{"shutdown", context.Canceled, errShutdown, kindCancelled, faultRoute{task: outcomeStop, charged: true}},
		{"refusal", gateway.Classified("a", gateway.ErrBadAnswer, "no"), nil, kindBadAnswer, faultRoute{task: outcomeElsewhere, charged: true}},
		{"conversation gone", gateway.Classified("a", gateway.ErrConversationGone, "404"), nil, kindConversationGone, faultRoute{task: outcomeAgain, charged: true}},
		{"400", gateway.Permanent("a", "HTTP 400"), nil, kindPermanent, faultRoute{task: outcomeFail, charged: true}},
		{"unclassified", fmt.Errorf("something new"), nil, kindPermanent, faultRoute{task: outcomeFail, charged: true}},
	}
	for _, c := range cases {
		ft := f.readFault("a", c.err, c.cause)
		assert.Equal(t, c.kind, ft.kind, c.name)
		assert.Equal(t, c.want, routeOf(ft), c.name)
	}
	// The end is the recogniser's, taken as it is.
	assert.Equal(t, until, f.readFault("a", fault(gateway.StateCapped), nil).cond.Until)
}
