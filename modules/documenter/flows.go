package documenter

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"fano/modules"
	"fano/pb"
)

// The documenter's flows (modules.Receiver, modules.Sender): it takes the
// explorer's blessed insights, and tells the researcher of each new
// section (generate_questions looks for gaps in their titles) until the
// researcher acknowledges it ("section_delivered").

// Researcher is the module new sections are sent to.
const Researcher = "researcher"

const sectionMessagePrefix = Name + "/section/"

// DecideReceive notes a blessed insight as an opportunity. The insight's
// id is the record of receipt: one known decides nothing.
func (m *Module) DecideReceive(msg *pb.ModuleMessage, now time.Time) ([]*pb.ModuleEvent, error) {
	b := msg.GetInsightBlessed()
	if b == nil {
		return nil, fmt.Errorf("documenter: message %q from %s: not a blessed insight", msg.GetId(), msg.GetFrom())
	}
	evs, err := m.DecideNoteBlessed(b.InsightId, b.Text, b.Tags, b.Seed, now)
	if err != nil {
		return nil, fmt.Errorf("message %q: %w", msg.GetId(), err)
	}
	return evs, nil
}

// Outbox lists the sections the researcher has not acknowledged: the one
// an incorporation (e) created, or (e nil) all of them in document order.
func (m *Module) Outbox(e *pb.ModuleEvent) []*pb.ModuleMessage {
	if e == nil {
		secs := make([]*Section, 0, len(m.st.Sections))
		for _, s := range m.st.Sections {
			secs = append(secs, s)
		}
		slices.SortFunc(secs, func(a, b *Section) int { return int(a.Order - b.Order) })
		var out []*pb.ModuleMessage
		for _, s := range secs {
			if msg := sectionMessage(s); msg != nil {
				out = append(out, msg)
			}
		}
		return out
	}
	if e.Type != evIncorporated {
		return nil
	}
	d, err := decode[incorporatedData](e)
	if err != nil {
		return nil
	}
	// The opportunity names the section it went into (a new section of
	// a title that exists joins that one).
	if o := m.st.Opportunities[d.Insight]; o != nil {
		if msg := sectionMessage(m.st.Sections[o.Section]); msg != nil {
			return []*pb.ModuleMessage{msg}
		}
	}
	return nil
}

func sectionMessage(s *Section) *pb.ModuleMessage {
	if s == nil || s.Delivered {
		return nil
	}
	return &pb.ModuleMessage{
		Id: sectionMessagePrefix + s.ID, From: Name, To: Researcher,
		Body: &pb.ModuleMessage_SectionCreated{SectionCreated: &pb.SectionCreated{SectionId: s.ID, Title: s.Title}},
	}
}

// DecideAcknowledged records that the researcher took (or refused) a
// section.
func (m *Module) DecideAcknowledged(ack *pb.ModuleMessageAck, _ time.Time) ([]*pb.ModuleEvent, error) {
	id, ok := strings.CutPrefix(ack.GetId(), sectionMessagePrefix)
	if !ok {
		return nil, fmt.Errorf("documenter: acknowledgment of unknown message %q", ack.GetId())
	}
	sec := m.st.Sections[id]
	if sec == nil {
		return nil, fmt.Errorf("documenter: acknowledgment of message %q: no section %s", ack.GetId(), id)
	}
	if sec.Delivered {
		return nil, nil
	}
	d := sectionDeliveredData{Section: id, Outcome: "taken"}
	if ack.GetOutcome() == pb.DeliveryOutcome_DELIVERY_OUTCOME_REFUSED {
		d.Outcome, d.Reason = "refused", ack.GetReason()
	}
	return []*pb.ModuleEvent{event(evSectionSent, "", d)}, nil
}

var (
	_ modules.Sender   = (*Module)(nil)
	_ modules.Receiver = (*Module)(nil)
)
