package documenter

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"fano/modules/dedup"
	"fano/pb"
)

// Evaluation is one panel seat's verdict on an insight (math_evaluation).
type Evaluation struct {
	Reviewer  string    `json:"reviewer"` // the panel seat (s1, s2, …)
	LLM       string    `json:"llm"`      // the backend that answered
	Task      string    `json:"task"`
	Verdict   string    `json:"verdict"`
	Rationale string    `json:"rationale"`
	At        time.Time `json:"at"`
}

// Opportunity is a blessed insight on its way into the document.
type Opportunity struct {
	Insight     string       `json:"insight"`
	Text        string       `json:"text"`
	Tags        []string     `json:"tags,omitempty"`
	Seed        string       `json:"seed,omitempty"`
	Status      string       `json:"status"`
	DuplicateOf string       `json:"duplicate_of,omitempty"` // an insight or "<section>/<insight>"
	Similarity  float64      `json:"similarity,omitempty"`
	Evaluations []Evaluation `json:"evaluations,omitempty"`
	Target      string       `json:"target,omitempty"` // the section to extend; "" = a new one
	Drafts      int          `json:"drafts"`           // drafts made
	Draft       string       `json:"draft,omitempty"`  // the current draft (Markdown)
	DraftTitle  string       `json:"draft_title,omitempty"`
	DraftLLM    string       `json:"draft_llm,omitempty"`
	Exposition  []Evaluation `json:"exposition,omitempty"` // exposition verdicts, one per draft
	Section     string       `json:"section,omitempty"`    // where it was incorporated
	Reason      string       `json:"reason,omitempty"`
	Order       int64        `json:"order"`
	AvailableAt time.Time    `json:"available_at"`
	DecidedAt   time.Time    `json:"decided_at,omitzero"`
}

// SectionReview is one review of a section (review_section, deep mode).
type SectionReview struct {
	Version int       `json:"version"`
	LLM     string    `json:"llm"`
	Task    string    `json:"task"`
	Text    string    `json:"text"`
	At      time.Time `json:"at"`
}

// SectionVersion is an earlier text of a section, kept when a revision
// or a comment replaced it.
type SectionVersion struct {
	Version  int       `json:"version"`
	Markdown string    `json:"markdown"`
	Reason   string    `json:"reason"` // what replaced it: "review v2 (task …)", "comment c-…"
	At       time.Time `json:"at"`     // when it was replaced
}

// Revision is a proposed new text of a section awaiting its exposition
// evaluation.
type Revision struct {
	Version  int    `json:"version"` // the version it would become
	Markdown string `json:"markdown"`
	Source   string `json:"source"` // e.g. "review v2"
	LLM      string `json:"llm"`
	Task     string `json:"task"`
}

// Section is one section of the document.
type Section struct {
	ID       string           `json:"id"` // also its anchor
	Title    string           `json:"title"`
	Markdown string           `json:"markdown"`
	Insights []string         `json:"insights"` // the insights it came from, in order
	Reviews  []SectionReview  `json:"reviews,omitempty"`
	Comments []string         `json:"comments,omitempty"`
	Version  int              `json:"version"` // 1 when created, +1 per change
	Reviewed int              `json:"reviewed"`
	History  []SectionVersion `json:"history,omitempty"`
	Proposal *Revision        `json:"proposal,omitempty"`
	// RevisedFor is the last version whose review was turned into a
	// revision (proposed, or refused before it could be).
	RevisedFor int       `json:"revised_for,omitempty"`
	Order      int64     `json:"order"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
	// Delivered: the researcher acknowledged the section (flows.go).
	Delivered bool `json:"delivered,omitempty"`
}

// Comment is a human comment on a section.
type Comment struct {
	ID        string    `json:"id"`
	Section   string    `json:"section"`
	Text      string    `json:"text"`
	Status    string    `json:"status"` // open | addressed | failed
	Response  string    `json:"response,omitempty"`
	LLM       string    `json:"llm,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	Order     int64     `json:"order"`
	AddedAt   time.Time `json:"added_at"`
	DecidedAt time.Time `json:"decided_at,omitzero"`
}

