package actors

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
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
	owner := &seenInOrder{}
	pid, _ := sys.as.ProcessRegistry.Add(owner, "test-owner")
	defer sys.as.ProcessRegistry.Remove(pid)
	j := newJournal(sys, "test/owner", pid)
	defer j.close()
	done := make(chan error, 1)
	j.persistDurable([]*pb.Event{{Body: &pb.Event_TaskPaused{TaskPaused: &pb.TaskPaused{TaskId: "x"}}}},
		func(seqs []uint64, err error) {
			owner.add("durable")
			if err == nil && len(seqs) != 1 {
				err = fmt.Errorf("seqs %v", seqs)
			}
			done <- err
		}, nil)
	require.NoError(t, <-done)
	assert.Equal(t, []string{"persisted", "durable"}, owner.seen())
}

// seenInOrder is a process that notes which pb.Persisted messages reach
// it, in the sender's goroutine, in order with what else is noted.
type seenInOrder struct {
	mu   sync.Mutex
	list []string
}

func (p *seenInOrder) add(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.list = append(p.list, s)
}

func (p *seenInOrder) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.list)
}

func (p *seenInOrder) SendUserMessage(_ *actor.PID, message any) {
	if _, ok := actor.UnwrapEnvelopeMessage(message).(*pb.Persisted); ok {
		p.add("persisted")
	}
}
func (p *seenInOrder) SendSystemMessage(*actor.PID, any) {}
func (p *seenInOrder) Stop(*actor.PID)                   {}
