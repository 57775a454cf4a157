package actors

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/actors/scheduler"
	"fano/gateway"
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
	b := setup(t, setupOpts{clock: clock, backends: backends, noSync: true, probe: probe.Config{NoPropose: true, Turns: 2},
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
	b.sys.Tick()                                   // recompute priorities with the urgent task waiting
	b.sys.withScheduler(func(*scheduler.State) {}) // the tick was handled
	close(release)
	n := b.waitEvent("the low task's end", func(n Notice) bool {
		return (n.Event.GetTaskPaused() != nil && n.Event.GetTaskPaused().TaskId == low.Id) ||
			(n.Event.GetTaskCompleted() != nil && n.Event.GetTaskCompleted().TaskId == low.Id)
	})
	require.NotNil(t, n.Event.GetTaskPaused(), "the low task ran on instead of yielding")
	assert.Equal(t, "preempted", n.Event.GetTaskPaused().Reason)
}
