package ratelimit

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deadline bounds a broken test; it is never how a test waits.
const deadline = 5 * time.Second

type idKey struct{}

// harness runs waiters against a limiter on a fake clock and reports each
// grant on a channel.
type harness struct {
	t      *testing.T
	clock  *clockwork.FakeClock
	l      *Limiter
	queued chan int // waiter ids in the order the limiter queued them
	done   chan result
}

type result struct {
	id  int
	at  time.Time
	err error
}

func newHarness(t *testing.T, cfg Config) *harness {
	h := &harness{t: t, clock: clockwork.NewFakeClock(), queued: make(chan int, 1000), done: make(chan result, 1000)}
	h.l = New(cfg, h.clock)
	h.l.onQueue = func(ctx context.Context) {
		if id, ok := ctx.Value(idKey{}).(int); ok {
			h.queued <- id
		}
	}
	return h
}

// start launches waiter id; it does not wait for it to queue.
func (h *harness) start(ctx context.Context, id int) {
	ctx = context.WithValue(ctx, idKey{}, id)
	go func() {
		err := h.l.Wait(ctx)
		h.done <- result{id: id, at: h.clock.Now(), err: err}
	}()
}

// startQueued launches waiter id and returns once it is queued.
func (h *harness) startQueued(ctx context.Context, id int) {
	h.start(ctx, id)
	require.Equal(h.t, id, h.recvQueued())
}

func (h *harness) recvQueued() int {
	select {
	case id := <-h.queued:
		return id
	case <-time.After(deadline):
		h.t.Fatal("waiter never queued")
		return -1
	}
}

func (h *harness) recvDone() result {
	select {
	case r := <-h.done:
		return r
	case <-time.After(deadline):
		h.t.Fatal("no grant")
		return result{}
	}
}

// step waits for the limiter's timer, then advances the clock by d.
func (h *harness) step(d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	require.NoError(h.t, h.clock.BlockUntilContext(ctx, 1))
	h.clock.Advance(d)
}

func (h *harness) interval() time.Duration {
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	return h.l.interval
}

func (h *harness) noGrantYet() {
	select {
	case r := <-h.done:
		h.t.Fatalf("waiter %d granted early", r.id)
	default:
	}
}

func TestFirstWaitIsImmediateThenPacedAtInitialRate(t *testing.T) {
	h := newHarness(t, Config{Name: "m", InitialRPM: 20})
	require.NoError(t, h.l.Wait(context.Background()))
	start := h.clock.Now()
	h.startQueued(context.Background(), 1)
	h.step(2999 * time.Millisecond)
	h.noGrantYet()
	h.clock.Advance(time.Millisecond) // timer fires at exactly 3 s
	r := h.recvDone()
	require.NoError(t, r.err)
	assert.Equal(t, 3*time.Second, r.at.Sub(start))
	s := h.l.Stats()
	assert.EqualValues(t, 2, s.Granted)
	assert.Equal(t, 20.0, s.RPM)
	assert.Zero(t, s.LimitRPM)
}

// N goroutines contend at once; grants come out in exactly the order the
// limiter queued them, one per interval.
func TestFIFOUnderContention(t *testing.T) {
	const n = 50
	h := newHarness(t, Config{Name: "m", InitialRPM: 60}) // one per second
	require.NoError(t, h.l.Wait(context.Background()))

	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			h.start(context.Background(), i)
		}()
	}
	close(gate)
	wg.Wait()
	var order []int
	for range n {
		order = append(order, h.recvQueued())
	}
	require.Equal(t, n, h.l.Stats().Waiting)

	for i := range n {
		h.step(time.Second)
		r := h.recvDone()
		require.NoError(t, r.err)
		require.Equal(t, order[i], r.id, "grant %d out of order", i)
		require.EqualValues(t, i+2, h.l.Stats().Granted)
	}
	assert.Zero(t, h.l.Stats().Waiting)
}

