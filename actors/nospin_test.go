package actors

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/actors/allocator"
	"fano/gateway"
	"fano/modules/probe"
	"fano/pb"
	"fano/wal"
)

// walLen is the number of entries in the bundle's WAL.
func (b *bundle) walLen(t testing.TB) int {
	t.Helper()
	n := 0
	require.NoError(t, b.log.Replay(1, func(wal.Entry) error { n++; return nil }))
	return n
}

// faulty is a backend in a condition a test sets. As a browser does, it
// may state the condition of its own (Condition, with an end that is
// the last check plus its re-check period: past once the period is
// over, until something checks again); else the condition shows only
// when a request is sent (an API's 402, 429 or 529) and from its health
// probe. It counts the requests that reach it.
type faulty struct {
	gateway.Backend
	clock clockwork.Clock
	own   bool // states its condition of itself (gateway.Conditioner)
	blind bool // its health probe cannot tell (an API's 402 shows only on a request)

	mu      sync.Mutex
	cond    gateway.Condition
	until   func(now time.Time) time.Time // the end a fault names; nil: none
	checked time.Time
	sends   atomic.Int64
	probes  atomic.Int64
}

func (f *faulty) set(c gateway.Condition, until func(time.Time) time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cond, f.until, f.checked = c, until, f.clock.Now()
}

func (f *faulty) current() (gateway.Condition, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.cond
	if c.State == "" {
		return c, false
	}
	if f.until != nil {
		c.Until = f.until(f.clock.Now())
	}
	if f.own && c.Class() != gateway.ClassRate && c.Class() != gateway.ClassQuota {
		c.Until = f.checked.Add(30 * time.Second) // a browser's next check: soon past
	}
	return c, true
}

func (f *faulty) Condition() gateway.Condition {
	if c, on := f.current(); on && f.own {
		return c
	}
	return gateway.Condition{State: gateway.StateReady}
}

func (f *faulty) fault(c gateway.Condition) error {
	return &gateway.Fault{Backend: f.Name(), Condition: c, Err: gateway.ErrUnavailable}
}

func (f *faulty) Health(ctx context.Context) error {
	f.probes.Add(1)
	f.mu.Lock()
	f.checked = f.clock.Now()
	f.mu.Unlock()
	if c, on := f.current(); on && c.Class() == gateway.ClassPerson && !f.blind {
		return f.fault(c)
	}
	return f.Backend.Health(ctx)
}

func (f *faulty) Send(ctx context.Context, req gateway.Request) (gateway.Response, error) {
	f.sends.Add(1)
	if c, on := f.current(); on {
		if c.Class() == gateway.ClassTransient {
			return gateway.Response{}, gateway.Transient(f.Name(), "HTTP 529: overloaded")
		}
		return gateway.Response{}, f.fault(c)
	}
	return f.Backend.Send(ctx, req)
}

func (f *faulty) Unwrap() gateway.Backend { return f.Backend }

// countingWriter counts log lines, and the alerts that name what a
// person must do.
type countingWriter struct{ lines, actions atomic.Int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.lines.Add(1)
	if bytes.Contains(p, []byte(`"event":"actors.allocator.backend_`)) && bytes.Contains(p, []byte(`"action":"`)) &&
		!bytes.Contains(p, []byte(`"action":""`)) {
		w.actions.Add(1)
	}
	return len(p), nil
}

