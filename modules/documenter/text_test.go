package documenter

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/modules/clean"
	"fano/modules/dedup"
	"fano/pb"
)

const (
	padPoints = "The Fano plane has exactly 7 points and 7 lines, and it is the smallest projective plane of all."
	padGroup  = "PSL(2,7), of order 168, is the second smallest nonabelian simple group, after A5 of order 60."
)

// Drafts in the simulator's manner: a title, the insight's paragraph,
// padding with facts the document may already hold, and chat filler.
func paddedAnswer(prompts map[string][]string) func(t *pb.Task, llm string) string {
	return func(t *pb.Task, _ string) string {
		if t.TaskType != TypeDraft {
			return simpleAnswer(t, "")
		}
		prompts[t.Context[ctxInsight]] = append(prompts[t.Context[ctxInsight]], t.Conversation.Messages[len(t.Conversation.Messages)-1].Content)
		switch t.Context[ctxInsight] {
		case "in-1":
			return "## The size of the Fano plane\n\nGreat question! " + padPoints + "\n\nIts group is simple: " + padGroup + "\n\nWant me to turn this into a short proof sketch?"
		case "in-2":
			return "## The automorphism group\n\nHere's a breakdown of the key ideas. The automorphism group of the Fano plane is PSL(2,7) and acts transitively on flags of the plane.\n\n" +
				"It also helps to note that the Fano plane has exactly 7 points and 7 lines, and it is the smallest projective plane of all.\n\n" +
				"**Simplicity:**\n- " + padGroup + "\n\nLet me know if you want the details of any step."
		default: // in-3: the same subject as in-1, under the same title
			return "## The size of the Fano plane\n\nCounting flags, the Fano plane has 21 incident point-line pairs, three on every line and three through every point."
		}
	}
}

// A first draft that mostly restates other sections is sent back once
// with a critique naming the passages and their section; the passages
// that stand elsewhere never reach the document, nor does the chat
// filler; an insight drafted under a title a section has extends that
// section; and the document passes its own check.
func TestDraftRepeatingTheDocumentIsRevisedThenPruned(t *testing.T) {
	prompts := map[string][]string{}
	h := newHarness(t, Config{})
	h.answer = paddedAnswer(prompts)
	h.note("in-1", factPoints, "fano_plane")
	h.runAll()
	require.Len(t, h.m.Sections(), 1)
	first := h.m.Sections()[0]
	assert.NotContains(t, first.Markdown, "Great question")
	assert.NotContains(t, first.Markdown, "proof sketch")

	h.note("in-2", factGroup, "group_theory")
	h.runAll()
	o := findOpp(h.m, "in-2")
	require.GreaterOrEqual(t, len(prompts["in-2"]), 2, "the first draft was sent back")
	assert.Equal(t, StatusIncorporated, o.Status)
	assert.Equal(t, 2, o.Drafts)
	assert.Empty(t, o.Exposition, "a decided opportunity keeps its counts, not its verdicts")
	assert.Empty(t, o.Evaluations, "a decided opportunity keeps its counts, not its verdicts")
	// The critique reached the second draft's prompt.
	assert.Contains(t, prompts["in-2"][1], "exactly 7 points and 7 lines")
	assert.Contains(t, prompts["in-2"][1], `in section "The size of the Fano plane" (#`+first.ID+")")
	assert.Contains(t, prompts["in-2"][1], "An editor refused the previous draft: These passages already stand elsewhere")
	assert.Contains(t, prompts["in-2"][1], "The size of the Fano plane (#"+first.ID+")", "the prompt carries the contents")

	secs := h.m.Sections()
	require.Len(t, secs, 2)
	group := secs[1]
	assert.Contains(t, group.Markdown, "acts transitively on flags")
	assert.NotContains(t, group.Markdown, "Simplicity", "a label whose list was left out goes too")
	assert.NotContains(t, group.Markdown, "exactly 7 points", "the passage of the first section is left out")
	assert.NotContains(t, group.Markdown, "breakdown")
	assert.NotContains(t, group.Markdown, "Let me know")

	h.note("in-3", "The Fano plane has 21 flags: incident point-line pairs.", "fano_plane")
	h.runAll()
	secs = h.m.Sections()
	require.Len(t, secs, 2, "one title, one section")
	assert.Equal(t, []string{"in-1", "in-3"}, secs[0].Insights)
	assert.Contains(t, secs[0].Markdown, "21 incident point-line pairs")

	assert.Empty(t, CheckDocument(h.m.Document(), h.m.DocumentMarkdown(), nil, dedup.Config{}))
	assert.Empty(t, h.m.DocumentProblems())
	assert.Equal(t, snapshot(t, h.m), snapshot(t, h.replayed()), "replay rebuilds the same state")
}

func findOpp(m *Module, id string) Opportunity {
	for _, o := range m.Opportunities() {
		if o.Insight == id {
			return o
		}
	}
	return Opportunity{}
}

