package researcher

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"fano/pb"
)

// Source statuses.
const (
	SourceNew        = "new"
	SourceRelevant   = "relevant"
	SourceIrrelevant = "irrelevant"
	SourceExtracted  = "extracted"
	SourceDone       = "synthesized"
	SourceFailed     = "failed"
)

// SourceState is what the researcher learned of a source.
type SourceState struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Status    string    `json:"status"`
	Verdict   string    `json:"verdict,omitempty"`
	Rationale string    `json:"rationale,omitempty"`
	Extract   string    `json:"extract,omitempty"`
	Finding   string    `json:"finding,omitempty"` // the finding's id
	Reason    string    `json:"reason,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Finding is a result of research: a text and the question it raises,
// which becomes an explorer seed.
type Finding struct {
	ID        string    `json:"id"`
	From      string    `json:"from"` // a source id or a question round ("g1")
	Text      string    `json:"text"`
	Question  string    `json:"question"`
	Delivered bool      `json:"delivered"`
	Order     int64     `json:"order"`
	At        time.Time `json:"at"`
}

// Round is one generate_questions round.
type Round struct {
	ID        string    `json:"id"`
	Sections  []string  `json:"sections"` // the titles it saw
	Questions []string  `json:"questions"`
	At        time.Time `json:"at"`
}

type state struct {
	Sources  map[string]*SourceState `json:"sources"`
	Sections map[string]string       `json:"sections"` // document section id -> title
	Rounds   map[string]*Round       `json:"rounds"`
	Findings map[string]*Finding     `json:"findings"`
	Seq      int64                   `json:"seq"`
}

func newState() state {
	return state{Sources: map[string]*SourceState{}, Sections: map[string]string{}, Rounds: map[string]*Round{}, Findings: map[string]*Finding{}}
}

// Event types.
const (
	evEvaluated   = "source_evaluated"
	evExtracted   = "content_extracted"
	evSynthesized = "findings_synthesized"
	evSourceFail  = "source_failed"
	evSection     = "section_noted"
	evQuestions   = "questions_generated"
	evDelivered   = "finding_delivered"
)

type evaluatedData struct {
	Source    string `json:"source"`
	Name      string `json:"name"`
	Task      string `json:"task"`
	LLM       string `json:"llm"`
	Verdict   string `json:"verdict"`
	Rationale string `json:"rationale"`
}

type extractedData struct {
	Source string `json:"source"`
	Task   string `json:"task"`
	LLM    string `json:"llm"`
	Text   string `json:"text"`
}

type synthesizedData struct {
	Source   string `json:"source"`
	Finding  string `json:"finding"`
	Task     string `json:"task"`
	LLM      string `json:"llm"`
	Text     string `json:"text"`
	Question string `json:"question"`
}

type sourceFailData struct {
	Source string `json:"source"`
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

type sectionData struct {
	ID    string `json:"id"`
	Title string `json:"title"`
}

type questionsData struct {
	Round     string   `json:"round"`
	Task      string   `json:"task"`
	LLM       string   `json:"llm"`
	Sections  []string `json:"sections"`
	Questions []string `json:"questions"`
	Findings  []string `json:"findings"` // one per question
}

type deliveredData struct {
	Finding string `json:"finding"`
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("researcher: encode event: %v", err))
	}
	return b
}

func decode[T any](e *pb.ModuleEvent) (T, error) {
	var v T
	if err := json.Unmarshal(e.Data, &v); err != nil {
		return v, fmt.Errorf("researcher: %s event (task %q) does not decode: %w", e.Type, e.TaskId, err)
	}
	return v, nil
}

// source returns the state of a source, creating it (status new) for a
// source of the config.
func (m *Module) sourceState(id, name string, at time.Time) *SourceState {
	s := m.st.Sources[id]
	if s == nil {
		s = &SourceState{ID: id, Name: name, Status: SourceNew, UpdatedAt: at}
		m.st.Sources[id] = s
	}
	return s
}

func (m *Module) addFinding(id, from, text, question string, at time.Time) {
	if _, ok := m.st.Findings[id]; ok {
		return
	}
	m.st.Seq++
	m.st.Findings[id] = &Finding{ID: id, From: from, Text: text, Question: question, Order: m.st.Seq, At: at}
}

// Apply changes the state, idempotently.
func (m *Module) Apply(e *pb.ModuleEvent, at time.Time) error {
	at = at.UTC()
	switch e.Type {
	case evEvaluated:
		d, err := decode[evaluatedData](e)
		if err != nil {
			return err
		}
		s := m.sourceState(d.Source, d.Name, at)
		if s.Status != SourceNew {
			return nil
		}
		s.Verdict, s.Rationale, s.UpdatedAt = d.Verdict, d.Rationale, at
		s.Status = SourceRelevant
		if d.Verdict == "reject" {
			s.Status = SourceIrrelevant
		}
	case evExtracted:
		d, err := decode[extractedData](e)
		if err != nil {
			return err
		}
		s := m.st.Sources[d.Source]
		if s == nil {
			return fmt.Errorf("researcher: content of unknown source %s (task %s)", d.Source, e.TaskId)
		}
		if s.Status != SourceRelevant {
			return nil
		}
		s.Status, s.Extract, s.UpdatedAt = SourceExtracted, d.Text, at
	case evSynthesized:
		d, err := decode[synthesizedData](e)
		if err != nil {
			return err
		}
		s := m.st.Sources[d.Source]
		if s == nil {
			return fmt.Errorf("researcher: finding of unknown source %s (task %s)", d.Source, e.TaskId)
		}
		if s.Status != SourceExtracted {
			return nil
		}
		s.Status, s.Finding, s.UpdatedAt = SourceDone, d.Finding, at
		m.addFinding(d.Finding, d.Source, d.Text, d.Question, at)
	case evSourceFail:
		d, err := decode[sourceFailData](e)
		if err != nil {
			return err
		}
		s := m.sourceState(d.Source, d.Name, at)
		if s.Status == SourceDone || s.Status == SourceIrrelevant || s.Status == SourceFailed {
			return nil
		}
		s.Status, s.Reason, s.UpdatedAt = SourceFailed, d.Reason, at
	case evSection:
		d, err := decode[sectionData](e)
		if err != nil {
			return err
		}
		m.st.Sections[d.ID] = d.Title
	case evQuestions:
		d, err := decode[questionsData](e)
		if err != nil {
			return err
		}
		if _, ok := m.st.Rounds[d.Round]; ok {
			return nil
		}
		m.st.Rounds[d.Round] = &Round{ID: d.Round, Sections: d.Sections, Questions: d.Questions, At: at}
		for i, q := range d.Questions {
			if i < len(d.Findings) {
				m.addFinding(d.Findings[i], d.Round, "An open question of the document: "+q, q, at)
			}
		}
	case evDelivered:
		d, err := decode[deliveredData](e)
		if err != nil {
			return err
		}
		f := m.st.Findings[d.Finding]
		if f == nil {
			return fmt.Errorf("researcher: unknown finding %s delivered", d.Finding)
		}
		f.Delivered = true
	default:
		return fmt.Errorf("researcher: unknown event type %q (task %s)", e.Type, e.TaskId)
	}
	return nil
}

// Snapshot encodes the state.
func (m *Module) Snapshot() ([]byte, error) { return json.Marshal(m.st) }

// Restore replaces the state with a snapshot.
func (m *Module) Restore(data []byte) error {
	st := newState()
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("researcher: restore: %w", err)
	}
	if st.Sources == nil || st.Sections == nil || st.Rounds == nil || st.Findings == nil {
		return fmt.Errorf("researcher: restore: the snapshot has a null section")
	}
	m.st = st
	return nil
}

// Findings lists every finding in the order found (copies).
func (m *Module) Findings() []Finding {
	out := make([]Finding, 0, len(m.st.Findings))
	for _, f := range m.st.Findings {
		out = append(out, *f)
	}
	slices.SortFunc(out, func(a, b Finding) int { return int(a.Order - b.Order) })
	return out
}

// Undelivered lists the findings whose question is not yet a seed.
func (m *Module) Undelivered() []Finding {
	var out []Finding
	for _, f := range m.Findings() {
		if !f.Delivered {
			out = append(out, f)
		}
	}
	return out
}

// Sources lists the state of every source seen, by id (copies).
func (m *Module) Sources() []SourceState {
	var out []SourceState
	for _, id := range sortedKeys(m.st.Sources) {
		out = append(out, *m.st.Sources[id])
	}
	return out
}
