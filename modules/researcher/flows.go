package researcher

import (
	"fmt"
	"strings"
	"time"

	"fano/modules"
	"fano/pb"
)

// The researcher's flows (modules.Sender, modules.Receiver): each
// finding's question is sent to the explorer as a seed until the explorer
// acknowledges it ("finding_delivered"), and the document's sections are
// noted as the documenter tells of them ("section_noted").

// Explorer is the module findings are sent to.
const Explorer = "explorer"

const findingMessagePrefix = Name + "/finding/"

// Outbox lists the findings the explorer has not acknowledged: those e
// recorded, or (e nil) all of them in the order found.
func (m *Module) Outbox(e *pb.ModuleEvent) []*pb.ModuleMessage {
	var ids []string
	switch {
	case e == nil:
		for _, f := range m.Undelivered() {
			ids = append(ids, f.ID)
		}
	case e.Type == evSynthesized:
		if d, err := decode[synthesizedData](e); err == nil {
			ids = []string{d.Finding}
		}
	case e.Type == evQuestions:
		if d, err := decode[questionsData](e); err == nil {
			ids = d.Findings
		}
	}
	var out []*pb.ModuleMessage
	for _, id := range ids {
		f := m.st.Findings[id]
		if f == nil || f.Delivered {
			continue
		}
		out = append(out, &pb.ModuleMessage{
			Id: findingMessagePrefix + f.ID, From: Name, To: Explorer,
			Body: &pb.ModuleMessage_FindingToSeed{FindingToSeed: &pb.FindingToSeed{FindingId: f.ID, Question: f.Question}},
		})
	}
	return out
}

// DecideAcknowledged records that the explorer took a finding's question
// as a seed (or had it already, or refused it for good: a question that
// can never be a seed is handled too).
func (m *Module) DecideAcknowledged(ack *pb.ModuleMessageAck, _ time.Time) ([]*pb.ModuleEvent, error) {
	id, ok := strings.CutPrefix(ack.GetId(), findingMessagePrefix)
	if !ok {
		return nil, fmt.Errorf("researcher: acknowledgment of unknown message %q", ack.GetId())
	}
	return m.DecideDelivered(id)
}

// DecideReceive notes a section of the document; a section known with the
// same title decides nothing.
func (m *Module) DecideReceive(msg *pb.ModuleMessage, _ time.Time) ([]*pb.ModuleEvent, error) {
	s := msg.GetSectionCreated()
	if s == nil {
		return nil, fmt.Errorf("researcher: message %q from %s: not a section", msg.GetId(), msg.GetFrom())
	}
	evs, err := m.DecideNoteSection(s.SectionId, s.Title)
	if err != nil {
		return nil, fmt.Errorf("message %q: %w", msg.GetId(), err)
	}
	return evs, nil
}

var (
	_ modules.Sender   = (*Module)(nil)
	_ modules.Receiver = (*Module)(nil)
)

// Sections lists the document's sections the researcher knows: id ->
// title (a copy).
func (m *Module) Sections() map[string]string {
	out := make(map[string]string, len(m.st.Sections))
	for id, title := range m.st.Sections {
		out[id] = title
	}
	return out
}
