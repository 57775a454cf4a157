package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/gateway"
	"fano/internal/testctx"
)

// t0 is 10:20 UTC: 10 minutes before an hour window starting at :30.
var t0 = time.Date(2026, 3, 1, 10, 20, 0, 0, time.UTC)

func fakeBackend(cfg Config) (*Backend, *clockwork.FakeClock) {
	clk := clockwork.NewFakeClockAt(t0)
	if cfg.Name == "" {
		cfg.Name = "simtest"
	}
	return New(cfg, clk), clk
}

func req(task, prompt string) gateway.Request {
	return gateway.Request{TaskID: task, TaskType: "exploration", Prompt: prompt}
}

// outcome is what a request came to: its content or its error kind.
func outcome(resp gateway.Response, err error) string {
	if err != nil {
		return "error:" + gateway.Kind(err)
	}
	return resp.Content
}

// sendAsync runs Send in a goroutine and delivers its result.
type result struct {
	resp gateway.Response
	err  error
}

func sendAsync(ctx context.Context, b *Backend, r gateway.Request) <-chan result {
	ch := make(chan result, 1)
	go func() {
		resp, err := b.Send(ctx, r)
		ch <- result{resp, err}
	}()
	return ch
}

func await(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second): // deadline for a broken test, not a wait
		t.Fatal("Send did not return")
		return result{}
	}
}

func blockUntil(t *testing.T, clk *clockwork.FakeClock, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, clk.BlockUntilContext(ctx, n), "no waiter on the clock")
}

func testRequests() []gateway.Request {
	var rs []gateway.Request
	types := []string{"exploration", "insight_extraction", "insight_review", "critique", "dedup_confirm", "generate_questions"}
	for i := range 40 {
		r := gateway.Request{
			TaskID:   fmt.Sprintf("task-%d", i%10),
			TaskType: types[i%len(types)],
			Prompt:   fmt.Sprintf("Question %d about the Fano plane, its automorphism group and pairs (1,%d)", i, i+2),
		}
		if i%3 == 0 {
			r.History = []gateway.Message{{Role: "user", Content: "earlier"}, {Role: "assistant", Content: "reply"}}
		}
		rs = append(rs, r)
	}
	return rs
}

func TestDeterministicAndOrderIndependent(t *testing.T) {
	cfg := Config{Style: "chatgpt", Seed: 42, TransientRate: 0.2, MalformedRate: 0.2}
	rs := testRequests()

	// Sequentially, in order.
	a, _ := fakeBackend(cfg)
	want := make([]string, len(rs))
	for i, r := range rs {
		want[i] = outcome(a.Send(context.Background(), r))
	}

	// Concurrently, and in reverse, on a fresh backend.
	b, _ := fakeBackend(cfg)
	got := make([]string, len(rs))
	var wg sync.WaitGroup
	for i := len(rs) - 1; i >= 0; i-- {
		wg.Go(func() { got[i] = outcome(b.Send(context.Background(), rs[i])) })
	}
	wg.Wait()
	require.Equal(t, want, got)

	kinds := map[string]bool{}
	for _, o := range want {
		if strings.HasPrefix(o, "error:") {
			kinds[o] = true
		}
	}
	assert.True(t, kinds["error:transient"], "the fault rates should have produced a transient error")

	// Another seed answers differently.
	c, _ := fakeBackend(Config{Style: "chatgpt", Seed: 43})
	d, _ := fakeBackend(Config{Style: "chatgpt", Seed: 42})
	differ := 0
	for _, r := range rs {
		if outcome(c.Send(context.Background(), r)) != outcome(d.Send(context.Background(), r)) {
			differ++
		}
	}
	assert.Greater(t, differ, len(rs)/2)
}

func TestTurnChangesAnswer(t *testing.T) {
	b, _ := fakeBackend(Config{Seed: 1})
	r := req("t", "Tell me about duality and the Heawood graph")
	differ := false
	for range 5 {
		x, err := b.Send(context.Background(), r)
		require.NoError(t, err)
		r.History = append(r.History, gateway.Message{Role: "user", Content: "more"})
		y, err := b.Send(context.Background(), r)
		require.NoError(t, err)
		if x.Content != y.Content {
			differ = true
		}
	}
	assert.True(t, differ, "the turn should enter the answer")
}