// Comment statuses.
const (
	CommentOpen      = "open"
	CommentAddressed = "addressed"
	CommentFailed    = "failed"
)

// Work is one finished piece of documenter work, counted for the
// new/review allocation.
type Work struct {
	Kind string    `json:"kind"` // new | review
	At   time.Time `json:"at"`
}

// state is everything the documenter logs; its JSON is the snapshot.
type state struct {
	Opportunities map[string]*Opportunity `json:"opportunities"`
	Sections      map[string]*Section     `json:"sections"`
	Comments      map[string]*Comment     `json:"comments"`
	Work          []Work                  `json:"work"`
	Seq           int64                   `json:"seq"`
}

func newState() state {
	return state{Opportunities: map[string]*Opportunity{}, Sections: map[string]*Section{}, Comments: map[string]*Comment{}, Work: []Work{}}
}

// Event types.
const (
	evAvailable      = "insight_available"
	evMathEvaluated  = "math_evaluated"
	evMathDecided    = "math_decided"
	evDrafted        = "drafted"
	evExposition     = "exposition_evaluated"
	evIncorporated   = "incorporated"
	evOppFailed      = "opportunity_failed"
	evCommentAdded   = "comment_added"
	evCommentDone    = "comment_addressed"
	evCommentFailed  = "comment_failed"
	evSectionReview  = "section_reviewed"
	evRevisionProp   = "revision_proposed"
	evRevisionDone   = "revision_decided"
	evSectionSent    = "section_delivered" // the researcher acknowledged a section
	workNew, workRev = "new", "review"
)

type availableData struct {
	Insight     string   `json:"insight"`
	Text        string   `json:"text"`
	Tags        []string `json:"tags,omitempty"`
	Seed        string   `json:"seed,omitempty"`
	DuplicateOf string   `json:"duplicate_of,omitempty"`
	Similarity  float64  `json:"similarity,omitempty"`
}

type mathEvaluatedData struct {
	Insight   string `json:"insight"`
	Reviewer  string `json:"reviewer"`
	LLM       string `json:"llm"`
	Task      string `json:"task"`
	Verdict   string `json:"verdict"`
	Rationale string `json:"rationale"`
}

type mathDecidedData struct {
	Insight     string  `json:"insight"`
	Outcome     string  `json:"outcome"` // accepted | rejected | duplicate
	Target      string  `json:"target,omitempty"`
	DuplicateOf string  `json:"duplicate_of,omitempty"`
	Similarity  float64 `json:"similarity,omitempty"`
	Reason      string  `json:"reason"`
}

type draftedData struct {
	Insight string `json:"insight"`
	Draft   int    `json:"draft"` // 1-based
	Task    string `json:"task"`
	LLM     string `json:"llm"`
	Title   string `json:"title"`
	Text    string `json:"text"`
}

type expositionData struct {
	Insight   string `json:"insight"`
	Draft     int    `json:"draft"`
	Task      string `json:"task"`
	LLM       string `json:"llm"`
	Verdict   string `json:"verdict"`
	Rationale string `json:"rationale"`
}

type incorporatedData struct {
	Insight  string `json:"insight"`
	Section  string `json:"section"`
	Created  bool   `json:"created"`
	Title    string `json:"title"`
	Markdown string `json:"markdown"` // the text added
}

type sectionDeliveredData struct {
	Section string `json:"section"`
	Outcome string `json:"outcome"`          // taken | refused
	Reason  string `json:"reason,omitempty"` // why refused
}

type oppFailedData struct {
	Insight string `json:"insight"`
	Status  string `json:"status"` // rejected | failed
	Reason  string `json:"reason"`
}

