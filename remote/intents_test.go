package remote

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/pb"
)

func TestIntentBook(t *testing.T) {
	now := time.Unix(1000, 0)
	b := newIntentBook(time.Hour, 2)
	k := intentKey{ledger: "l", intent: 5}
	var got []*pb.RemoteAnswer
	w := func(call uint64) waiter {
		return waiter{call: call, reply: func(a *pb.RemoteAnswer) { got = append(got, a) }}
	}

	out, _ := b.begin(k, w(1), now)
	require.Equal(t, beginRun, out, "a new intent runs")
	out, _ = b.begin(k, w(2), now)
	require.Equal(t, beginAttached, out, "a repeat while it runs waits for it")
	a := &pb.RemoteAnswer{Intent: 5, Content: "answer"}
	ws := b.finish(k, a, true, now)
	require.Len(t, ws, 2, "both deliveries are answered")
	out, stored := b.begin(k, w(3), now.Add(time.Minute))
	require.Equal(t, beginAnswered, out, "a repeat after it ended is answered from the book")
	assert.Equal(t, "answer", stored.Content)

	// Another ledger's intent 5 is another request.
	out, _ = b.begin(intentKey{ledger: "other", intent: 5}, w(4), now)
	assert.Equal(t, beginRun, out)

	// An outcome not kept (cancelled before it was done) runs again.
	k2 := intentKey{ledger: "l", intent: 6}
	b.begin(k2, w(5), now)
	b.finish(k2, &pb.RemoteAnswer{}, false, now)
	out, _ = b.begin(k2, w(6), now)
	assert.Equal(t, beginRun, out)

	// Kept for keep, and no more than max.
	out, _ = b.begin(k, w(7), now.Add(2*time.Hour))
	assert.Equal(t, beginRun, out, "an answer older than keep is forgotten")
}

func TestIntentBookCancel(t *testing.T) {
	now := time.Unix(1000, 0)
	b := newIntentBook(time.Hour, 10)
	k := intentKey{ledger: "l", intent: 9}
	stopped := 0
	b.begin(k, waiter{call: 1, reply: func(*pb.RemoteAnswer) {}}, now)
	b.running(k, func(bool) { stopped++ })
	b.begin(k, waiter{call: 2, reply: func(*pb.RemoteAnswer) {}}, now)
	b.cancel(k, 1, false)
	assert.Zero(t, stopped, "another delivery still waits for the call")
	b.cancel(k, 2, true)
	assert.Equal(t, 1, stopped, "the last one waiting stops it")
	running, kept := b.counts()
	assert.Equal(t, 1, running)
	assert.Zero(t, kept)
}

func TestIntentBookBound(t *testing.T) {
	now := time.Unix(1000, 0)
	b := newIntentBook(time.Hour, 2)
	for i := uint64(1); i <= 3; i++ {
		k := intentKey{ledger: "l", intent: i}
		b.begin(k, waiter{reply: func(*pb.RemoteAnswer) {}}, now)
		b.finish(k, &pb.RemoteAnswer{Intent: i}, true, now)
	}
	_, kept := b.counts()
	assert.Equal(t, 2, kept)
	out, _ := b.begin(intentKey{ledger: "l", intent: 1}, waiter{reply: func(*pb.RemoteAnswer) {}}, now)
	assert.Equal(t, beginRun, out, "the oldest went first")
}

// A delivered answer is let go; a late repeat of its intent still does
// not run it again.
func TestIntentBookDelivered(t *testing.T) {
	now := time.Unix(1000, 0)
	b := newIntentBook(time.Hour, 10)
	k := intentKey{ledger: "l", intent: 3}
	b.begin(k, waiter{reply: func(*pb.RemoteAnswer) {}}, now)
	b.finish(k, &pb.RemoteAnswer{Intent: 3, Content: "a long answer"}, true, now)
	b.delivered("l", []uint64{3}, nil)
	out, a := b.begin(k, waiter{reply: func(*pb.RemoteAnswer) {}}, now)
	assert.Equal(t, beginAnswered, out)
	assert.Empty(t, a.Content)
	assert.NotNil(t, a.Error)
	b.delivered("l", []uint64{3}, nil) // told again: still only that it was answered
	_, again := b.begin(k, waiter{reply: func(*pb.RemoteAnswer) {}}, now)
	assert.Same(t, a, again)
}

// The same delivery of a running intent, sent again (its batch may have
// been lost), is answered once when the intent ends.
func TestIntentBookSameDeliveryOnce(t *testing.T) {
	now := time.Unix(1000, 0)
	b := newIntentBook(time.Hour, 10)
	k := intentKey{ledger: "l", intent: 5}
	replies := 0
	w := waiter{call: 9, reply: func(*pb.RemoteAnswer) { replies++ }}
	out, _ := b.begin(k, w, now)
	require.Equal(t, beginRun, out)
	out, _ = b.begin(k, w, now)
	require.Equal(t, beginAttached, out)
	for _, w := range b.finish(k, &pb.RemoteAnswer{Intent: 5}, true, now) {
		w.reply(nil)
	}
	assert.Equal(t, 1, replies)
}
