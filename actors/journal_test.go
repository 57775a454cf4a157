package actors

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/modules/probe"
	"fano/pb"
	"fano/wal"
)

// What a journal delivered to an actor that stops before it takes the
// pb.Persisted messages is applied at the stop, in delivery order, each
// event once; the continuations do not run (their waiters are told fano
// is stopping).
func TestApplyLeftAppliesWhatAStoppedActorMissed(t *testing.T) {
	s := &System{desks: &desks{notices: &notices{}}}
	box := &s.desks.desk("module/x").box
	ev := func(n int64) *pb.Event { return &pb.Event{At: n} }
	ran := 0
	then := func([]uint64, error) { ran++ }
	taken := box.put([]*batch{{events: []*pb.Event{ev(1), ev(2)}, seqs: []uint64{1, 2}, then: then}})
	box.put([]*batch{{events: []*pb.Event{ev(3)}, seqs: []uint64{3}, then: then}})
	box.put([]*batch{{events: []*pb.Event{ev(4)}, seqs: []uint64{4}, then: then}, {events: []*pb.Event{ev(5)}, err: assert.AnError, then: then}})

	var applied []int64
	apply := func(e *pb.Event) error { applied = append(applied, e.At); return nil }
	var last uint64
	s.desks.applyPersisted("module/x", &last, &pb.Persisted{Group: taken}, apply)
	require.Equal(t, []int64{1, 2}, applied)
	require.Equal(t, 1, ran, "a group taken while running runs its continuation")

	s.desks.applyLeft("module/x", &last, apply)
	assert.Equal(t, []int64{1, 2, 3, 4}, applied, "the rest in order; a failed batch applies nothing")
	assert.Equal(t, uint64(4), last)
	assert.Equal(t, 1, ran, "no continuation runs at the stop")

	s.desks.applyLeft("module/x", &last, apply)
	assert.Equal(t, []int64{1, 2, 3, 4}, applied, "nothing twice")
}

// A durable callback runs after the batch's pb.Persisted is posted to its
// owner: whatever an answer sent from it leads to reaches the owner behind
// that message, so the owner applies the events first.
func TestADurableAnswerFollowsItsPersisted(t *testing.T) {
	b := setup(t, setupOpts{probe: probe.Config{NoPropose: true}})
	sys := b.start()
	var mu sync.Mutex
	var seen []string
	note := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, s)
	}
	owner := &funcProcess{fn: func(m any) {
		if _, ok := m.(*pb.Persisted); ok {
			note("persisted")
		}
	}}
	pid, _ := sys.as.ProcessRegistry.Add(owner, "test-owner")
	defer sys.as.ProcessRegistry.Remove(pid)
	j := newJournal(sys, "test/owner", pid)
	defer j.close()
	done := make(chan error, 1)
	j.persistDurable([]*pb.Event{{Body: &pb.Event_TaskPaused{TaskPaused: &pb.TaskPaused{TaskId: "x"}}}},
		func(seqs []uint64, err error) {
			note("durable")
			if err == nil && len(seqs) != 1 {
				err = fmt.Errorf("seqs %v", seqs)
			}
			done <- err
		}, nil)
	require.NoError(t, <-done)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"persisted", "durable"}, seen)
}

// A journal that is closing refuses a batch offered from outside its
// actor, and counts nothing pending for it: the writer goes through the
// owner's mailbox instead, and the system is not held busy by a batch
// nobody will write. One offered before is written and delivered.
func TestAClosedJournalRefusesOffers(t *testing.T) {
	b := setup(t, setupOpts{probe: probe.Config{NoPropose: true}})
	sys := b.start()
	owner := &funcProcess{fn: func(any) {}}
	pid, _ := sys.as.ProcessRegistry.Add(owner, "test-offers")
	defer sys.as.ProcessRegistry.Remove(pid)
	j := newJournal(sys, "test/offers", pid)
	ev := func() []*pb.Event {
		return []*pb.Event{{Body: &pb.Event_TaskPaused{TaskPaused: &pb.TaskPaused{TaskId: "x"}}}}
	}
	done := make(chan error, 1)
	require.True(t, j.offer(&batch{events: ev(), durable: func(seqs []uint64, err error) {
		if err == nil && len(seqs) != 1 {
			err = fmt.Errorf("seqs %v", seqs)
		}
		done <- err
	}}))
	require.NoError(t, <-done)
	j.close()
	before := j.pending.Load()
	require.False(t, j.offer(&batch{events: ev(), durable: func([]uint64, error) {
		t.Error("a refused batch was written")
	}}))
	require.Equal(t, before, j.pending.Load(), "nothing pending for a refused batch")
}

// lateStore reads the payloads of an asynchronous append only when its
// wait is called, as the Journal contract allows.
type lateStore struct{ Store }