type commentAddedData struct {
	ID      string `json:"id"`
	Section string `json:"section"`
	Text    string `json:"text"`
}

type commentDoneData struct {
	ID       string `json:"id"`
	Section  string `json:"section"`
	Task     string `json:"task"`
	LLM      string `json:"llm"`
	Markdown string `json:"markdown"` // the section's new text
	Response string `json:"response"`
}

type commentFailedData struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

type sectionReviewData struct {
	Section string `json:"section"`
	Version int    `json:"version"`
	Task    string `json:"task"`
	LLM     string `json:"llm"`
	Text    string `json:"text"`
}

type revisionProposedData struct {
	Section  string `json:"section"`
	Base     int    `json:"base"` // the version revised
	Markdown string `json:"markdown"`
	Source   string `json:"source"`
	LLM      string `json:"llm"`
	Task     string `json:"task"`
}

type revisionDecidedData struct {
	Section   string `json:"section"`
	Base      int    `json:"base"`
	Verdict   string `json:"verdict"` // bless | revise: the revision replaces the section; reject: dropped
	Rationale string `json:"rationale"`
	LLM       string `json:"llm,omitempty"`
	Task      string `json:"task"`
	// Markdown is the text replacing the section: the proposal less what
	// another section took in meanwhile ("" = the proposal).
	Markdown string `json:"markdown,omitempty"`
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("documenter: encode event: %v", err)) // only plain structs reach here
	}
	return b
}

func decode[T any](e *pb.ModuleEvent) (T, error) {
	var v T
	if err := json.Unmarshal(e.Data, &v); err != nil {
		return v, fmt.Errorf("documenter: %s event (task %q) does not decode: %w", e.Type, e.TaskId, err)
	}
	return v, nil
}