// CheckDocument finds each kind of flaw in a document that has them.
func TestCheckDocumentFindsEachKind(t *testing.T) {
	doc := DocumentFile{Title: "T", Sections: []SectionFile{
		{ID: "sec-a", Anchor: "sec-a", Title: "Size", Markdown: padPoints + " See [the group](#sec-b)."},
		{ID: "sec-b", Anchor: "sec-b", Title: "Group", Markdown: "Note that " + strings.ToLower(padPoints[:1]) + padPoints[1:] + " Would you like me to expand on this?"},
		{ID: "sec-c", Anchor: "sec-c", Title: "size", Markdown: "See [nowhere](#sec-z)."},
		{ID: "sec-d", Anchor: "sec-d", Title: "Empty", Markdown: "  "},
	}}
	md := "# T\n\n1. [Size](#sec-a)\n2. [Gone](#sec-gone)\n"
	got := map[string]int{}
	for _, f := range CheckDocument(doc, md, clean.Default(), dedup.Config{}) {
		got[f.Kind]++
	}
	assert.Equal(t, map[string]int{FindingRepeatedSentence: 1, FindingRepeatedTitle: 1, FindingFiller: 1, FindingBrokenAnchor: 2, FindingEmptySection: 1}, got)
}

// The draft prompt carries the document's contents within its budget:
// with many sections the latest are listed and the rest counted.
func TestDraftPromptContentsWithinBudget(t *testing.T) {
	h := newHarness(t, Config{})
	for i := range 120 {
		id := fmt.Sprintf("sec-%03d", i)
		h.m.st.Sections[id] = &Section{ID: id, Title: fmt.Sprintf("Section number %d", i), Order: int64(i + 1),
			Markdown: fmt.Sprintf("Statement %d says that structure %d has property p%d in every plane.", i, i*7919, i*104729)}
	}
	h.m.reset(h.m.st)
	h.note("in-1", factPoints)
	var draft *pb.Task
	for tk := h.next(); tk != nil; tk = h.next() {
		if tk.TaskType == TypeDraft {
			draft = tk
			break
		}
		h.run(tk)
	}
	require.NotNil(t, draft)
	act, err := h.m.NextAction(draft)
	require.NoError(t, err)
	contents, _, _ := strings.Cut(act.Prompt, "Write a new section")
	assert.LessOrEqual(t, len(contents), promptBudgetChars, "the contents stay within the budget")
	assert.Contains(t, act.Prompt, "Section number 119 (#sec-119)", "the latest section is listed")
	assert.NotContains(t, act.Prompt, "(#sec-000)")
	assert.Regexp(t, `\(\d+ earlier sections not shown\)`, act.Prompt)
	assert.Contains(t, act.Prompt, "Statement: "+factPoints)
}

// What the cleaning step removes is logged at debug level.
func TestFillerRemovalLoggedAtDebug(t *testing.T) {
	var buf bytes.Buffer
	log := zerolog.New(&buf).Level(zerolog.DebugLevel)
	h := newHarness(t, Config{Logger: &log})
	h.answer = paddedAnswer(map[string][]string{})
	h.note("in-1", factPoints)
	h.runAll()
	assert.Contains(t, buf.String(), `"event":"modules.documenter.filler_removed"`)
	assert.Contains(t, buf.String(), `"sentence":"Great question!"`)
	assert.Contains(t, buf.String(), `"sentence":"Want me to turn this into a short proof sketch?"`)
}

// Two new sections of one title decided before either was applied
// become one section when applied.
func TestSameTitleDecidedTwiceIsOneSection(t *testing.T) {
	h := newHarness(t, Config{})
	h.note("in-1", factPoints)
	h.note("in-2", factGroup)
	h.apply([]*pb.ModuleEvent{
		event(evIncorporated, "t1", incorporatedData{Insight: "in-1", Section: sectionID("in-1"), Created: true, Title: "The Fano plane", Markdown: "Seven points."}),
		event(evIncorporated, "t2", incorporatedData{Insight: "in-2", Section: sectionID("in-2"), Created: true, Title: "The  fano plane", Markdown: "Its group has order 168."}),
	})
	secs := h.m.Sections()
	require.Len(t, secs, 1)
	assert.Equal(t, []string{"in-1", "in-2"}, secs[0].Insights)
	assert.Equal(t, "Seven points.\n\nIts group has order 168.", secs[0].Markdown)
	assert.Equal(t, secs[0].ID, findOpp(h.m, "in-2").Section)
	assert.Empty(t, h.m.Verify())
	assert.Equal(t, snapshot(t, h.m), snapshot(t, h.replayed()))
}

// Pruning keeps the structure of what it keeps: subheadings and display
// math stay, a label left without its list goes.
func TestPruneKeepsStructure(t *testing.T) {
	h := newHarness(t, Config{})
	h.m.passages.Set("sec-a", padPoints)
	got, where := h.m.prune("### Proof\n\nCount the flags of the plane one line at a time.\n\n$$\n|F| = 21\n$$\n\n**Size:**\n- " + padPoints)
	assert.Equal(t, "### Proof\n\nCount the flags of the plane one line at a time.\n\n$$\n|F| = 21\n$$", got)
	assert.Equal(t, "sec-a", where)
}
