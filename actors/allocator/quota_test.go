package allocator

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/pb"
)

func TestBufferKeepsTenPercent(t *testing.T) {
	r := newRig(t, one(50, 0), at(10, 7))
	r.useN("sim", false, 45)
	assert.False(t, r.book.CanUse("sim", false, r.now()))

	_, err := r.book.DecideUse("sim", false, "t46", r.now())
	var nq *NoQuotaError
	require.True(t, errors.As(err, &nq), "got %v", err)
	assert.Equal(t, "sim", nq.Backend)
	assert.Equal(t, at(11, 0), nq.Until.UTC())
	assert.Contains(t, nq.Reason, "hourly")

	st := r.status("sim")
	assert.Equal(t, 45, st.HourlyUsed)
	assert.Equal(t, 45, st.Usable)
	assert.False(t, st.Available)
}

func TestUsableIsAtLeastOne(t *testing.T) {
	r := newRig(t, one(1, 0), at(10, 0))
	assert.Equal(t, 1, r.status("sim").Usable)
	r.use("sim", false)
	assert.False(t, r.book.CanUse("sim", false, r.now()))

	z := newRig(t, one(0, 0), at(10, 0))
	assert.False(t, z.book.CanUse("sim", false, z.now()), "a zero limit is never usable")
}

// Decided but not yet applied uses count, so quick decisions cannot
// overspend; applying (or abandoning) takes them out of flight.
func TestInFlightUsesCount(t *testing.T) {
	r := newRig(t, one(10, 2), at(10, 0)) // usable 9
	var decided []*pb.Event
	for range 9 {
		e, err := r.book.DecideUse("sim", false, "t", r.now())
		require.NoError(t, err)
		decided = append(decided, e)
	}
	_, err := r.book.DecideUse("sim", false, "t", r.now())
	require.Error(t, err, "nine in flight fill the budget")

	r.book.Abandon(decided[8])
	assert.True(t, r.book.CanUse("sim", false, r.now()), "an abandoned decision frees its place")
	for _, e := range decided[:8] {
		r.persist(e)
	}
	assert.Equal(t, 8, r.status("sim").HourlyUsed)
	r.use("sim", false)
	assert.False(t, r.book.CanUse("sim", false, r.now()))

	// Replayed QuotaUsed events never drive the counter below zero.
	r.advanceTo(at(11, 0))
	r.tick()
	for _, e := range decided[:3] {
		require.NoError(t, r.book.Apply(e))
	}
	assert.Equal(t, 3, r.status("sim").HourlyUsed)
	for range 6 {
		r.use("sim", false)
	}
	assert.False(t, r.book.CanUse("sim", false, r.now()))

	// Deep decisions in flight count against the deep budget too.
	r.advanceTo(at(12, 0))
	r.tick()
	_, err = r.book.DecideUse("sim", true, "d1", r.now())
	require.NoError(t, err)
	_, err = r.book.DecideUse("sim", true, "d2", r.now())
	require.NoError(t, err)
	assert.False(t, r.book.CanUse("sim", true, r.now()))
	assert.True(t, r.book.CanUse("sim", false, r.now()))
}

func TestDeepModeDailyLimit(t *testing.T) {
	cfg := one(50, 3)
	cfg.DailyResetHour = 5
	r := newRig(t, cfg, at(10, 0))
	r.useN("sim", true, 3)
	assert.False(t, r.book.CanUse("sim", true, r.now()))
	assert.True(t, r.book.CanUse("sim", false, r.now()), "deep uses count in the hour, not beyond it")
	assert.Equal(t, 3, r.status("sim").HourlyUsed)

	_, err := r.book.DecideUse("sim", true, "t", r.now())
	var nq *NoQuotaError
	require.ErrorAs(t, err, &nq)
	assert.True(t, nq.Deep)
	assert.Equal(t, time.Date(2026, 3, 3, 5, 0, 0, 0, time.UTC), nq.Until.UTC())

	// Hour windows pass, the deep budget stays spent.
	for h := 11; h <= 23; h++ {
		r.advanceTo(at(h, 0))
		r.tick()
		require.False(t, r.book.CanUse("sim", true, r.now()), "hour %d", h)
	}
	r.advanceTo(time.Date(2026, 3, 3, 5, 0, 0, 0, time.UTC))
	assert.Equal(t, []string{"hour", "day"}, kinds(r.tick()))
	assert.True(t, r.book.CanUse("sim", true, r.now()))

	// A backend without deep mode never has it.
	nd := newRig(t, one(50, 0), at(10, 0))
	_, err = nd.book.DecideUse("sim", true, "t", nd.now())
	require.ErrorAs(t, err, &nq)
	assert.True(t, nq.Until.IsZero())
}

