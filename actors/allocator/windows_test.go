package allocator

import (
	"testing"
	"time"
	_ "time/tzdata" // America/New_York wherever the tests run

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHourlyResetAtConfiguredMinute(t *testing.T) {
	for _, loc := range []*time.Location{time.UTC, time.FixedZone("IST", 5*3600+30*60)} {
		t.Run(loc.String(), func(t *testing.T) {
			cfg := one(50, 5)
			cfg.HourlyResetMinute = 30
			cfg.Location = loc
			start := time.Date(2026, 3, 2, 10, 0, 0, 0, loc)
			r := newRig(t, cfg, start)
			require.Equal(t, time.Date(2026, 3, 2, 9, 30, 0, 0, loc).UnixNano(), r.book.Snapshot().GetHourWindowStart())

			r.useN("sim", false, 7)
			r.advanceTo(time.Date(2026, 3, 2, 10, 29, 59, 0, loc))
			assert.Empty(t, r.tick(), "10:29:59 is still the 09:30 window")
			assert.Equal(t, 7, r.status("sim").HourlyUsed)
			assert.Equal(t, time.Date(2026, 3, 2, 10, 30, 0, 0, loc), r.book.NextHourWindow(r.now()).In(loc))

			r.advanceTo(time.Date(2026, 3, 2, 10, 30, 0, 0, loc))
			assert.Equal(t, []string{"hour"}, kinds(r.tick()))
			assert.Equal(t, 0, r.status("sim").HourlyUsed)
			assert.Equal(t, time.Date(2026, 3, 2, 11, 30, 0, 0, loc), r.book.NextHourWindow(r.now()).In(loc))
			assert.Empty(t, r.tick(), "a second tick in the same window resets nothing")
		})
	}
}

func TestDailyResetAtConfiguredHour(t *testing.T) {
	for _, loc := range []*time.Location{time.UTC, time.FixedZone("IST", 5*3600+30*60)} {
		t.Run(loc.String(), func(t *testing.T) {
			cfg := one(50, 5)
			cfg.DailyResetHour = 4
			cfg.Location = loc
			r := newRig(t, cfg, time.Date(2026, 3, 2, 2, 10, 0, 0, loc))
			require.Equal(t, time.Date(2026, 3, 1, 4, 0, 0, 0, loc).UnixNano(), r.book.Snapshot().GetDayWindowStart())

			r.useN("sim", true, 3)
			r.advanceTo(time.Date(2026, 3, 2, 3, 59, 0, 0, loc))
			assert.Equal(t, []string{"hour"}, kinds(r.tick()), "the hour changed, the day did not")
			assert.Equal(t, 3, r.status("sim").DeepUsed)
			assert.Equal(t, time.Date(2026, 3, 2, 4, 0, 0, 0, loc), r.book.NextDayWindow(r.now()).In(loc))

			r.advanceTo(time.Date(2026, 3, 2, 4, 0, 0, 0, loc))
			assert.Equal(t, []string{"hour", "day"}, kinds(r.tick()))
			assert.Equal(t, 0, r.status("sim").DeepUsed)
			assert.Equal(t, time.Date(2026, 3, 3, 4, 0, 0, 0, loc), r.book.NextDayWindow(r.now()).In(loc))
		})
	}
}

// Across a DST change the hour windows stay 60 minutes and the day window
// starts at the local reset hour.
func TestWindowsAcrossDST(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	cfg := one(50, 5)
	cfg.HourlyResetMinute = 15
	cfg.DailyResetHour = 3
	cfg.Location = ny
	b := New(cfg)

	// 2026-03-08 02:00 EST -> 03:00 EDT.
	before := time.Date(2026, 3, 8, 1, 20, 0, 0, ny)
	assert.Equal(t, time.Date(2026, 3, 8, 3, 15, 0, 0, ny), b.NextHourWindow(before).In(ny))
	assert.Equal(t, time.Hour, b.NextHourWindow(before).Sub(b.hourWindowStartAt(before)))
	assert.Equal(t, time.Date(2026, 3, 8, 3, 0, 0, 0, ny), b.NextDayWindow(before).In(ny))
	after := time.Date(2026, 3, 8, 3, 5, 0, 0, ny)
	assert.Equal(t, time.Date(2026, 3, 9, 3, 0, 0, 0, ny), b.NextDayWindow(after).In(ny))
	assert.Equal(t, 24*time.Hour, b.NextDayWindow(after).Sub(b.dayWindowStartAt(after)))
	assert.Equal(t, 23*time.Hour, b.NextDayWindow(before).Sub(b.dayWindowStartAt(before)), "a short day")
}

func TestRestartMidHourKeepsTheCount(t *testing.T) {
	cfg := one(50, 5)
	r := newRig(t, cfg, at(10, 0))
	r.useN("sim", true, 2)
	r.advanceTo(at(10, 20))
	snap := r.book.Snapshot()
	mark := len(r.log)
	r.useN("sim", false, 10)
	r.advanceTo(at(10, 40))
	r.useN("sim", false, 3)

	// Crash; restart at 10:45 from the checkpoint and the later events.
	restarted, err := Restore(cfg, snap)
	require.NoError(t, err)
	for _, e := range r.log[mark:] {
		require.NoError(t, restarted.Apply(e))
	}
	now := at(10, 45)
	assert.Empty(t, restarted.DecideTick(now), "same windows: nothing resets")
	st := restarted.Status(now)[0]
	assert.Equal(t, 15, st.HourlyUsed)
	assert.Equal(t, 2, st.DeepUsed)

	// The rest of the hour's budget only: 45 - 15 = 30.
	for range 30 {
		e, err := restarted.DecideUse("sim", false, "t", now)
		require.NoError(t, err)
		require.NoError(t, restarted.Apply(e))
	}
	assert.False(t, restarted.CanUse("sim", false, now))
}

func TestRestartAcrossBoundariesResetsOnFirstTick(t *testing.T) {
	cfg := one(50, 5)
	cfg.DailyResetHour = 6
	r := newRig(t, cfg, at(4, 10))
	r.useN("sim", true, 5)
	r.useN("sim", false, 40)
	require.False(t, r.book.CanUse("sim", true, r.now()))
	snap := r.book.Snapshot()

	// Down from 04:10 to 09:42: five hour boundaries and one day boundary.
	restarted, err := Restore(cfg, snap)
	require.NoError(t, err)
	now := at(9, 42)
	assert.False(t, restarted.CanUse("sim", false, now), "stale counts stay until the tick")
	evs := restarted.DecideTick(now)
	require.Equal(t, []string{"hour", "day"}, kinds(evs), "one reset each")
	assert.Equal(t, at(9, 0).UnixNano(), evs[0].GetHourWindowReset().GetWindowStart(), "the latest hour boundary")
	assert.Equal(t, at(6, 0).UnixNano(), evs[1].GetDayWindowReset().GetWindowStart(), "the latest day boundary")
	for _, e := range evs {
		require.NoError(t, restarted.Apply(e))
	}
	st := restarted.Status(now)[0]
	assert.Equal(t, 0, st.HourlyUsed)
	assert.Equal(t, 0, st.DeepUsed)
	assert.True(t, restarted.CanUse("sim", true, now))
	assert.Empty(t, restarted.DecideTick(now))
}

// A fresh book may be used before its first tick; the first tick starts
// the windows without losing those uses.
func TestFirstTickKeepsEarlierUses(t *testing.T) {
	b := New(one(50, 5))
	now := at(10, 5)
	for range 3 {
		e, err := b.DecideUse("sim", true, "t", now)
		require.NoError(t, err)
		require.NoError(t, b.Apply(e))
	}
	evs := b.DecideTick(now)
	require.Equal(t, []string{"hour", "day"}, kinds(evs))
	for _, e := range evs {
		require.NoError(t, b.Apply(e))
	}
	st := b.Status(now)[0]
	assert.Equal(t, 3, st.HourlyUsed)
	assert.Equal(t, 3, st.DeepUsed)
}

// Applying a reset twice, or an older one, changes nothing.
func TestResetsAreIdempotent(t *testing.T) {
	r := newRig(t, one(50, 5), at(10, 0))
	r.advanceTo(at(11, 0))
	evs := r.tick()
	require.Len(t, evs, 1)
	r.useN("sim", false, 4)
	require.NoError(t, r.book.Apply(evs[0]))
	assert.Equal(t, 4, r.status("sim").HourlyUsed)
}