func TestLatencyWaitsOnClock(t *testing.T) {
	b, clk := fakeBackend(Config{Latency: 30 * time.Second})
	ch := sendAsync(context.Background(), b, req("t", "order 10"))
	blockUntil(t, clk, 1)

	clk.Advance(29 * time.Second)
	select {
	case r := <-ch:
		t.Fatalf("answered before the latency elapsed: %+v", r)
	default:
	}
	clk.Advance(time.Second)
	r := await(t, ch)
	require.NoError(t, r.err)
	assert.Equal(t, 30*time.Second, r.resp.Duration)
	assert.NotEmpty(t, r.resp.Content)
}

func TestJitterIsSeededAndBounded(t *testing.T) {
	cfg := Config{Latency: 10 * time.Second, Jitter: 5 * time.Second, Seed: 3}
	b, clk := fakeBackend(cfg)
	for i := range 10 {
		ch := sendAsync(context.Background(), b, req(fmt.Sprint("t", i), "collineations"))
		blockUntil(t, clk, 1)
		clk.Advance(10*time.Second - time.Nanosecond)
		select {
		case r := <-ch:
			t.Fatalf("answered before the base latency: %+v", r)
		default:
		}
		clk.Advance(5 * time.Second)
		require.NoError(t, await(t, ch).err)
	}

	// The jitter is drawn from the request's fault stream: the same
	// request waits the same time on every run.
	draw := func(seed uint64) time.Duration {
		return b.latency(rand.New(rand.NewPCG(seed, 7)))
	}
	spread := map[time.Duration]bool{}
	for s := range uint64(50) {
		d := draw(s)
		assert.Equal(t, d, draw(s))
		assert.GreaterOrEqual(t, d, 10*time.Second)
		assert.Less(t, d, 15*time.Second)
		spread[d] = true
	}
	assert.Greater(t, len(spread), 40)
}

func TestZeroLatencyReturnsAtOnce(t *testing.T) {
	b, _ := fakeBackend(Config{})
	// The fake clock is never advanced: any wait on it would hang.
	r := await(t, sendAsync(context.Background(), b, req("t", "Bruck-Ryser")))
	require.NoError(t, r.err)
	assert.Zero(t, r.resp.Duration)
}