// Apply changes the state. It is idempotent: an event whose effect is
// already there changes nothing; in particular an insight is incorporated
// at most once.
func (m *Module) Apply(e *pb.ModuleEvent, at time.Time) error {
	at = at.UTC()
	st := &m.st
	switch e.Type {
	case evAvailable:
		d, err := decode[availableData](e)
		if err != nil {
			return err
		}
		delete(m.tentative, d.Insight)
		if _, ok := st.Opportunities[d.Insight]; ok {
			return nil
		}
		st.Seq++
		o := &Opportunity{Insight: d.Insight, Text: d.Text, Tags: d.Tags, Seed: d.Seed, Status: StatusEvaluating,
			Order: st.Seq, AvailableAt: at}
		if d.DuplicateOf != "" {
			o.Status, o.DuplicateOf, o.Similarity, o.DecidedAt = StatusDuplicate, d.DuplicateOf, d.Similarity, at
			o.Reason = "duplicates " + d.DuplicateOf
		}
		st.Opportunities[d.Insight] = o

	case evMathEvaluated:
		d, err := decode[mathEvaluatedData](e)
		if err != nil {
			return err
		}
		o, err := m.opp(d.Insight, e)
		if err != nil {
			return err
		}
		if o.Status != StatusEvaluating || o.evaluationBy(d.Reviewer) != nil {
			return nil
		}
		o.Evaluations = append(o.Evaluations, Evaluation{Reviewer: d.Reviewer, LLM: d.LLM, Task: d.Task, Verdict: d.Verdict, Rationale: d.Rationale, At: at})

	case evMathDecided:
		d, err := decode[mathDecidedData](e)
		if err != nil {
			return err
		}
		o, err := m.opp(d.Insight, e)
		if err != nil {
			return err
		}
		if o.Status != StatusEvaluating {
			return nil
		}
		o.Reason = d.Reason
		switch d.Outcome {
		case "accepted":
			o.Status, o.Target = StatusDrafting, d.Target
		case "duplicate":
			o.Status, o.DuplicateOf, o.Similarity, o.DecidedAt = StatusDuplicate, d.DuplicateOf, d.Similarity, at
		default:
			o.Status, o.DecidedAt = StatusRejected, at
		}
		if !isOpen(o.Status) {
			o.compact()
		}

	case evDrafted:
		d, err := decode[draftedData](e)
		if err != nil {
			return err
		}
		o, err := m.opp(d.Insight, e)
		if err != nil {
			return err
		}
		if o.Status != StatusDrafting || d.Draft != o.Drafts+1 {
			return nil
		}
		o.Drafts, o.Draft, o.DraftTitle, o.DraftLLM, o.Status = d.Draft, d.Text, d.Title, d.LLM, StatusExposition

	case evExposition:
		d, err := decode[expositionData](e)
		if err != nil {
			return err
		}
		o, err := m.opp(d.Insight, e)
		if err != nil {
			return err
		}
		if o.Status != StatusExposition || d.Draft != o.Drafts || len(o.Exposition) >= d.Draft {
			return nil
		}
		o.Exposition = append(o.Exposition, Evaluation{Reviewer: d.LLM, LLM: d.LLM, Task: d.Task, Verdict: d.Verdict, Rationale: d.Rationale, At: at})
		if d.Verdict == VerdictReject {
			if o.Drafts < m.cfg.MaxDrafts {
				o.Status = StatusDrafting // redraft
			} else {
				o.Status, o.DecidedAt, o.Reason = StatusRejected, at, "exposition rejected every draft: "+d.Rationale
				o.compact()
			}
		}

	case evSectionSent:
		d, err := decode[sectionDeliveredData](e)
		if err != nil {
			return err
		}
		sec := st.Sections[d.Section]
		if sec == nil {
			return fmt.Errorf("documenter: delivery of unknown section %s", d.Section)
		}
		sec.Delivered = true

	case evIncorporated:
		d, err := decode[incorporatedData](e)
		if err != nil {
			return err
		}
		o, err := m.opp(d.Insight, e)
		if err != nil {
			return err
		}
		// The decided text is durable now, or dropped: either way no
		// longer pending (a transient index entry DecideResponse made).
		m.passages.Remove(pendingOwner(d.Insight))
		if o.Status == StatusIncorporated || m.incorporatedIn(d.Insight) != "" {
			return nil // the incorporated flag is set once (M4)
		}
		sec := st.Sections[d.Section]
		if sec == nil && d.Created {
			// Decided beside another new section of the same title (both
			// before either was applied): one title, one section.
			if same := m.sameTitle(d.Title); same != "" {
				sec = st.Sections[same]
			}
		}
		if sec == nil {
			if !d.Created {
				return fmt.Errorf("documenter: insight %s extends unknown section %s", d.Insight, d.Section)
			}
			st.Seq++
			sec = &Section{ID: d.Section, Title: d.Title, Insights: []string{}, Order: st.Seq, CreatedAt: at}
			st.Sections[d.Section] = sec
		}
		switch {
		case d.Markdown == "": // the insight's content already stood in the section
		case sec.Markdown == "":
			sec.Markdown = d.Markdown
		default:
			sec.Markdown = strings.TrimRight(sec.Markdown, "\n") + "\n\n" + d.Markdown
		}
		m.passages.Set(sec.ID, sec.Markdown)
		if d.Markdown != "" {
			sec.Proposal = nil // it revised the text this one extends
		}
		sec.Insights = append(sec.Insights, d.Insight)
		sec.Version++
		sec.UpdatedAt = at
		o.Status, o.Section, o.DecidedAt = StatusIncorporated, sec.ID, at
		o.compact()
		st.Work = append(st.Work, Work{Kind: workNew, At: at})
		m.checker.Add(sectionItem(sec.ID, d.Insight), o.Text, KindSection)

	case evOppFailed:
		d, err := decode[oppFailedData](e)
		if err != nil {
			return err
		}
		o, err := m.opp(d.Insight, e)
		if err != nil {
			return err
		}
		if !isOpen(o.Status) {
			return nil
		}
		o.Status, o.Reason, o.DecidedAt = d.Status, d.Reason, at
		o.compact()

	case evCommentAdded:
		d, err := decode[commentAddedData](e)
		if err != nil {
			return err
		}
		if _, ok := st.Comments[d.ID]; ok {
			return nil
		}
		sec := st.Sections[d.Section]
		if sec == nil {
			return fmt.Errorf("documenter: comment %s on unknown section %s", d.ID, d.Section)
		}
		st.Seq++
		st.Comments[d.ID] = &Comment{ID: d.ID, Section: d.Section, Text: d.Text, Status: CommentOpen, Order: st.Seq, AddedAt: at}
		sec.Comments = append(sec.Comments, d.ID)

	case evCommentDone:
		d, err := decode[commentDoneData](e)
		if err != nil {
			return err
		}
		c := st.Comments[d.ID]
		if c == nil {
			return fmt.Errorf("documenter: unknown comment %s addressed (task %s)", d.ID, e.TaskId)
		}
		m.passages.Remove(pendingOwner(c.Section))
		if c.Status != CommentOpen {
			return nil
		}
		c.Status, c.Response, c.LLM, c.DecidedAt = CommentAddressed, d.Response, d.LLM, at
		if sec := st.Sections[c.Section]; sec != nil && d.Markdown != "" {
			sec.History = append(sec.History, SectionVersion{Version: sec.Version, Markdown: sec.Markdown, Reason: "comment " + c.ID, At: at})
			sec.Proposal = nil // it revised the text this one replaces
			sec.Markdown = d.Markdown
			sec.Version++
			sec.UpdatedAt = at
			m.passages.Set(sec.ID, sec.Markdown)
		}

	case evCommentFailed:
		d, err := decode[commentFailedData](e)
		if err != nil {
			return err
		}
		c := st.Comments[d.ID]
		if c == nil {
			return fmt.Errorf("documenter: unknown comment %s failed (task %s)", d.ID, e.TaskId)
		}
		if c.Status != CommentOpen {
			return nil
		}
		c.Status, c.Reason, c.DecidedAt = CommentFailed, d.Reason, at

	case evSectionReview:
		d, err := decode[sectionReviewData](e)
		if err != nil {
			return err
		}
		sec := st.Sections[d.Section]
		if sec == nil {
			return fmt.Errorf("documenter: review of unknown section %s (task %s)", d.Section, e.TaskId)
		}
		if d.Version <= sec.Reviewed || slices.ContainsFunc(sec.Reviews, func(r SectionReview) bool { return r.Version == d.Version }) {
			return nil
		}
		sec.Reviews = append(sec.Reviews, SectionReview{Version: d.Version, LLM: d.LLM, Task: d.Task, Text: d.Text, At: at})
		sec.Reviewed = d.Version
		st.Work = append(st.Work, Work{Kind: workRev, At: at})

	case evRevisionProp:
		d, err := decode[revisionProposedData](e)
		if err != nil {
			return err
		}
		sec := st.Sections[d.Section]
		if sec == nil {
			return fmt.Errorf("documenter: revision of unknown section %s (task %s)", d.Section, e.TaskId)
		}
		if sec.Version != d.Base || sec.Proposal != nil || sec.RevisedFor >= d.Base {
			return nil
		}
		sec.Proposal = &Revision{Version: d.Base + 1, Markdown: d.Markdown, Source: d.Source, LLM: d.LLM, Task: d.Task}
		sec.RevisedFor = d.Base

	case evRevisionDone:
		d, err := decode[revisionDecidedData](e)
		if err != nil {
			return err
		}
		m.passages.Remove(pendingOwner(d.Section))
		sec := st.Sections[d.Section]
		if sec == nil {
			return fmt.Errorf("documenter: revision decided for unknown section %s (task %s)", d.Section, e.TaskId)
		}
		sec.RevisedFor = max(sec.RevisedFor, d.Base)
		p := sec.Proposal
		if p == nil || p.Version != d.Base+1 {
			return nil
		}
		sec.Proposal = nil
		if d.Verdict == VerdictReject || sec.Version != d.Base {
			return nil
		}
		sec.History = append(sec.History, SectionVersion{Version: sec.Version, Markdown: sec.Markdown, Reason: p.Source + " (task " + p.Task + ")", At: at})
		md := d.Markdown
		if md == "" {
			md = p.Markdown
		}
		sec.Markdown, sec.Version, sec.UpdatedAt = md, p.Version, at
		m.passages.Set(sec.ID, sec.Markdown)
		st.Work = append(st.Work, Work{Kind: workRev, At: at})

	default:
		return fmt.Errorf("documenter: unknown event type %q (task %s)", e.Type, e.TaskId)
	}
	m.trimWork(at)
	return nil
}

