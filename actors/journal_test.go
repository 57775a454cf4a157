package actors

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/modules/probe"
	"fano/pb"
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
