package documenter

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/pb"
)

func blessedMsg(id, text string) *pb.ModuleMessage {
	return &pb.ModuleMessage{Id: "explorer/insight/" + id, From: "explorer", To: Name,
		Body: &pb.ModuleMessage_InsightBlessed{InsightBlessed: &pb.InsightBlessed{InsightId: id, Text: text, Tags: []string{"fano"}, Seed: "What is the Fano plane?"}}}
}

// A blessed insight message becomes an opportunity once (a resend decides
// nothing); its incorporation puts a new section in the outbox for the
// researcher until the acknowledgment is applied; replay rebuilds it.
func TestReceiveInsightAndSendSection(t *testing.T) {
	h := newHarness(t, Config{})
	evs, err := h.m.DecideReceive(blessedMsg("in-1", factPoints), h.now)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	at := h.now
	h.apply(evs)
	opps := h.m.Opportunities()
	require.Len(t, opps, 1)
	assert.Equal(t, "in-1", opps[0].Insight)
	assert.Equal(t, []string{"fano"}, opps[0].Tags)
	assert.Equal(t, "What is the Fano plane?", opps[0].Seed)
	assert.Equal(t, at, opps[0].AvailableAt)
	evs, err = h.m.DecideReceive(blessedMsg("in-1", factPoints), h.now)
	require.NoError(t, err)
	assert.Empty(t, evs, "taken before")
	assert.Empty(t, h.m.Outbox(nil), "no section yet")

	h.runAll()
	secs := h.m.Sections()
	require.Len(t, secs, 1)
	out := h.m.Outbox(nil)
	require.Len(t, out, 1)
	assert.Equal(t, "documenter/section/"+secs[0].ID, out[0].Id)
	assert.Equal(t, Researcher, out[0].To)
	assert.Equal(t, secs[0].Title, out[0].GetSectionCreated().GetTitle())
	var incorporated *pb.ModuleEvent
	for _, e := range h.log {
		if e.Type == evIncorporated {
			incorporated = e
		}
	}
	require.NotNil(t, incorporated)
	assert.Len(t, h.m.Outbox(incorporated), 1, "the incorporation implies the section's message")

	evs, err = h.m.DecideAcknowledged(&pb.ModuleMessageAck{Id: out[0].Id, Outcome: pb.DeliveryOutcome_DELIVERY_OUTCOME_TAKEN}, h.now)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	h.apply(evs)
	assert.Empty(t, h.m.Outbox(nil))
	assert.Empty(t, h.m.Outbox(incorporated))
	evs, err = h.m.DecideAcknowledged(&pb.ModuleMessageAck{Id: out[0].Id, Outcome: pb.DeliveryOutcome_DELIVERY_OUTCOME_TAKEN}, h.now)
	require.NoError(t, err)
	assert.Empty(t, evs, "acknowledged twice: nothing more")
	assert.Equal(t, snapshot(t, h.m), snapshot(t, h.replayed()))
}

// Bad input: a message that is not a blessed insight, or one with an
// empty text, is an error naming the message; nothing is decided.
func TestReceiveRefusesBadMessages(t *testing.T) {
	h := newHarness(t, Config{})
	_, err := h.m.DecideReceive(blessedMsg("in-2", "  "), h.now)
	assert.ErrorContains(t, err, "explorer/insight/in-2")
	_, err = h.m.DecideReceive(&pb.ModuleMessage{Id: "researcher/finding/f", From: "researcher",
		Body: &pb.ModuleMessage_FindingToSeed{FindingToSeed: &pb.FindingToSeed{FindingId: "f", Question: "Why?"}}}, h.now)
	assert.ErrorContains(t, err, "researcher/finding/f")
	_, err = h.m.DecideAcknowledged(&pb.ModuleMessageAck{Id: "documenter/section/nope"}, h.now)
	assert.ErrorContains(t, err, "nope")
	assert.Empty(t, h.m.Opportunities())
}
