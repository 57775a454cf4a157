package researcher

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/pb"
)

// Each finding's question is in the outbox for the explorer until the
// explorer's acknowledgment (taken or refused) is applied.
func TestOutboxListsFindingsUntilAcknowledged(t *testing.T) {
	dir := writeSources(t, map[string]string{
		"fano.md":   "# The Fano plane\n\nThe Fano plane is the projective plane of order 2.",
		"notes.txt": "Projective planes of order n have n^2+n+1 points.",
	})
	srcs, _, err := LoadSources(dir)
	require.NoError(t, err)
	h := newHarness(t, Config{Sources: srcs, GapRounds: -1})
	h.runAll()
	fs := h.m.Undelivered()
	require.Len(t, fs, 2)
	out := h.m.Outbox(nil)
	require.Len(t, out, 2)
	for i, msg := range out {
		assert.Equal(t, "researcher/finding/"+fs[i].ID, msg.Id)
		assert.Equal(t, Explorer, msg.To)
		assert.Equal(t, fs[i].Question, msg.GetFindingToSeed().GetQuestion())
	}
	var synthesized []*pb.ModuleEvent
	for _, e := range h.log {
		if e.Type == evSynthesized {
			synthesized = append(synthesized, e)
		}
	}
	require.Len(t, synthesized, 2)
	assert.Len(t, h.m.Outbox(synthesized[0]), 1, "a synthesis implies its finding's message")

	for i, outcome := range []pb.DeliveryOutcome{pb.DeliveryOutcome_DELIVERY_OUTCOME_TAKEN, pb.DeliveryOutcome_DELIVERY_OUTCOME_REFUSED} {
		evs, err := h.m.DecideAcknowledged(&pb.ModuleMessageAck{Id: out[i].Id, Outcome: outcome}, h.now)
		require.NoError(t, err)
		require.Len(t, evs, 1)
		h.apply(evs)
	}
	assert.Empty(t, h.m.Outbox(nil))
	assert.Empty(t, h.m.Outbox(synthesized[0]))
	_, err = h.m.DecideAcknowledged(&pb.ModuleMessageAck{Id: "explorer/insight/x"}, h.now)
	assert.ErrorContains(t, err, "explorer/insight/x")
	assert.Equal(t, snap(t, h.m), snap(t, h.replayed()))
}

// A section message is noted once; a message of another kind is an error
// naming it.
func TestReceiveSection(t *testing.T) {
	h := newHarness(t, Config{})
	msg := &pb.ModuleMessage{Id: "documenter/section/s-1", From: "documenter", To: Name,
		Body: &pb.ModuleMessage_SectionCreated{SectionCreated: &pb.SectionCreated{SectionId: "s-1", Title: "Seven points"}}}
	evs, err := h.m.DecideReceive(msg, h.now)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	h.apply(evs)
	assert.Equal(t, []string{"Seven points"}, h.m.sectionTitles())
	evs, err = h.m.DecideReceive(msg, h.now)
	require.NoError(t, err)
	assert.Empty(t, evs, "taken before")
	_, err = h.m.DecideReceive(&pb.ModuleMessage{Id: "explorer/insight/i", From: "explorer",
		Body: &pb.ModuleMessage_InsightBlessed{InsightBlessed: &pb.InsightBlessed{InsightId: "i", Text: "t"}}}, h.now)
	assert.ErrorContains(t, err, "explorer/insight/i")
	_, err = h.m.DecideReceive(&pb.ModuleMessage{Id: "documenter/section/empty",
		Body: &pb.ModuleMessage_SectionCreated{SectionCreated: &pb.SectionCreated{Title: "No id"}}}, h.now)
	assert.ErrorContains(t, err, "documenter/section/empty")
}
