package explorer

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"fano/modules"
	"fano/modules/dedup"
	"fano/pb"
)

// Output files: output/blessed/<id>.json for every insight ever blessed.
// The host writes them atomically under a WAL intent and commit; the
// explorer only renders the bytes.

const blessedDir = "blessed/"

func blessedPath(id string) string { return blessedDir + id + ".json" }

// Exports lists the files applying e changed: a blessing, or a blessed
// insight found to be a duplicate (its file then says so).
func (m *Module) Exports(e *pb.ModuleEvent) []string {
	switch e.Type {
	case evDecided:
		if d, err := decode[decidedData](e); err == nil && d.Outcome == outcomeBlessed {
			return []string{blessedPath(d.Insight)}
		}
	case evMarkedDuplicate:
		if d, err := decode[markedDuplicateData](e); err == nil {
			if ins := m.st.Insights[d.Insight]; ins != nil && !ins.BlessedAt.IsZero() {
				return []string{blessedPath(d.Insight)}
			}
		}
	}
	return nil
}

// ExportPaths lists the file of every insight ever blessed, sorted.
func (m *Module) ExportPaths() []string {
	var out []string
	for id, ins := range m.st.Insights {
		if !ins.BlessedAt.IsZero() {
			out = append(out, blessedPath(id))
		}
	}
	sort.Strings(out)
	return out
}

// BlessedFile is the JSON of output/blessed/<id>.json.
type BlessedFile struct {
	ID          string    `json:"id"`
	Text        string    `json:"text"`
	Status      string    `json:"status"` // blessed, or duplicate when verify found one later
	DuplicateOf string    `json:"duplicate_of,omitempty"`
	Tags        []string  `json:"tags,omitempty"`
	Confidence  float64   `json:"confidence"`
	Seed        string    `json:"seed"`
	SeedID      string    `json:"seed_id"`
	Thread      string    `json:"thread"`
	Chunk       string    `json:"chunk"`
	Author      string    `json:"author"`
	Rounds      int       `json:"rounds"`
	History     []string  `json:"history,omitempty"`
	Reviews     []Review  `json:"reviews"`
	Decision    string    `json:"decision"`
	CreatedAt   time.Time `json:"created_at"`
	BlessedAt   time.Time `json:"blessed_at"`
}

// Export renders one output file from the state.
func (m *Module) Export(path string) ([]byte, error) {
	id, ok := strings.CutPrefix(path, blessedDir)
	id, ok2 := strings.CutSuffix(id, ".json")
	ins := m.st.Insights[id]
	if !ok || !ok2 || ins == nil || ins.BlessedAt.IsZero() {
		return nil, fmt.Errorf("explorer: no output file %q (not a blessed insight)", path)
	}
	f := BlessedFile{
		ID: ins.ID, Text: ins.Text, Status: ins.Status, DuplicateOf: ins.DuplicateOf, Tags: ins.Tags,
		Confidence: ins.Confidence, SeedID: ins.SeedID, Thread: ins.ThreadID, Chunk: ins.ChunkID,
		Author: ins.Author, Rounds: ins.Round, History: ins.History, Reviews: ins.Reviews,
		Decision: ins.Reason, CreatedAt: ins.CreatedAt, BlessedAt: ins.BlessedAt,
	}
	if th := m.st.Threads[ins.ThreadID]; th != nil {
		f.Seed = th.Seed
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("explorer: render %s: %w", path, err)
	}
	return append(b, '\n'), nil
}

// Problem kinds of Verify.
const (
	ProblemBlessedTwice     = "blessed_twice"     // an id listed twice in the blessed store
	ProblemBlessedIndex     = "blessed_index"     // the store and the insights' statuses disagree
	ProblemBlessedDuplicate = "blessed_duplicate" // two blessed insights state the same thing
)

// Verify checks the blessed store: no insight listed twice, the list and
// the statuses agree, and no blessed insight duplicates an earlier one
// (two blessings decided at the same moment can race past the check).
func (m *Module) Verify() []modules.Problem {
	var out []modules.Problem
	count := map[string]int{}
	for _, id := range m.st.Blessed {
		count[id]++
		if count[id] == 2 {
			out = append(out, modules.Problem{Kind: ProblemBlessedTwice, ID: id, Detail: "insight " + id + " is in the blessed store more than once"})
		}
		if ins := m.st.Insights[id]; ins == nil || ins.Status != StatusBlessed {
			out = append(out, modules.Problem{Kind: ProblemBlessedIndex, ID: id, Detail: "insight " + id + " is in the blessed store but is not blessed"})
		}
	}
	for _, id := range sortedKeys(m.st.Insights) {
		if m.st.Insights[id].Status == StatusBlessed && count[id] == 0 {
			out = append(out, modules.Problem{Kind: ProblemBlessedIndex, ID: id, Detail: "insight " + id + " is blessed but not in the blessed store"})
		}
	}
	for _, dup := range m.blessedDuplicates() {
		out = append(out, modules.Problem{Kind: ProblemBlessedDuplicate, ID: dup.id,
			Detail: fmt.Sprintf("blessed insight %s duplicates %s, blessed earlier (similarity %.2f)", dup.id, dup.of, dup.score)})
	}
	return out
}