// Nothing spins: when the only backend a task may use (the other one is
// its thread's author) is in any condition, the task is not started
// again and again. On a real WAL, with the fake clock driven through
// many re-check periods (a tick a second for 40 minutes), the WAL grows
// by at most 8 entries per request that reached the backend, a person's
// condition writes nothing at all after it was first met, the log stays
// short, and once the condition ends the task completes.
func TestNothingSpinsOnTheOnlyAllowedBackend(t *testing.T) {
	start := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name  string
		own   bool
		cond  gateway.Condition
		until func(time.Time) time.Time
		// person: a person ends the condition (fano backend resume).
		person bool
		blind  bool
	}{
		{name: "no fault (baseline)"},
		{name: "rate", cond: gateway.Condition{State: gateway.StateRateLimited, Reason: "HTTP 429"},
			until: func(now time.Time) time.Time { return now.Add(time.Minute) }},
		{name: "quota", cond: gateway.Condition{State: gateway.StateCapped, Reason: "daily limit"},
			until: func(now time.Time) time.Time { return start.Add(25 * time.Minute) }},
		{name: "transient", cond: gateway.Condition{State: gateway.StateDown, Reason: "HTTP 529"}},
		{name: "login wall", own: true, person: true, cond: gateway.Condition{State: gateway.StateLogin, Reason: "login wall"}},
		{name: "credits", person: true, cond: gateway.Condition{State: gateway.StateCredits, Reason: "HTTP 402"}},
		{name: "credits, the probe blind", person: true, blind: true, cond: gateway.Condition{State: gateway.StateCredits, Reason: "HTTP 402"}},
		{name: "challenge", own: true, person: true, cond: gateway.Condition{State: gateway.StateChallenge, Reason: "Just a moment..."}},
		{name: "model not served, the probe blind", person: true, blind: true, cond: gateway.Condition{State: gateway.StateNotServed, Reason: "HTTP 404"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := clockwork.NewFakeClockAt(start)
			logs := &countingWriter{}
			var bad *faulty
			b := setup(t, setupOpts{clock: clock, backends: []string{"a", "b"}, probe: probe.Config{NoPropose: true, Turns: 3},
				mutate: func(o *Options) {
					o.TickInterval = time.Hour // ticks are the test's
					o.RequestTimeout = time.Minute
					o.RetryBackoff = []time.Duration{60 * time.Second, 300 * time.Second, 900 * time.Second}
					o.Logger = zerolog.New(logs).Level(zerolog.InfoLevel)
					bad = &faulty{Backend: o.Backends[1], clock: clock, own: tc.own, blind: tc.blind}
					o.Backends[1] = bad
				}})
			bad.set(tc.cond, tc.until)
			b.start()
			var tasks []*pb.Task
			for i := range 3 {
				task := probeTask(i, 0)
				task.LlmExclude = []string{"a"} // the author
				_, err := b.sys.Submit(task)
				require.NoError(t, err)
				tasks = append(tasks, task)
			}
			completed := func() int {
				n := 0
				for _, task := range tasks {
					if tk, _ := b.sys.Task(task.Id); tk.State == pb.TaskState_TASK_STATE_COMPLETED {
						n++
					}
				}
				return n
			}

			step := func(n int) {
				for range n {
					b.tickHandled()
					b.quiet()
					clock.Advance(time.Second)
				}
			}
			step(120)
			from := clock.Now()
			step(40 * 60)
			grown := b.logged(t, func(e *pb.Event) bool { return !time.Unix(0, e.At).Before(from) })
			sends := bad.sends.Load()
			switch {
			case tc.blind:
				// Each slow re-check looks fine, so a request tries: one
				// every few minutes, one alert in all.
				assert.LessOrEqual(t, sends, int64(10), "a request per re-check at most")
			case tc.person:
				assert.Zero(t, grown, "a person's condition writes nothing while it holds (%d re-checks)", bad.probes.Load())
				assert.LessOrEqual(t, sends, int64(1), "not sent again until a person acts")
			}
			if tc.person {
				// One backend state for status, health, the panel and
				// /metrics: the condition, its class, the action, and
				// until when (the next re-check).
				q := b.sys.Quotas()[1]
				require.Equal(t, "b", q.Name)
				if !tc.blind {
					assert.Equal(t, string(tc.cond.State), q.State)
					assert.Equal(t, "person", q.Class)
					assert.Equal(t, gateway.Action(tc.cond.State, "b"), q.Action)
					// (The re-check runs beside the steps: one due a step
					// ago may not have set the next yet.)
					assert.InDelta(t, 0, q.Until.Sub(clock.Now()).Minutes(), 5, "until the next re-check: %v", q.Until)
				}
				assert.GreaterOrEqual(t, bad.probes.Load(), int64(5), "re-checked every few minutes")
				assert.LessOrEqual(t, bad.probes.Load(), int64(12), "a slow re-check")
				assert.EqualValues(t, 1, logs.actions.Load(), "one alert, naming what to do")
			}
			if tc.cond.State != "" {
				require.Zero(t, completed(), "nothing completes while the condition holds")
			}

			bad.set(gateway.Condition{}, nil)
			if tc.person {
				require.NoError(t, b.sys.PauseBackend("b", "", false)) // fano backend resume b
			}
			for i := 0; ; i++ {
				require.Less(t, i, 4*3600, "the tasks never completed")
				if completed() == len(tasks) {
					break
				}
				step(1)
			}
			requests := bad.sends.Load()
			entries := b.walLen(t)
			t.Logf("%s: %d entries, %d requests (%.1f a request), %d log lines, %d probes",
				tc.name, entries, requests, float64(entries)/float64(max(requests, 1)), logs.lines.Load(), bad.probes.Load())
			assert.LessOrEqual(t, float64(entries)/float64(max(requests, 1)), 8.0, "WAL entries per model request")
			assert.LessOrEqual(t, logs.lines.Load(), 3+requests, "log lines bounded by the requests, not the ticks")
		})
	}
}