func TestUsageCapDropAndRecovery(t *testing.T) {
	r := newRig(t, one(50, 0), at(10, 0))
	r.useN("sim", false, 30)
	r.advanceTo(at(10, 20))
	r.usageCap("sim", at(10, 30))

	st := r.status("sim")
	assert.Equal(t, 24, st.LimitEstimate, "80 %% of the 30 used")
	assert.Equal(t, 21, st.Usable)
	assert.Equal(t, at(10, 30), st.RateLimitedUntil.UTC())
	assert.False(t, r.book.CanUse("sim", false, r.now()))
	_, err := r.book.DecideUse("sim", false, "t", r.now())
	var nq *NoQuotaError
	require.ErrorAs(t, err, &nq)
	assert.Equal(t, at(10, 30), nq.Until.UTC(), "capped until 10:30, the time named, and no longer")
	assert.Equal(t, "capped", r.status("sim").State)

	// After the named time the lowered estimate paces (one request per
	// hour/21) instead of parking the backend until 11:00.
	r.advanceTo(at(10, 30))
	r.use("sim", false)
	assert.False(t, r.book.CanUse("sim", false, r.now()), "paced")
	st = r.status("sim")
	assert.Equal(t, "paced", st.State)
	assert.Equal(t, at(10, 30).Add(time.Hour/21), st.Until.UTC())
	r.advanceTo(at(10, 30).Add(time.Hour / 21))
	assert.True(t, r.book.CanUse("sim", false, r.now()))

	// The hour of the rate limit is not clean: no step at 11:00.
	r.advanceTo(at(11, 0))
	r.tick()
	assert.Equal(t, 24, r.status("sim").LimitEstimate)
	assert.True(t, r.book.CanUse("sim", false, r.now()))
	assert.Zero(t, r.status("sim").RateLimitedUntil)

	// Each clean hour then raises it by 10 % of 50 up to 50.
	want := []int{29, 34, 39, 44, 49, 50, 50}
	for i, w := range want {
		r.advanceTo(at(12+i, 0))
		r.tick()
		st := r.status("sim")
		assert.Equal(t, w, st.LimitEstimate, "at %02d:00", 12+i)
		assert.Equal(t, 50, st.HourlyLimit)
	}
	assert.Equal(t, 45, r.status("sim").Usable)
	assert.Zero(t, r.book.Snapshot().GetBackends()[0].GetLimitEstimate(), "recovered: the configured limit again")
}

func TestRecoveryEveryNCleanHours(t *testing.T) {
	cfg := one(100, 0)
	cfg.RecoveryCleanHours = 2
	cfg.RecoveryStepPercent = 25
	r := newRig(t, cfg, at(0, 0))
	r.usageCap("sim", at(0, 1)) // nothing used: down to the floor, 10
	assert.Equal(t, 10, r.status("sim").LimitEstimate)

	want := map[int]int{1: 10, 2: 10, 3: 35, 4: 35, 5: 60, 6: 60, 7: 85, 8: 85, 9: 100}
	for h := 1; h <= 9; h++ {
		r.advanceTo(at(h, 0))
		r.tick()
		assert.Equal(t, want[h], r.status("sim").LimitEstimate, "at %02d:00", h)
	}

	// A new cap mid-recovery starts the count again and never raises
	// the estimate.
	r.usageCap("sim", r.now().Add(time.Minute))
	assert.Equal(t, 10, r.status("sim").LimitEstimate)
}

func TestRateLimitFloorIsTheConfiguredLimitIfSmaller(t *testing.T) {
	r := newRig(t, one(6, 0), at(10, 0))
	r.usageCap("sim", at(10, 1))
	st := r.status("sim")
	assert.Equal(t, 6, st.LimitEstimate)
	assert.Equal(t, 5, st.Usable)
}