// trimWork drops work older than the window (a function of the event's
// time: the same on replay).
func (m *Module) trimWork(at time.Time) {
	cut := 0
	for cut < len(m.st.Work) && at.Sub(m.st.Work[cut].At) > m.cfg.Window {
		cut++
	}
	if cut > 0 {
		m.st.Work = append([]Work{}, m.st.Work[cut:]...)
	}
}

func (m *Module) opp(id string, e *pb.ModuleEvent) (*Opportunity, error) {
	o := m.st.Opportunities[id]
	if o == nil {
		return nil, fmt.Errorf("documenter: %s event for unknown insight %s (task %s)", e.Type, id, e.TaskId)
	}
	return o, nil
}

// incorporatedIn is the section holding the insight, "" if none.
func (m *Module) incorporatedIn(insight string) string {
	for _, id := range sortedKeys(m.st.Sections) {
		if slices.Contains(m.st.Sections[id].Insights, insight) {
			return id
		}
	}
	return ""
}

// compact drops the verdicts and the draft of a decided opportunity:
// they were read only while it was open (the decision, the next draft's
// critique, the incorporation), its Reason keeps the verdict counts and
// Drafts how many drafts it took, the section holds what came of it, and
// keeping them grew the heap with every insight of a long run. The WAL
// holds them until compaction.
func (o *Opportunity) compact() {
	o.Evaluations, o.Exposition = nil, nil
	o.Draft, o.DraftTitle = "", ""
}