// quiet waits until no executor runs and every slot is back, again if
// a run started meanwhile (a window that ended hands work out at once).
func (b *bundle) quiet() {
	b.t.Helper()
	for i := 0; ; i++ {
		require.Less(b.t, i, 100000, "never quiet")
		ch := b.sys.executors.finishSignal()
		if b.sys.Running() > 0 {
			<-ch
			continue
		}
		busy := 0
		for _, q := range b.sys.Quotas() {
			busy += q.InUse
		}
		if busy == 0 && b.sys.Running() == 0 {
			return
		}
	}
}

// The rest waits on a person only when every unfinished task may use
// only backends that wait on one; the answer names each such backend
// with its action.
func TestWaitingOnPerson(t *testing.T) {
	login := allocator.BackendStatus{Name: "chatgpt", State: "login", Reason: "login wall"}
	credits := allocator.BackendStatus{Name: "router", State: "credits", Reason: "HTTP 402"}
	ready := allocator.BackendStatus{Name: "claude", State: "ready"}
	limited := allocator.BackendStatus{Name: "claude", State: "rate_limited"}
	paused := allocator.BackendStatus{Name: "claude", State: "paused", Paused: true}

	assert.Nil(t, waitingOnPerson(nil, []allocator.BackendStatus{login}), "no work left is not waiting")
	assert.Nil(t, waitingOnPerson([][]string{nil}, []allocator.BackendStatus{login, ready}), "a task may go to claude")
	assert.Nil(t, waitingOnPerson([][]string{{"chatgpt"}, {"claude"}}, []allocator.BackendStatus{login, limited}),
		"a rate window ends by itself")
	got := waitingOnPerson([][]string{{"chatgpt"}, {"chatgpt", "router"}}, []allocator.BackendStatus{login, ready, credits})
	require.Len(t, got, 2)
	assert.Equal(t, BlockedBackend{Backend: "chatgpt", State: "login", Reason: "login wall", Action: "log in again: fano login chatgpt"}, got[0])
	assert.Contains(t, got[1].Action, "add credits")
	got = waitingOnPerson([][]string{nil}, []allocator.BackendStatus{login, paused})
	require.Len(t, got, 2)
	assert.Equal(t, "resume it: fano backend resume claude", got[1].Action)
}