func (l lateStore) AppendAsync(entries ...wal.Entry) func() ([]uint64, error) {
	return func() ([]uint64, error) { return l.Append(context.Background(), entries...) }
}

// The journal reuses a flush's payload buffer only once its append is
// durable: batches of many sizes (one that cannot be encoded among them),
// a few in flight at any time, each written as given, to a store that
// reads payloads as late as it may; and buffers are kept for reuse.
func TestReusedPayloadBuffersKeepEveryEventAsGiven(t *testing.T) {
	b := setup(t, setupOpts{probe: probe.Config{NoPropose: true}})
	sys := b.start()
	owner := &funcProcess{fn: func(any) {}}
	pid, _ := sys.as.ProcessRegistry.Add(owner, "test-reuse")
	defer sys.as.ProcessRegistry.Remove(pid)
	j := newJournal(sys, "test/reuse", pid)
	defer j.close()
	j.log = lateStore{sys.log} // before the first batch: the loop reads it after a wake

	const batches, inFlight = 300, 4
	results := make(chan error, batches)
	var (
		mu   sync.Mutex
		want []string // the task ids written, in order
		next int
	)
	var queue func()
	queue = func() {
		mu.Lock()
		i := next
		next++
		if i >= batches {
			mu.Unlock()
			return
		}
		var events []*pb.Event
		for k := range 1 + i%4 {
			id := fmt.Sprintf("task-%03d-%d-%s", i, k, strings.Repeat("x", (i*37+k*11)%300))
			events = append(events, &pb.Event{At: int64(i + 1), Body: &pb.Event_TaskPaused{TaskPaused: &pb.TaskPaused{TaskId: id, Reason: id}}})
		}
		bad := i%50 == 7
		if bad {
			events = append(events, &pb.Event{Body: &pb.Event_TaskPaused{TaskPaused: &pb.TaskPaused{TaskId: string([]byte{0xff})}}})
		} else {
			for _, e := range events {
				want = append(want, e.GetTaskPaused().TaskId)
			}
		}
		j.persistDurable(events, func(_ []uint64, err error) {
			if bad != (err != nil) {
				err = fmt.Errorf("batch %d (refused: %v): %v", i, bad, err)
			} else {
				err = nil
			}
			results <- err
			queue()
		}, nil)
		mu.Unlock()
	}
	for range inFlight {
		queue()
	}
	for range batches {
		require.NoError(t, <-results)
	}
	require.NotZero(t, len(j.kept), "buffers kept for reuse")

	var got []string
	require.NoError(t, sys.log.Replay(1, func(ent wal.Entry) error {
		if ent.Owner != "test/reuse" {
			return nil
		}
		e, err := decodeEvent(ent)
		if err != nil {
			return err
		}
		p := e.GetTaskPaused()
		if p.TaskId != p.Reason {
			return fmt.Errorf("entry %d: task %q, reason %q", ent.Seq, p.TaskId, p.Reason)
		}
		got = append(got, p.TaskId)
		return nil
	}))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, want, got)
}

// A flush takes kept buffers when they are large enough and new ones, a
// power of two larger, when not; kept entries point at nothing.
func TestFlushBuffersAreKeptAndCleared(t *testing.T) {
	require.Equal(t, 4096, roomFor(1, 4096))
	require.Equal(t, 4096, roomFor(4096, 4096))
	require.Equal(t, 8192, roomFor(4097, 4096))
	require.Equal(t, 64, roomFor(33, 32))

	j := &journal{kept: make(chan flushBuffers, keptFlushBuffers)}
	f := j.buffers(5000, 40)
	require.Len(t, f.payloads, 5000)
	require.Equal(t, 8192, cap(f.payloads))
	require.Equal(t, 64, cap(f.entries))
	f.entries = append(f.entries, wal.Entry{Payload: f.payloads[:10], Archive: &wal.ArchiveRecord{Key: "k"}, Owner: "o"})
	j.keep(f)
	require.Len(t, j.kept, 1)

	g := j.buffers(8000, 64)
	require.Same(t, &f.payloads[0], &g.payloads[0], "the kept payload buffer")
	require.Len(t, g.payloads, 8000)
	require.Empty(t, g.entries)
	require.Zero(t, g.entries[:1][0], "a kept entry is cleared")
	j.keep(g)

	h := j.buffers(9000, 10)
	require.NotSame(t, &f.payloads[0], &h.payloads[0], "too small: a new one")
	require.Equal(t, 16384, cap(h.payloads))

	j.keep(flushBuffers{payloads: make([]byte, 0, maxKeptBytes+1)})
	require.Empty(t, j.kept, "past the bytes kept: not kept")
	j.keep(h)
	require.Equal(t, h.size(), j.keptBytes.Load())
	j.buffers(10, 1)
	require.Zero(t, j.keptBytes.Load(), "taken: no longer kept")
}