func TestCancelledWaiterGivesItsSlotBack(t *testing.T) {
	h := newHarness(t, Config{Name: "m", InitialRPM: 60})
	require.NoError(t, h.l.Wait(context.Background()))
	start := h.clock.Now()
	h.startQueued(context.Background(), 1)
	ctx, cancel := context.WithCancel(context.Background())
	h.startQueued(ctx, 2)
	h.startQueued(context.Background(), 3)

	cancel()
	r := h.recvDone()
	assert.Equal(t, 2, r.id)
	assert.True(t, errors.Is(r.err, context.Canceled), "got %v", r.err)
	assert.Contains(t, r.err.Error(), "rate limiter m")

	h.step(time.Second)
	assert.Equal(t, 1, h.recvDone().id)
	h.step(time.Second)
	r = h.recvDone()
	assert.Equal(t, 3, r.id)
	assert.Equal(t, 2*time.Second, r.at.Sub(start), "3 takes the cancelled waiter's slot")
	s := h.l.Stats()
	assert.EqualValues(t, 3, s.Granted)
	assert.EqualValues(t, 1, s.Cancelled)
}

func TestWaitOnDoneContextConsumesNothing(t *testing.T) {
	h := newHarness(t, Config{Name: "m"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, h.l.Wait(ctx), context.Canceled)
	assert.Zero(t, h.l.Stats().Granted)
	require.NoError(t, h.l.Wait(context.Background()), "the slot is still free")
}

func TestLearnsRateFromHeaders(t *testing.T) {
	h := newHarness(t, Config{Name: "m", InitialRPM: 20, CatchUp: time.Nanosecond})
	require.NoError(t, h.l.Wait(context.Background())) // next slot in 3 s at 20 RPM
	start := h.clock.Now()
	hdr := http.Header{}
	hdr.Set(HeaderLimit, "600") // 10/s; paced at 98 % = 588/min
	hdr.Set(HeaderRemaining, "599")
	hdr.Set(HeaderReset, "100ms")
	h.l.Observe(hdr)

	s := h.l.Stats()
	assert.Equal(t, 600, s.LimitRPM)
	assert.InDelta(t, 588, s.RPM, 1e-9)
	assert.Equal(t, 599, s.Remaining)

	// The slot promised at 20 RPM is rescaled to the learned rate: ten
	// more grants fit in ten new intervals (3 s at the old rate would
	// allow one).
	assert.Equal(t, 594, s.Capacity, "588 a minute: at most 594 in 1.01 minutes")
	interval := h.interval()
	for i := range 10 {
		h.startQueued(context.Background(), i)
	}
	var last time.Time
	for i := range 10 {
		h.step(interval)
		r := h.recvDone()
		require.Equal(t, i, r.id)
		last = r.at
	}
	assert.Equal(t, start.Add(10*interval), last)
	assert.EqualValues(t, 11, h.l.Stats().Granted)
}

// settle starts waiter id and returns once it is queued or granted.
func (h *harness) settle(id int) (granted bool) {
	h.start(context.Background(), id)
	select {
	case <-h.queued:
		return false
	case r := <-h.done:
		require.NoError(h.t, r.err)
		return true
	case <-time.After(deadline):
		h.t.Fatal("waiter neither granted nor queued")
		return false
	}
}

// However fast catching up lets grants come (here: an allowance of two
// windows), no sliding window of Window plus Headroom/2 ever holds more
// grants than the pace allows for it.
func TestWindowCapBoundsEverySlidingWindow(t *testing.T) {
	h := newHarness(t, Config{Name: "m", CatchUp: 2 * time.Minute})
	hdr := http.Header{}
	hdr.Set(HeaderLimit, "100") // pace 98 a minute: 99 in the 60.6 s guard window
	h.l.Observe(hdr)
	require.Equal(t, 99, h.l.Stats().Capacity)
	start := h.clock.Now()
	granted := 0
	for i := range 100 {
		if h.settle(i) {
			granted++
		}
	}
	require.Equal(t, 1, granted, "catching up is never a burst")
	gap := h.interval() / 2
	for h.l.Stats().Granted < 99 {
		h.step(gap)
	}
	assert.LessOrEqual(t, h.clock.Since(start), 99*gap, "caught up at twice the pace")
	for range 98 {
		require.NoError(t, h.recvDone().err)
	}
	assert.Equal(t, 99, h.l.Stats().InWindow)
	h.noGrantYet()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	require.NoError(t, h.clock.BlockUntilContext(ctx, 1))
	guard := 60600 * time.Millisecond
	h.clock.Advance(start.Add(guard).Sub(h.clock.Now()) - time.Millisecond)
	h.noGrantYet()
	h.clock.Advance(time.Millisecond)
	r := h.recvDone()
	assert.Equal(t, 99, r.id)
	assert.Equal(t, guard, r.at.Sub(start), "the 100th waits for the first to leave the guard window")
}

// A stalled machine (the timer fired 4 s late) costs no throughput: the
// overdue slots are granted at twice the pace until the schedule is met.
func TestLateTimerCatchesUp(t *testing.T) {
	// limit 100 with 40 % headroom: pace 60/min = one a second.
	h := newHarness(t, Config{Name: "m", Headroom: 0.4, CatchUp: 5 * time.Second})
	hdr := http.Header{}
	hdr.Set(HeaderLimit, "100")
	h.l.Observe(hdr)
	until := h.clock.Now().Add(time.Second)
	h.l.Pause(until) // resume without a catch-up allowance
	for i := range 15 {
		h.startQueued(context.Background(), i)
	}
	h.step(time.Second)
	assert.Equal(t, until, h.recvDone().at)
	h.step(5 * time.Second) // due at +1 s; the machine wakes at +5 s
	assert.Equal(t, until.Add(5*time.Second), h.recvDone().at)
	for k := 3; k <= 10; k++ {
		h.step(time.Second / 2)
		r := h.recvDone()
		assert.Equal(t, until.Add(5*time.Second+time.Duration(k-2)*time.Second/2), r.at, "grant %d", k)
	}
	// Back on schedule: grant k at until + (k-1) s, as if no stall.
	h.step(time.Second / 2)
	h.noGrantYet()
	h.step(time.Second / 2)
	assert.Equal(t, until.Add(10*time.Second), h.recvDone().at)
}

// A rate learned before a restart paces from the first request: no
// crawl at InitialRPM, and no catch-up burst the server's window (still
// full of the previous run's requests) would answer with 429s.
func TestLearnedRateAfterRestartPacesWithoutBurst(t *testing.T) {
	h := newHarness(t, Config{Name: "m", InitialRPM: 20})
	h.l.Learn(200, time.Minute)
	limit, window := h.l.Learned()
	assert.Equal(t, 200, limit)
	assert.Equal(t, time.Minute, window)
	require.NoError(t, h.l.Wait(context.Background()))
	start := h.clock.Now()
	iv := h.interval()
	assert.InDelta(t, float64(time.Minute)/(200*0.98), float64(iv), 1, "paced at the learned rate")
	h.l.mu.Lock()
	next := h.l.nextGrantLocked(start, 0)
	h.l.mu.Unlock()
	assert.Equal(t, start.Add(iv), next, "the second request waits a full interval: no catch-up burst")
	for id := 1; id <= 3; id++ {
		h.startQueued(context.Background(), id)
	}
	for id := 1; id <= 3; id++ {
		h.step(iv)
		r := h.recvDone()
		require.NoError(t, r.err)
		assert.Equal(t, time.Duration(id)*iv, r.at.Sub(start), "waiter %d: one interval apart, no burst", id)
	}
	// A limit counted over another window is scaled to ours.
	h.l.Learn(20, 6*time.Second)
	limit, _ = h.l.Learned()
	assert.Equal(t, 200, limit)
}
