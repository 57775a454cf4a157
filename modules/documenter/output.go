package documenter

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"fano/modules"
	"fano/pb"
)

// Output files: output/DOCUMENT.md and output/document.json, rendered
// from the state alone (so recovery and `fano verify` can redo them). The
// host writes them atomically under a WAL intent and commit.
const (
	DocumentMD   = "DOCUMENT.md"
	DocumentJSON = "document.json"
)

// Exports lists the files applying e changed: every event that changes a
// section.
func (m *Module) Exports(e *pb.ModuleEvent) []string {
	switch e.Type {
	case evIncorporated, evCommentDone, evSectionReview, evCommentAdded, evRevisionProp, evRevisionDone:
		return []string{DocumentMD, DocumentJSON}
	}
	return nil
}

// ExportPaths lists both files once the document has a section (before
// that no event has written them, and none is missing).
func (m *Module) ExportPaths() []string {
	if len(m.st.Sections) == 0 {
		return nil
	}
	return []string{DocumentJSON, DocumentMD}
}

// Export renders one output file.
func (m *Module) Export(path string) ([]byte, error) {
	switch path {
	case DocumentMD:
		return []byte(m.DocumentMarkdown()), nil
	case DocumentJSON:
		b, err := json.MarshalIndent(m.Document(), "", "  ")
		if err != nil {
			return nil, fmt.Errorf("documenter: render %s: %w", path, err)
		}
		return append(b, '\n'), nil
	}
	return nil, fmt.Errorf("documenter: no output file %q", path)
}

// Sections returns the sections in document order (copies).
func (m *Module) Sections() []Section {
	out := make([]Section, 0, len(m.st.Sections))
	for _, s := range m.st.Sections {
		c := *s
		c.Insights = slices.Clone(s.Insights)
		c.Reviews = slices.Clone(s.Reviews)
		c.Comments = slices.Clone(s.Comments)
		c.History = slices.Clone(s.History)
		if s.Proposal != nil {
			p := *s.Proposal
			c.Proposal = &p
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Section) int { return int(a.Order - b.Order) })
	return out
}

// SectionIDs lists the section ids in document order: the ids
// DecideAddComment accepts (the control panel's section list).
func (m *Module) SectionIDs() []string {
	var out []string
	for _, s := range m.Sections() {
		out = append(out, s.ID)
	}
	return out
}

// Opportunities returns every opportunity in arrival order (copies).
func (m *Module) Opportunities() []Opportunity {
	out := make([]Opportunity, 0, len(m.st.Opportunities))
	for _, o := range m.st.Opportunities {
		c := *o
		c.Tags = slices.Clone(o.Tags)
		c.Evaluations = slices.Clone(o.Evaluations)
		c.Exposition = slices.Clone(o.Exposition)
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Opportunity) int { return int(a.Order - b.Order) })
	return out
}

// Comments returns every comment in the order added (copies).
func (m *Module) Comments() []Comment {
	out := make([]Comment, 0, len(m.st.Comments))
	for _, c := range m.st.Comments {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b Comment) int { return int(a.Order - b.Order) })
	return out
}

// DocumentFile is the JSON of output/document.json.
type DocumentFile struct {
	Title    string        `json:"title"`
	Sections []SectionFile `json:"sections"`
}

// SectionFile is one section in document.json.
type SectionFile struct {
	ID       string          `json:"id"`
	Anchor   string          `json:"anchor"`
	Title    string          `json:"title"`
	Markdown string          `json:"markdown"`
	Insights []string        `json:"insights"`
	Version  int             `json:"version"`
	Reviews  []SectionReview `json:"reviews"`
	Comments []Comment       `json:"comments"`
	// History holds the texts revisions and comments replaced, oldest
	// first; Proposal a revision awaiting its exposition evaluation.
	History   []SectionVersion `json:"history"`
	Proposal  *Revision        `json:"proposal,omitempty"`
	CreatedAt time.Time        `json:"created_at"`
	UpdatedAt time.Time        `json:"updated_at"`
}

