package actors

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A call waits only while its context is live: the moment a cancel or a
// deadline ends it, the call counts as busy, before its goroutine runs
// again to say it woke (fano simulate must not move its clock there).
func TestWaitingCallEndsWithItsContext(t *testing.T) {
	var w waitingCalls
	ctx, cancel := context.WithCancel(withWaitCounter(context.Background(), &w))
	CallWaiting(ctx, true)
	require.Equal(t, 1, w.count())
	cancel()
	require.Zero(t, w.count(), "its context is done: it no longer waits")
	CallWaiting(ctx, false)
	require.Zero(t, w.count())
	require.Empty(t, w.calls, "forgotten once it woke")

	// A call that is not a task's (a health probe) is not counted.
	CallWaiting(context.Background(), true)
	require.Zero(t, w.count())
}

// Runs parked at the shut storage gate wait; the moment it reopens they
// are busy, before they run again to unpark.
func TestStorageGateHoldsOnlyWhileShut(t *testing.T) {
	g := newStorageGate()
	g.shut(errors.New("no space left on device"), time.Unix(0, 0))
	g.park(2) // two runs parked (as wait does)
	require.Equal(t, 2, g.held())
	g.reopen()
	require.Zero(t, g.held(), "reopened: the parked runs are busy again")
	n, _ := g.waiting()
	require.Equal(t, 2, n, "still parked until they run")
}

// The idle signal is poked when a piece of work ends: an actor's mailbox
// drained, a task's call began to wait. fano simulate sleeps on it.
func TestIdleSignalPokedWhenWorkEnds(t *testing.T) {
	var boxes mailboxes
	c := &mailboxCount{}
	boxes.track("scheduler", c)
	activity := boxes.idle.channel()
	c.n.Add(1)
	c.n.Add(-1)
	require.Empty(t, activity, "handled, but the mailbox may hold more")
	c.drained()
	require.Len(t, activity, 1, "drained")
	c.drained()
	require.Len(t, activity, 1, "one pending word is enough")
	<-activity

	w := waitingCalls{idle: &boxes.idle}
	ctx := withWaitCounter(context.Background(), &w)
	CallWaiting(ctx, true)
	require.Len(t, activity, 1, "a call began to wait")
	<-activity
	CallWaiting(ctx, false)
	require.Empty(t, activity, "a call that woke has work to do")
}
