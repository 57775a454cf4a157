package explorer

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/pb"
)

// The outbox is derived from the state: each blessing is listed (with
// its seed's text) until the documenter's acknowledgment is applied; a
// repeated acknowledgment decides nothing; replay rebuilds it all.
func TestOutboxListsBlessedUntilAcknowledged(t *testing.T) {
	h := newHarness(t, baseConfig())
	mustSeed(t, h, "How many points does the Fano plane have?", 2)
	h.runAll()
	blessed := h.m.Blessed()
	require.Len(t, blessed, 2)

	out := h.m.Outbox(nil)
	require.Len(t, out, 2)
	for i, msg := range out {
		assert.Equal(t, "explorer/insight/"+blessed[i].ID, msg.Id)
		assert.Equal(t, Documenter, msg.To)
		b := msg.GetInsightBlessed()
		require.NotNil(t, b)
		assert.Equal(t, blessed[i].Text, b.Text)
		assert.Equal(t, blessed[i].Tags, b.Tags)
		assert.Equal(t, "How many points does the Fano plane have?", b.Seed)
	}
	// The blessing event alone implies its message.
	var decided []*pb.ModuleEvent
	for _, e := range h.log {
		if e.Type == evDecided {
			decided = append(decided, e)
		}
	}
	require.NotEmpty(t, decided)
	assert.Len(t, h.m.Outbox(decided[0]), 1)
	assert.Empty(t, h.m.Outbox(h.log[0]), "a seed_added implies no message")

	evs, err := h.m.DecideAcknowledged(&pb.ModuleMessageAck{Id: out[0].Id, Outcome: pb.DeliveryOutcome_DELIVERY_OUTCOME_TAKEN}, h.now)
	require.NoError(t, err)
	h.apply(evs)
	evs, err = h.m.DecideAcknowledged(&pb.ModuleMessageAck{Id: out[1].Id, Outcome: pb.DeliveryOutcome_DELIVERY_OUTCOME_REFUSED, Reason: "empty"}, h.now)
	require.NoError(t, err)
	h.apply(evs)
	assert.Empty(t, h.m.Outbox(nil))
	assert.Empty(t, h.m.Outbox(decided[0]), "a delivered insight is not sent again")
	evs, err = h.m.DecideAcknowledged(&pb.ModuleMessageAck{Id: out[0].Id, Outcome: pb.DeliveryOutcome_DELIVERY_OUTCOME_TAKEN}, h.now)
	require.NoError(t, err)
	assert.Empty(t, evs, "acknowledged twice: nothing more")

	_, err = h.m.DecideAcknowledged(&pb.ModuleMessageAck{Id: "explorer/insight/in-nope"}, h.now)
	assert.ErrorContains(t, err, "in-nope")
	_, err = h.m.DecideAcknowledged(&pb.ModuleMessageAck{Id: "elsewhere/x"}, h.now)
	assert.ErrorContains(t, err, "elsewhere/x")
	assert.Equal(t, snapshot(t, h.m), snapshot(t, h.replayed(baseConfig())))
}

// A finding's question becomes a seed that records the message it came
// from; the same message again (a resend) or the same question decides
// nothing; a question that cannot be a seed is an error naming the
// message.
func TestReceiveFindingAsSeed(t *testing.T) {
	h := newHarness(t, baseConfig())
	msg := &pb.ModuleMessage{Id: "researcher/finding/f-1", From: "researcher", To: Name,
		Body: &pb.ModuleMessage_FindingToSeed{FindingToSeed: &pb.FindingToSeed{FindingId: "f-1", Question: " Why is 7 the number of lines? "}}}
	evs, err := h.m.DecideReceive(msg, h.now)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	at := h.now
	h.apply(evs)
	seeds := h.m.Seeds()
	require.Len(t, seeds, 1)
	assert.Equal(t, "Why is 7 the number of lines?", seeds[0].Text)
	assert.Equal(t, "researcher/finding/f-1", seeds[0].From)
	assert.Equal(t, at, seeds[0].AddedAt)

	evs, err = h.m.DecideReceive(msg, h.now)
	require.NoError(t, err)
	assert.Empty(t, evs, "taken before")

	long := &pb.ModuleMessage{Id: "researcher/finding/f-2", From: "researcher",
		Body: &pb.ModuleMessage_FindingToSeed{FindingToSeed: &pb.FindingToSeed{FindingId: "f-2", Question: strings.Repeat("x", MaxSeedChars+1)}}}
	_, err = h.m.DecideReceive(long, h.now)
	assert.ErrorContains(t, err, "researcher/finding/f-2")
	other := &pb.ModuleMessage{Id: "documenter/section/s", From: "documenter",
		Body: &pb.ModuleMessage_SectionCreated{SectionCreated: &pb.SectionCreated{SectionId: "s"}}}
	_, err = h.m.DecideReceive(other, h.now)
	assert.ErrorContains(t, err, "documenter/section/s")
	assert.Equal(t, snapshot(t, h.m), snapshot(t, h.replayed(baseConfig())))
}
