package actors

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