// A per-minute rate limit pauses until its reset and changes no estimate;
// one without a reset (or 0s) pauses for a short backoff from the learned
// rate, never until the next hour window.
func TestRateLimitIsNotACap(t *testing.T) {
	cfg := one(100000, 0)
	cfg.HourlyResetMinute = 30
	r := newRig(t, cfg, at(10, 40))
	r.useN("sim", false, 40)
	r.rateLimit("sim", 2400*time.Millisecond)
	st := r.status("sim")
	assert.Equal(t, 100000, st.LimitEstimate, "a rate limit says nothing about the hour")
	assert.Equal(t, "rate_limited", st.State)
	assert.Equal(t, at(10, 40).Add(2400*time.Millisecond), st.Until.UTC())
	assert.False(t, r.book.Snapshot().GetBackends()[0].GetCapped())

	r.advanceTo(at(10, 41))
	r.rateLimit("sim", 0) // no time given (or "0s")
	e := r.log[len(r.log)-1].GetRateLimitRecorded()
	assert.Equal(t, at(10, 41).Add(15*time.Second).UnixNano(), e.GetUntil(), "no rate learned: 15 s")
	assert.False(t, e.GetCap())

	// With a learned rate of 60 a minute: three intervals, 3 s.
	r.persist(r.book.DecideRateLearned("sim", 60, time.Minute, r.now()))
	assert.Nil(t, r.book.DecideRateLearned("sim", 60, time.Minute, r.now()), "nothing new learned")
	r.advanceTo(at(10, 42))
	r.rateLimit("sim", 0)
	assert.Equal(t, at(10, 42).Add(3*time.Second).UnixNano(), r.log[len(r.log)-1].GetRateLimitRecorded().GetUntil())
	assert.Equal(t, 100000, r.status("sim").LimitEstimate)
	r.advanceTo(at(10, 42).Add(3 * time.Second))
	assert.True(t, r.book.CanUse("sim", false, r.now()))

	// A one-minute reset that crosses the hour window is still a rate
	// limit (the windows start at :30 here).
	r.advanceTo(at(11, 29).Add(30 * time.Second))
	r.rateLimit("sim", time.Minute)
	assert.False(t, r.log[len(r.log)-1].GetRateLimitRecorded().GetCap())
	assert.Equal(t, 100000, r.status("sim").LimitEstimate)
}

// Whether a window is a rate or a quota window is the recogniser's to
// say: a long reset on a rate window parks the backend until that reset
// and lowers no estimate; a quota window parks it until the time named;
// a cap event logged with until 0 (an older producer) parks to the window.
func TestWindowKindIsTheRecognisers(t *testing.T) {
	cfg := one(50, 0)
	cfg.HourlyResetMinute = 30
	r := newRig(t, cfg, at(11, 30))
	r.rateLimit("sim", 2*time.Hour)
	assert.False(t, r.log[len(r.log)-1].GetRateLimitRecorded().GetCap(), "no guess: a rate window stays one")
	assert.Equal(t, "rate_limited", r.status("sim").State)
	assert.Equal(t, 50, r.status("sim").LimitEstimate)

	r.advanceTo(at(13, 30))
	r.tick()
	r.usageCap("sim", at(15, 30))
	r.advanceTo(at(14, 30))
	r.tick()
	assert.False(t, r.book.CanUse("sim", false, r.now()))
	assert.Equal(t, "capped", r.status("sim").State)
	r.advanceTo(at(15, 30))
	r.tick()
	assert.True(t, r.book.CanUse("sim", false, r.now()))

	require.NoError(t, r.book.Apply(&pb.Event{At: at(15, 45).UnixNano(), Body: &pb.Event_RateLimitRecorded{
		RateLimitRecorded: &pb.RateLimitRecorded{Backend: "sim", Cap: true}}}))
	assert.Equal(t, at(16, 30).UnixNano(), r.book.Snapshot().GetBackends()[0].GetRateLimitedUntil())
}

// A backend's own fault (credentials, an open circuit) refuses it until
// the time recorded, then it is tried again; "ready" clears it.
func TestConditionParksBackend(t *testing.T) {
	r := newRig(t, one(50, 0), at(10, 0))
	ev, err := r.book.DecideCondition("sim", "credentials", "HTTP 401: set OPENAI_API_KEY", at(10, 5), r.now())
	require.NoError(t, err)
	r.persist(ev)
	again, err := r.book.DecideCondition("sim", "credentials", "HTTP 401: set OPENAI_API_KEY", at(10, 5), r.now())
	require.NoError(t, err)
	assert.Nil(t, again, "already recorded")
	assert.False(t, r.book.CanUse("sim", false, r.now()))
	st := r.status("sim")
	assert.Equal(t, "credentials", st.State)
	assert.Equal(t, at(10, 5), st.Until.UTC())
	_, ok := r.book.Choose(&pb.Task{Id: "t"}, []string{"sim"}, r.now())
	assert.False(t, ok)

	r.advanceTo(at(10, 5))
	assert.True(t, r.book.CanUse("sim", false, r.now()), "re-checked by the next request")
	ev, err = r.book.DecideCondition("sim", StateReady, "", time.Time{}, r.now())
	require.NoError(t, err)
	r.persist(ev)
	assert.Equal(t, "ready", r.status("sim").State)
	_, err = r.book.DecideCondition("nope", "credentials", "", time.Time{}, r.now())
	require.ErrorIs(t, err, ErrUnknownBackend)
}