// Document is the document as data.
func (m *Module) Document() DocumentFile {
	d := DocumentFile{Title: m.cfg.Title, Sections: []SectionFile{}}
	for _, s := range m.Sections() {
		f := SectionFile{ID: s.ID, Anchor: s.ID, Title: s.Title, Markdown: s.Markdown, Insights: s.Insights,
			Version: s.Version, Reviews: s.Reviews, Comments: []Comment{}, History: s.History, Proposal: s.Proposal,
			CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
		if f.History == nil {
			f.History = []SectionVersion{}
		}
		if f.Reviews == nil {
			f.Reviews = []SectionReview{}
		}
		for _, id := range s.Comments {
			if c := m.st.Comments[id]; c != nil {
				f.Comments = append(f.Comments, *c)
			}
		}
		d.Sections = append(d.Sections, f)
	}
	return d
}

// DocumentMarkdown renders DOCUMENT.md: the title, a table of contents,
// and each section under a stable anchor (its id), with the insights it
// came from.
func (m *Module) DocumentMarkdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", oneLine(m.cfg.Title))
	secs := m.Sections()
	if len(secs) == 0 {
		b.WriteString("*No sections yet: the document grows as insights are blessed and incorporated.*\n")
		return b.String()
	}
	b.WriteString("## Contents\n\n")
	for i, s := range secs {
		fmt.Fprintf(&b, "%d. [%s](#%s)\n", i+1, oneLine(s.Title), s.ID)
	}
	for i, s := range secs {
		fmt.Fprintf(&b, "\n<a id=\"%s\"></a>\n\n## %d. %s\n\n", s.ID, i+1, oneLine(s.Title))
		b.WriteString(strings.TrimSpace(s.Markdown))
		b.WriteString("\n\n")
		fmt.Fprintf(&b, "<sub>Section %s · from insights %s · version %d", s.ID, strings.Join(s.Insights, ", "), s.Version)
		if n := len(s.Reviews); n > 0 {
			fmt.Fprintf(&b, " · reviewed %d×", n)
		}
		if n := len(s.History); n > 0 {
			fmt.Fprintf(&b, " · revised %d×", n)
		}
		resolved, open := 0, 0
		for _, id := range s.Comments {
			switch c := m.st.Comments[id]; {
			case c == nil:
			case c.Status == CommentAddressed:
				resolved++
			case c.Status == CommentOpen:
				open++
			}
		}
		if resolved+open > 0 {
			fmt.Fprintf(&b, " · comments: %d resolved, %d open", resolved, open)
		}
		b.WriteString("</sub>\n")
	}
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Problem kinds of Verify.
const (
	ProblemIncorporatedTwice = "incorporated_twice" // an insight in two places of the document
	ProblemIncorporatedIndex = "incorporated_index" // the flag and the sections disagree
)

// Verify checks that each insight is incorporated at most once and that
// the incorporated flags and the sections agree.
func (m *Module) Verify() []modules.Problem {
	var out []modules.Problem
	where := map[string][]string{}
	for _, s := range m.Sections() {
		for _, ins := range s.Insights {
			where[ins] = append(where[ins], s.ID)
		}
	}
	for _, ins := range sortedKeys(where) {
		if len(where[ins]) > 1 {
			out = append(out, modules.Problem{Kind: ProblemIncorporatedTwice, ID: ins,
				Detail: fmt.Sprintf("insight %s is incorporated %d times (sections %s)", ins, len(where[ins]), strings.Join(where[ins], ", "))})
		}
		if o := m.st.Opportunities[ins]; o == nil || o.Status != StatusIncorporated {
			out = append(out, modules.Problem{Kind: ProblemIncorporatedIndex, ID: ins, Detail: "insight " + ins + " is in a section but not marked incorporated"})
		}
	}
	for _, id := range sortedKeys(m.st.Opportunities) {
		if o := m.st.Opportunities[id]; o.Status == StatusIncorporated && len(where[id]) == 0 {
			out = append(out, modules.Problem{Kind: ProblemIncorporatedIndex, ID: id, Detail: "insight " + id + " is marked incorporated but no section holds it"})
		}
	}
	return out
}

// DecideRepair: the documenter's problems are not repaired automatically
// (a section's prose cannot be split mechanically); each is an error
// naming the insight, for a person to look at.
func (m *Module) DecideRepair(p modules.Problem, _ time.Time) ([]*pb.ModuleEvent, error) {
	if !slices.ContainsFunc(m.Verify(), func(q modules.Problem) bool { return q.Kind == p.Kind && q.ID == p.ID }) {
		return nil, nil
	}
	return nil, fmt.Errorf("documenter: cannot repair %s of insight %s automatically: %s", p.Kind, p.ID, p.Detail)
}
