package simulate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// What the clock fired counts as undelivered until it is taken: a timer's
// tick until it is read from its channel, an AfterFunc callback until it
// returns. The driver does not move the clock while any is.
func TestClockUndeliveredUntilTaken(t *testing.T) {
	c := NewClock(Epoch)
	timer := c.NewTimer(time.Second)
	release := make(chan struct{})
	returned := make(chan struct{})
	c.AfterFunc(2*time.Second, func() {
		<-release
		close(returned)
	})
	require.Zero(t, c.Undelivered(), "nothing fired yet")

	c.AdvanceTo(Epoch.Add(time.Second))
	require.Equal(t, 1, c.Undelivered(), "the timer's tick waits in its channel")
	<-timer.Chan()
	require.Zero(t, c.Undelivered(), "taken")

	c.AdvanceTo(Epoch.Add(2 * time.Second))
	require.Equal(t, 1, c.Undelivered(), "the callback runs")
	close(release)
	<-returned
	require.Eventually(t, func() bool { return c.Undelivered() == 0 }, 5*time.Second, time.Millisecond, "returned")

	// Tickers tick only when told, the watched period's first; a tick
	// counts from its delivery until its reader is back for the next.
	c.WatchTickers(100 * time.Millisecond)
	watched, other := c.NewTicker(100*time.Millisecond), c.NewTicker(time.Minute)
	c.AdvanceTo(Epoch.Add(time.Minute + 2*time.Second))
	require.Zero(t, c.Undelivered(), "AdvanceTo fires no ticker")
	require.True(t, c.TicksDue(true))
	require.True(t, c.TicksDue(false))
	require.True(t, c.DeliverTicks(true))
	require.Equal(t, 1, c.Undelivered(), "the watched tick waits")
	require.False(t, c.TicksDue(true), "one tick however many periods passed")
	require.Empty(t, other.Chan(), "the other ticker waits its turn")
	<-watched.Chan()
	require.Equal(t, 1, c.Undelivered(), "taken, its reader still at work")
	_ = watched.Chan() // the reader back at its select
	require.Zero(t, c.Undelivered())
	require.True(t, c.DeliverTicks(false))
	<-other.Chan()
	watched.Stop()
	other.Stop()
	require.Zero(t, c.Undelivered(), "a stopped ticker's reader is gone")

	// A timer stopped after it fired is nobody's to take.
	stopped := c.NewTimer(time.Second)
	c.AdvanceTo(Epoch.Add(time.Minute + 4*time.Second))
	require.Equal(t, 1, c.Undelivered())
	stopped.Stop()
	require.Zero(t, c.Undelivered())
}

// The clock tells (Done) when something it fired was acted on: an
// AfterFunc callback returned, a ticker's reader is back at its select.
// The driver sleeps on it rather than polling.
func TestClockTellsWhenWhatItFiredWasActedOn(t *testing.T) {
	c := NewClock(Epoch)
	release := make(chan struct{})
	c.AfterFunc(time.Second, func() { <-release })
	c.AdvanceTo(Epoch.Add(time.Second))
	require.Empty(t, c.Done(), "the callback still runs")
	close(release)
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("no word of the callback's return")
	}
	require.Zero(t, c.Undelivered())

	ticker := c.NewTicker(time.Minute)
	c.AdvanceTo(Epoch.Add(time.Minute + time.Second))
	require.True(t, c.DeliverTicks(false))
	<-ticker.Chan()
	require.Empty(t, c.Done(), "taken, its reader still at work")
	_ = ticker.Chan()
	require.Len(t, c.Done(), 1, "the reader is back")
	<-c.Done()
	_ = ticker.Chan()
	require.Empty(t, c.Done(), "told once per tick")
}