func (o *Opportunity) evaluationBy(reviewer string) *Evaluation {
	for i := range o.Evaluations {
		if o.Evaluations[i].Reviewer == reviewer {
			return &o.Evaluations[i]
		}
	}
	return nil
}

func sectionItem(section, insight string) string { return section + "/" + insight }

// Snapshot encodes the state.
func (m *Module) Snapshot() ([]byte, error) { return json.Marshal(m.st) }

// Restore replaces the state with a snapshot and rebuilds the
// documenter's items in the shared checker.
func (m *Module) Restore(data []byte) error {
	st := newState()
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("documenter: restore: %w", err)
	}
	if st.Opportunities == nil || st.Sections == nil || st.Comments == nil {
		return fmt.Errorf("documenter: restore: the snapshot has a null section")
	}
	if st.Work == nil {
		st.Work = []Work{}
	}
	m.reset(st)
	return nil
}

func (m *Module) reset(st state) {
	m.st = st
	m.tentative = map[string]tentativeItem{}
	var items []dedup.Item
	for _, sid := range sortedKeys(st.Sections) {
		for _, ins := range st.Sections[sid].Insights {
			if o := st.Opportunities[ins]; o != nil {
				items = append(items, dedup.Item{ID: sectionItem(sid, ins), Text: o.Text})
			}
		}
	}
	m.checker.Load(KindSection, items)
	texts := map[string]string{}
	for id, sec := range st.Sections {
		texts[id] = sec.Markdown
	}
	m.passages.Load(texts)
}
