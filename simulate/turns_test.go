package simulate

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"fano/gateway"
)

// parkedNow waits until n calls are parked.
func parkedNow(t *testing.T, ts *Turns, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ts.Parked() != n; runtime.Gosched() {
		require.True(t, time.Now().Before(deadline), "%d calls parked, want %d", ts.Parked(), n)
	}
}

// The calls of one instant go in task order (then their conversation's
// turn), whatever order they arrived in, one per Next.
func TestTurnsLetCallsGoInTaskOrder(t *testing.T) {
	ts := NewTurns()
	went := make(chan string, 4)
	reqs := []gateway.Request{
		{TaskID: "c"},
		{TaskID: "a", History: []gateway.Message{{Role: "user"}, {Role: "assistant"}}},
		{TaskID: "b"},
		{TaskID: "a"},
	}
	for i, req := range reqs {
		go func() {
			if err := ts.Wait(context.Background(), req); err == nil {
				went <- req.TaskID + "/" + string(rune('0'+len(req.History)))
			}
		}()
		parkedNow(t, ts, i+1)
	}
	for _, want := range []string{"a/0", "a/2", "b/0", "c/0"} {
		require.True(t, ts.Next())
		require.Equal(t, want, <-went)
	}
	require.False(t, ts.Next(), "nobody left")

	// A call whose context ends leaves the line.
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- ts.Wait(ctx, gateway.Request{TaskID: "d"}) }()
	parkedNow(t, ts, 1)
	cancel()
	require.ErrorIs(t, <-gaveUp, context.Canceled)
	require.Zero(t, ts.Parked())
	require.False(t, ts.Next())
}
