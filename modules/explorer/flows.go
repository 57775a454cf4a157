package explorer

import (
	"fmt"
	"strings"
	"time"

	"fano/modules"
	"fano/pb"
)

// The explorer's flows (modules.Sender, modules.Receiver): it tells the
// documenter of each blessed insight until the documenter acknowledges
// it ("insight_delivered"), and takes research findings as seeds.

// Documenter is the module blessed insights are sent to.
const Documenter = "documenter"

const insightMessagePrefix = Name + "/insight/"

func insightMessageID(insight string) string { return insightMessagePrefix + insight }

// Outbox lists the blessed insights the documenter has not acknowledged:
// the one a blessing (e) made, or (e nil) all of them in blessing order.
func (m *Module) Outbox(e *pb.ModuleEvent) []*pb.ModuleMessage {
	if e == nil {
		var out []*pb.ModuleMessage
		for _, id := range m.st.Blessed {
			if msg := m.blessedMessage(id); msg != nil {
				out = append(out, msg)
			}
		}
		return out
	}
	if e.Type != evDecided {
		return nil
	}
	d, err := decode[decidedData](e)
	if err != nil || d.Outcome != outcomeBlessed {
		return nil
	}
	if msg := m.blessedMessage(d.Insight); msg != nil {
		return []*pb.ModuleMessage{msg}
	}
	return nil
}

// blessedMessage is the message telling of a blessed insight, or nil when
// the insight is not blessed (any more) or was delivered.
func (m *Module) blessedMessage(id string) *pb.ModuleMessage {
	ins := m.st.Insights[id]
	if ins == nil || ins.Status != StatusBlessed || ins.Delivered {
		return nil
	}
	seed, _ := m.lookupSeed(ins.SeedID)
	return &pb.ModuleMessage{
		Id: insightMessageID(id), From: Name, To: Documenter,
		Body: &pb.ModuleMessage_InsightBlessed{InsightBlessed: &pb.InsightBlessed{
			InsightId: id, Text: ins.Text, Tags: append([]string(nil), ins.Tags...), Seed: seed.Text,
		}},
	}
}

// DecideAcknowledged records that the documenter took (or refused) a
// blessed insight.
func (m *Module) DecideAcknowledged(ack *pb.ModuleMessageAck, _ time.Time) ([]*pb.ModuleEvent, error) {
	id, ok := strings.CutPrefix(ack.GetId(), insightMessagePrefix)
	if !ok {
		return nil, fmt.Errorf("explorer: acknowledgment of unknown message %q", ack.GetId())
	}
	ins := m.st.Insights[id]
	if ins == nil {
		return nil, fmt.Errorf("explorer: acknowledgment of message %q: no insight %s", ack.GetId(), id)
	}
	if ins.Delivered {
		return nil, nil
	}
	d := insightDeliveredData{Insight: id, Outcome: "taken"}
	if ack.GetOutcome() == pb.DeliveryOutcome_DELIVERY_OUTCOME_REFUSED {
		d.Outcome, d.Reason = "refused", ack.GetReason()
	}
	return []*pb.ModuleEvent{event(evInsightDelivered, "", d)}, nil
}

// DecideReceive takes a research finding's question as a seed. A question
// that is already a seed (the same finding sent again, or the same
// question from elsewhere) decides nothing; one that cannot be a seed
// (empty, too long) is an error naming the message.
func (m *Module) DecideReceive(msg *pb.ModuleMessage, _ time.Time) ([]*pb.ModuleEvent, error) {
	f := msg.GetFindingToSeed()
	if f == nil {
		return nil, fmt.Errorf("explorer: message %q from %s: not a finding", msg.GetId(), msg.GetFrom())
	}
	s, err := checkSeed(f.Question, 0)
	if err != nil {
		return nil, fmt.Errorf("explorer: message %q (finding %s): %w", msg.GetId(), f.FindingId, err)
	}
	if _, ok := m.lookupSeed(s.ID); ok {
		return nil, nil
	}
	return []*pb.ModuleEvent{event(evSeedAdded, "", seedAddedData{ID: s.ID, Text: s.Text, Priority: s.Priority, From: msg.GetId()})}, nil
}

var (
	_ modules.Sender   = (*Module)(nil)
	_ modules.Receiver = (*Module)(nil)
)