type blessedDup struct {
	id, of string
	score  float64
}

// blessedDuplicates walks the blessed store in order with a private
// checker: each blessed insight that duplicates an earlier one.
func (m *Module) blessedDuplicates() []blessedDup {
	cfg := m.checker.Config()
	c := dedup.New(dedup.Config{Threshold: cfg.Threshold, BorderlineLow: cfg.Threshold})
	var out []blessedDup
	seen := map[string]bool{}
	for _, id := range m.st.Blessed {
		ins := m.st.Insights[id]
		if seen[id] || ins == nil || ins.Status != StatusBlessed {
			continue
		}
		seen[id] = true
		if of, score, _ := c.Check(ins.Text); of != "" {
			out = append(out, blessedDup{id: id, of: of, score: score})
			continue
		}
		c.Add(id, ins.Text, KindBlessed)
	}
	return out
}

// DecideRepair decides the events that fix a problem Verify found: the
// blessed store rebuilt from the statuses, or the later of two duplicate
// blessed insights marked a duplicate. A problem that no longer exists
// decides nothing.
func (m *Module) DecideRepair(p modules.Problem, now time.Time) ([]*pb.ModuleEvent, error) {
	switch p.Kind {
	case ProblemBlessedTwice, ProblemBlessedIndex:
		if !slices.ContainsFunc(m.Verify(), func(q modules.Problem) bool { return q.Kind == p.Kind && q.ID == p.ID }) {
			return nil, nil
		}
		return []*pb.ModuleEvent{event(evBlessedReindexed, "", struct{}{})}, nil
	case ProblemBlessedDuplicate:
		for _, d := range m.blessedDuplicates() {
			if d.id == p.ID {
				return []*pb.ModuleEvent{event(evMarkedDuplicate, "", markedDuplicateData{Insight: d.id, DuplicateOf: d.of, Similarity: d.score})}, nil
			}
		}
		return nil, nil
	}
	return nil, fmt.Errorf("explorer: cannot repair a problem of kind %q (insight %s)", p.Kind, p.ID)
}

// Read access for the CLI, the control panel and tests. Each returns
// copies.

// Insight returns one insight.
func (m *Module) Insight(id string) (Insight, bool) {
	ins, ok := m.st.Insights[id]
	if !ok {
		return Insight{}, false
	}
	return cloneInsight(ins), true
}

// Insights returns every insight in creation order.
func (m *Module) Insights() []Insight {
	out := make([]Insight, 0, len(m.st.Insights))
	for _, ins := range m.st.Insights {
		out = append(out, cloneInsight(ins))
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Order < out[b].Order })
	return out
}

// Blessed returns the blessed store in blessing order.
func (m *Module) Blessed() []Insight {
	out := make([]Insight, 0, len(m.st.Blessed))
	for _, id := range m.st.Blessed {
		if ins := m.st.Insights[id]; ins != nil {
			out = append(out, cloneInsight(ins))
		}
	}
	return out
}

// Threads returns every thread, by id.
func (m *Module) Threads() []Thread {
	out := make([]Thread, 0, len(m.st.Threads))
	for _, id := range sortedKeys(m.st.Threads) {
		th := *m.st.Threads[id]
		th.Exchanges = slices.Clone(th.Exchanges)
		out = append(out, th)
	}
	return out
}

// Chunks returns every chunk, by id.
func (m *Module) Chunks() []Chunk {
	out := make([]Chunk, 0, len(m.st.Chunks))
	for _, id := range sortedKeys(m.st.Chunks) {
		ch := *m.st.Chunks[id]
		ch.Insights = slices.Clone(ch.Insights)
		ch.Dropped = slices.Clone(ch.Dropped)
		out = append(out, ch)
	}
	return out
}

func cloneInsight(ins *Insight) Insight {
	c := *ins
	c.History = slices.Clone(ins.History)
	c.Tags = slices.Clone(ins.Tags)
	c.Reviews = slices.Clone(ins.Reviews)
	return c
}