// Several tasks meeting one open circuit report it at one instant, before
// the first report's event is applied: it is recorded once, so the WAL does
// not depend on how the reports and the journal's apply interleave.
func TestConditionDecidedOnceBeforeItIsApplied(t *testing.T) {
	r := newRig(t, one(50, 0), at(10, 0))
	decide := func(state string) *pb.Event {
		t.Helper()
		ev, err := r.book.DecideCondition("sim", state, "circuit open", at(10, 5), r.now())
		require.NoError(t, err)
		return ev
	}
	first := decide("circuit_open")
	require.NotNil(t, first)
	assert.Nil(t, decide("circuit_open"), "decided, not yet applied: not again")
	r.persist(first)
	assert.Nil(t, decide("circuit_open"), "applied: not again")

	// A clear decided and not yet applied: the fault is news again.
	clear, err := r.book.DecideCondition("sim", StateReady, "", time.Time{}, r.now())
	require.NoError(t, err)
	again := decide("circuit_open")
	require.NotNil(t, again, "after a clear")
	r.persist(clear)
	r.persist(again)
	assert.Equal(t, "circuit_open", r.status("sim").State)
	assert.Nil(t, decide("circuit_open"))
}

func TestPauseAndResume(t *testing.T) {
	r := newRig(t, one(50, 0), at(10, 0))
	_, err := r.book.DecidePause("nope", "x", r.now())
	require.ErrorIs(t, err, ErrUnknownBackend)
	assert.Contains(t, err.Error(), `"nope"`)
	_, err = r.book.DecideResume("nope", r.now())
	require.ErrorIs(t, err, ErrUnknownBackend)
	_, err = r.book.DecideUse("nope", false, "t", r.now())
	require.ErrorIs(t, err, ErrUnknownBackend)

	e, err := r.book.DecidePause("sim", "login expired", r.now())
	require.NoError(t, err)
	r.persist(e)
	_, err = r.book.DecideUse("sim", false, "t", r.now())
	var nq *NoQuotaError
	require.ErrorAs(t, err, &nq)
	assert.True(t, nq.Until.IsZero())
	assert.Contains(t, nq.Reason, "login expired")
	st := r.status("sim")
	assert.True(t, st.Paused)
	assert.Equal(t, "login expired", st.PauseReason)
	assert.Empty(t, r.book.Free(r.now()))

	e, err = r.book.DecideResume("sim", r.now())
	require.NoError(t, err)
	r.persist(e)
	assert.True(t, r.book.CanUse("sim", false, r.now()))
	assert.Equal(t, []string{"sim"}, r.book.Free(r.now()))
}

func TestApplyRejectsOtherEvents(t *testing.T) {
	b := New(one(50, 0))
	err := b.Apply(&pb.Event{Body: &pb.Event_TaskCompleted{TaskCompleted: &pb.TaskCompleted{TaskId: "x"}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "TaskCompleted")
	require.Error(t, b.Apply(&pb.Event{}))
}

func TestConfigValidation(t *testing.T) {
	bad := []Config{
		{HourlyResetMinute: 60},
		{DailyResetHour: 24},
		{BufferPercent: 100},
		{Backends: []BackendConfig{{Name: "a", Kind: "sim"}, {Name: "a", Kind: "sim"}}},
		{Backends: []BackendConfig{{Name: "a", Kind: "telepathy"}}},
		{Backends: []BackendConfig{{Name: "a", Kind: "api", HourlyLimit: -1}}},
	}
	for _, c := range bad {
		require.Error(t, c.Validate(), "%+v", c)
		assert.Panics(t, func() { New(c) })
		_, err := Restore(c, nil)
		require.Error(t, err)
	}
}

func TestRestoreDropsAndAddsBackends(t *testing.T) {
	old := Config{BufferPercent: 10, Backends: []BackendConfig{
		{Name: "gone", Kind: KindSim, HourlyLimit: 50},
		{Name: "kept", Kind: KindSim, HourlyLimit: 50},
	}}
	r := newRig(t, old, at(10, 0))
	r.useN("gone", false, 4)
	r.useN("kept", false, 5)
	snap := r.book.Snapshot()

	cfg := Config{BufferPercent: 10, Backends: []BackendConfig{
		{Name: "kept", Kind: KindSim, HourlyLimit: 50},
		{Name: "new", Kind: KindSim, HourlyLimit: 50},
	}}
	b, err := Restore(cfg, snap)
	require.NoError(t, err)
	assert.Equal(t, []string{"gone"}, b.DroppedBackends())
	st := b.Status(at(10, 5))
	require.Len(t, st, 2)
	assert.Equal(t, "kept", st[0].Name)
	assert.Equal(t, 5, st[0].HourlyUsed)
	assert.Equal(t, "new", st[1].Name)
	assert.Equal(t, 0, st[1].HourlyUsed)

	// A replayed event of the dropped backend is ignored, not an error.
	require.NoError(t, b.Apply(r.log[len(r.log)-6]))
	assert.Equal(t, []string{"gone"}, b.DroppedBackends())

	snap.Backends = append(snap.Backends, snap.Backends[0])
	_, err = Restore(cfg, snap)
	require.Error(t, err, "a backend twice in the snapshot")
}