func TestCancelDuringLatency(t *testing.T) {
	b, clk := fakeBackend(Config{Latency: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	ch := sendAsync(ctx, b, req("t", "Steiner triple systems"))
	blockUntil(t, clk, 1)
	cancel()
	r := await(t, ch)
	require.ErrorIs(t, r.err, context.Canceled)
	assert.Equal(t, "cancelled", gateway.Kind(r.err))
	assert.Equal(t, int64(1), b.Stats().Cancelled)
	assert.Zero(t, b.Stats().Answered)

	// A context already done never reaches the service.
	_, err := b.Send(ctx, req("t", "x"))
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, int64(1), b.Stats().Requests)
}

func TestHourlyLimit(t *testing.T) {
	b, clk := fakeBackend(Config{Style: "chatgpt", HourlyLimit: 2, HourlyResetMinute: 30})
	ctx := context.Background()
	for i := range 2 {
		_, err := b.Send(ctx, req(fmt.Sprint("t", i), "points"))
		require.NoError(t, err)
	}
	// Refusals use no quota, however many there are.
	for range 3 {
		_, err := b.Send(ctx, req("t9", "points"))
		var rl *gateway.RateLimitedError
		require.ErrorAs(t, err, &rl)
		assert.Equal(t, 10*time.Minute, rl.RetryAfter, "the window resets at 10:30")
		assert.Equal(t, "simtest", rl.Backend)
		assert.Contains(t, rl.Reason, "10:30")
	}

	clk.Advance(10 * time.Minute) // 10:30: a new window
	for i := range 2 {
		_, err := b.Send(ctx, req(fmt.Sprint("u", i), "points"))
		require.NoError(t, err)
	}
	clk.Advance(30 * time.Minute) // 11:00, same window
	_, err := b.Send(ctx, req("u9", "points"))
	var rl *gateway.RateLimitedError
	require.ErrorAs(t, err, &rl)
	assert.Equal(t, 30*time.Minute, rl.RetryAfter)

	s := b.Stats()
	assert.Equal(t, int64(8), s.Requests)
	assert.Equal(t, int64(4), s.Answered)
	assert.Equal(t, int64(4), s.RateLimited)
}

func TestDeepDailyLimit(t *testing.T) {
	b, clk := fakeBackend(Config{Style: "gemini", DeepDailyLimit: 1, DailyResetHour: 4})
	ctx := context.Background()
	deep := req("d", "order 9 planes")
	deep.DeepMode = true

	_, err := b.Send(ctx, deep)
	require.NoError(t, err)
	_, err = b.Send(ctx, deep)
	var rl *gateway.RateLimitedError
	require.ErrorAs(t, err, &rl)
	assert.Equal(t, 17*time.Hour+40*time.Minute, rl.RetryAfter, "10:20 -> 04:00 next day")

	_, err = b.Send(ctx, req("n", "normal mode still works"))
	require.NoError(t, err)

	clk.Advance(rl.RetryAfter)
	_, err = b.Send(ctx, deep)
	require.NoError(t, err)
	assert.Equal(t, int64(2), b.Stats().Deep)
}

func TestDeepModeUnavailable(t *testing.T) {
	b, _ := fakeBackend(Config{DailyResetHour: 11})
	r := req("d", "x")
	r.DeepMode = true
	_, err := b.Send(context.Background(), r)
	var rl *gateway.RateLimitedError
	require.ErrorAs(t, err, &rl)
	assert.Equal(t, 40*time.Minute, rl.RetryAfter)
	assert.Equal(t, "rate_limited", gateway.Kind(err))
}

func TestHourlyAndDeepReportLaterReset(t *testing.T) {
	b, _ := fakeBackend(Config{HourlyLimit: 1, DeepDailyLimit: 5})
	_, err := b.Send(context.Background(), req("a", "x"))
	require.NoError(t, err)
	r := req("b", "x")
	r.DeepMode = true
	_, err = b.Send(context.Background(), r)
	var rl *gateway.RateLimitedError
	require.ErrorAs(t, err, &rl)
	assert.Equal(t, 40*time.Minute, rl.RetryAfter)
	assert.Zero(t, b.Stats().Deep, "a refused deep request uses no deep quota")
}

func TestTimeoutFaultHangsUntilContextDone(t *testing.T) {
	b, _ := fakeBackend(Config{TimeoutRate: 1})
	// The deadline passes once the request hangs (a timer's could pass
	// before Send began on a busy machine: nothing would hang).
	ctx := testctx.NewDeadline()
	b.OnWait(func(_ context.Context, waiting bool) {
		if waiting {
			ctx.Pass()
		}
	})
	r := await(t, sendAsync(ctx, b, req("t", "x")))
	require.ErrorIs(t, r.err, context.DeadlineExceeded)
	assert.Equal(t, "transient", gateway.Kind(r.err))
	assert.Equal(t, int64(1), b.Stats().Timeouts)
}

func TestTransientFault(t *testing.T) {
	b, _ := fakeBackend(Config{Name: "flaky", TransientRate: 1})
	_, err := b.Send(context.Background(), req("t", "x"))
	require.ErrorIs(t, err, gateway.ErrTransient)
	assert.Contains(t, err.Error(), "flaky")
	assert.Equal(t, int64(1), b.Stats().Transient)
}

func TestMalformedFault(t *testing.T) {
	for _, style := range []string{"chatgpt", "api"} {
		good, _ := fakeBackend(Config{Style: style, Seed: 5})
		bad, _ := fakeBackend(Config{Style: style, Seed: 5, MalformedRate: 1})
		for i := range 20 {
			r := req(fmt.Sprint("t", i), "Hamming code and Steiner systems")
			r.TaskType = "insight_extraction"
			g, err := good.Send(context.Background(), r)
			require.NoError(t, err)
			m, err := bad.Send(context.Background(), r)
			require.NoError(t, err, "a malformed answer is still an answer")
			assert.NotEqual(t, g.Content, m.Content)
			var items []Insight
			assert.Error(t, unmarshalAnswer(m.Content, &items), "malformed answer parsed: %q", m.Content)
		}
		assert.Equal(t, int64(20), bad.Stats().Malformed)
		assert.Equal(t, int64(20), bad.Stats().Answered)
	}
}

func TestRetryAfterFaultDrawsAfresh(t *testing.T) {
	run := func() []int {
		b, _ := fakeBackend(Config{Seed: 9, TransientRate: 0.5})
		var attempts []int
		for i := range 30 {
			r := req(fmt.Sprint("t", i), "x")
			n := 1
			for ; n < 50; n++ {
				if _, err := b.Send(context.Background(), r); err == nil {
					break
				}
			}
			require.Less(t, n, 50, "request %d never succeeded", i)
			attempts = append(attempts, n)
		}
		return attempts
	}
	first := run()
	assert.Equal(t, first, run(), "a re-run fails and succeeds at the same attempts")
	retried := 0
	for _, n := range first {
		if n > 1 {
			retried++
		}
	}
	assert.Greater(t, retried, 0)
}

func TestUnavailable(t *testing.T) {
	b, _ := fakeBackend(Config{Name: "chatgpt-web"})
	ctx := context.Background()
	require.NoError(t, b.Health(ctx))

	b.SetUnavailable("login required")
	_, err := b.Send(ctx, req("t", "x"))
	require.ErrorIs(t, err, gateway.ErrUnavailable)
	assert.Contains(t, err.Error(), "chatgpt-web")
	assert.Contains(t, err.Error(), "login required")
	require.ErrorIs(t, b.Health(ctx), gateway.ErrUnavailable)

	b.SetUnavailable("")
	require.NoError(t, b.Health(ctx))
	_, err = b.Send(ctx, req("t", "x"))
	require.NoError(t, err)

	require.NoError(t, b.Close())
	_, err = b.Send(ctx, req("t", "x"))
	require.ErrorIs(t, err, gateway.ErrUnavailable)
	assert.Equal(t, int64(2), b.Stats().Unavailable)
}

func TestResponseMetadata(t *testing.T) {
	b, _ := fakeBackend(Config{Name: "gem"})
	r := req("explorer/exploration/7", strings.Repeat("abcd", 25))
	r.TaskType = "echo"
	resp, err := b.Send(context.Background(), r)
	require.NoError(t, err)
	assert.Equal(t, r.Prompt, resp.Content)
	assert.Equal(t, int64(25), resp.PromptTokens)
	assert.Equal(t, int64(25), resp.CompletionTokens)
	assert.True(t, strings.HasPrefix(resp.ConversationURL, "sim://gem/c/"), resp.ConversationURL)

	r.Prompt = "another turn"
	resp2, err := b.Send(context.Background(), r)
	require.NoError(t, err)
	assert.Equal(t, resp.ConversationURL, resp2.ConversationURL, "the id is the task's")

	r.ConversationURL = "sim://gem/c/elsewhere"
	resp3, err := b.Send(context.Background(), r)
	require.NoError(t, err)
	assert.Equal(t, r.ConversationURL, resp3.ConversationURL)
}

func TestStatsAcrossOutcomes(t *testing.T) {
	b, clk := fakeBackend(Config{HourlyLimit: 3, Latency: time.Minute})
	ctx := context.Background()

	ch := sendAsync(ctx, b, req("a", "x"))
	blockUntil(t, clk, 1)
	clk.Advance(time.Minute)
	require.NoError(t, await(t, ch).err)

	cctx, cancel := context.WithCancel(ctx)
	ch = sendAsync(cctx, b, req("b", "x"))
	blockUntil(t, clk, 1)
	cancel()
	require.Error(t, await(t, ch).err)

	b.SetUnavailable("session expired")
	_, err := b.Send(ctx, req("c", "x"))
	require.Error(t, err)
	b.SetUnavailable("")

	ch = sendAsync(ctx, b, req("d", "x"))
	blockUntil(t, clk, 1)
	clk.Advance(time.Minute)
	require.NoError(t, await(t, ch).err)

	_, err = b.Send(ctx, req("e", "x"))
	require.True(t, errors.As(err, new(*gateway.RateLimitedError)))

	assert.Equal(t, Stats{Requests: 5, Answered: 2, RateLimited: 1, Unavailable: 1, Cancelled: 1}, b.Stats())
}

func BenchmarkSendZeroLatency(b *testing.B) {
	be := New(Config{Name: "bench", Style: "claude", Seed: 1}, clockwork.NewFakeClock())
	ctx := context.Background()
	rs := testRequests()
	for i := 0; b.Loop(); i++ {
		if _, err := be.Send(ctx, rs[i%len(rs)]); err != nil {
			b.Fatal(err)
		}
	}
}

// handClock runs no AfterFunc by itself: the test calls the callbacks.
type handClock struct {
	clockwork.Clock
	fns chan func()
}

func (c *handClock) AfterFunc(d time.Duration, f func()) clockwork.Timer {
	c.fns <- f
	return c.Clock.NewTimer(d) // never advanced: a Stop target only
}

// The wait for an answer ends inside the clock's callback: once the
// clock's callback has returned, the call no longer waits, though the
// goroutine that sent it has not run yet (fano simulate moves its clock
// only while every call waits).
func TestAnswerWaitEndsInTheClocksCallback(t *testing.T) {
	clock := &handClock{Clock: clockwork.NewFakeClock(), fns: make(chan func(), 1)}
	be := New(Config{Name: "hand", Style: "claude", Seed: 1, Latency: 10 * time.Second}, clock)
	var mu sync.Mutex
	waiting := 0
	be.OnWait(func(_ context.Context, w bool) {
		mu.Lock()
		defer mu.Unlock()
		if w {
			waiting++
		} else {
			waiting--
		}
	})
	done := make(chan error, 1)
	go func() {
		_, err := be.Send(context.Background(), gateway.Request{TaskID: "t1", Prompt: "What is a projective plane?"})
		done <- err
	}()
	var answer func()
	select {
	case answer = <-clock.fns:
	case <-time.After(5 * time.Second):
		t.Fatal("the answer's latency is not a callback of the clock")
	}
	mu.Lock()
	require.Equal(t, 1, waiting, "the call waits for its answer")
	mu.Unlock()
	answer()
	mu.Lock()
	require.Zero(t, waiting, "the wait ended in the callback")
	mu.Unlock()
	require.NoError(t, <-done)
}

// The simulated backend's faults are the same Fault values a real
// backend's recogniser gives: a quota window with its end, a transient
// fault, a person's condition (login, credits) with Kind routing each.
func TestFaultsAreConditions(t *testing.T) {
	ctx := context.Background()
	b, clk := fakeBackend(Config{Name: "simtest", HourlyLimit: 1, HourlyResetMinute: 30, DailyResetHour: 4})
	now := clk.Now()
	_, err := b.Send(ctx, req("a", "x"))
	require.NoError(t, err)

	_, err = b.Send(ctx, req("b", "x"))
	var f *gateway.Fault
	require.ErrorAs(t, err, &f)
	assert.Equal(t, gateway.StateCapped, f.Condition.State)
	assert.Equal(t, "hour", f.Window)
	assert.Equal(t, now.Add(10*time.Minute), f.Condition.Until, "the hour window resets at 10:30")
	assert.Equal(t, "rate_limited", gateway.Kind(err))
	c, ok := gateway.ConditionOf(err)
	require.True(t, ok)
	assert.Equal(t, gateway.ClassQuota, c.Class())

	deep := req("d", "x")
	deep.DeepMode = true
	clk.Advance(10 * time.Minute)
	_, err = b.Send(ctx, deep)
	require.ErrorAs(t, err, &f)
	assert.Equal(t, "day", f.Window, "no deep mode: the day window")
	assert.Equal(t, time.Date(t0.Year(), t0.Month(), t0.Day()+1, 4, 0, 0, 0, time.UTC), f.Condition.Until.UTC())

	b.SetCondition(gateway.Condition{State: gateway.StateCredits, Reason: "credits spent (simulated)", Until: now.Add(time.Hour)})
	assert.Equal(t, gateway.StateCredits, b.Condition().State)
	_, err = b.Send(ctx, req("c", "x"))
	require.ErrorAs(t, err, &f)
	assert.Equal(t, gateway.StateCredits, f.Condition.State)
	assert.Equal(t, now.Add(time.Hour), f.Condition.Until)
	assert.Equal(t, "unavailable", gateway.Kind(err))
	assert.True(t, gateway.NeedsPerson(f.Condition.State))
	require.ErrorAs(t, b.Health(ctx), &f)

	b.SetUnavailable("session expired")
	_, err = b.Send(ctx, req("c", "x"))
	require.ErrorAs(t, err, &f)
	assert.Equal(t, gateway.StateLogin, f.Condition.State)
	assert.Equal(t, "unavailable", gateway.Kind(err))
	assert.Contains(t, err.Error(), "login required: session expired")
	b.SetUnavailable("")
	assert.Equal(t, gateway.StateReady, b.Condition().State)

	tb, _ := fakeBackend(Config{TransientRate: 1})
	_, err = tb.Send(ctx, req("t", "x"))
	require.ErrorAs(t, err, &f)
	assert.Equal(t, gateway.ClassTransient, f.Condition.Class())
	assert.Equal(t, "transient", gateway.Kind(err))
	require.ErrorIs(t, err, gateway.ErrTransient)
}
