package allocator

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A simulated day: three backends of 50 an hour, worked as hard as the
// book allows, one request a minute each. Every hour each uses exactly its
// usable budget (45), every day exactly its deep-mode limit, never more.
func TestSimulatedDay(t *testing.T) {
	cfg := Config{
		BufferPercent:     10,
		HourlyResetMinute: 0,
		DailyResetHour:    0,
		Backends: []BackendConfig{
			{Name: "a", Kind: KindBrowser, HourlyLimit: 50, DeepDailyLimit: 100},
			{Name: "b", Kind: KindBrowser, HourlyLimit: 50, DeepDailyLimit: 20},
			{Name: "c", Kind: KindSim, HourlyLimit: 50, DeepDailyLimit: 100},
		},
	}
	deepLimit := map[string]int{"a": 100, "b": 20, "c": 100}
	start := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	r := newRig(t, cfg, start)

	perHour := map[string]*[24]int{"a": {}, "b": {}, "c": {}}
	deep := map[string]int{}
	for r.now().Before(start.Add(24 * time.Hour)) {
		r.tick()
		now := r.now()
		hour := int(now.Sub(start) / time.Hour)
		for _, name := range []string{"a", "b", "c"} {
			if !r.book.CanUse(name, false, now) {
				continue
			}
			require.True(t, r.book.Acquire(name))
			d := r.book.CanUse(name, true, now)
			r.use(name, d)
			perHour[name][hour]++
			if d {
				deep[name]++
			}
			st := r.status(name)
			require.LessOrEqual(t, st.HourlyUsed, 45, "%s at %s", name, now)
			require.LessOrEqual(t, st.DeepUsed, deepLimit[name], "%s at %s", name, now)
			r.book.Release(name)
		}
		r.clock.Advance(time.Minute)
	}
	for name, hours := range perHour {
		for h, n := range hours {
			assert.Equal(t, 45, n, "%s in hour %d", name, h)
		}
		assert.Equal(t, deepLimit[name], deep[name], name)
	}

	// Midnight: a new day, the deep budgets are back.
	evs := r.tick()
	assert.Equal(t, []string{"hour", "day"}, kinds(evs))
	for name, lim := range deepLimit {
		st := r.status(name)
		assert.Equal(t, 0, st.DeepUsed)
		assert.Equal(t, lim, st.DeepLimit)
		assert.True(t, r.book.CanUse(name, true, r.now()))
	}
}
