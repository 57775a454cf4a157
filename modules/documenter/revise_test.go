package documenter

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/pb"
)

// A review yields a proposed revision (version n+1) that an exposition
// evaluation by another LLM accepts before it replaces the section; the
// text it replaced stays in the history (document.json); a revision that
// drops a result the section states is refused without an evaluation; a
// resolved comment shows in the section's footer.
func TestReviewRevisesSection(t *testing.T) {
	for _, tc := range []struct {
		name     string
		revision string
		replaced bool
	}{
		{"keeps the statement", "Great question! " + factPoints + " A shorter proof: count the flags.\n\nWant me to say more?", true},
		{"drops the statement", "A shorter proof: count the flags.", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{ReviewShare: 50})
			var evaluated []*pb.Task
			h.answer = func(tk *pb.Task, llm string) string {
				switch tk.TaskType {
				case TypeDraft:
					return "## Size\n\n" + factPoints + " It is the smallest projective plane."
				case TypeReviseSection:
					return tc.revision
				case TypeExpositionEvaluation:
					if tk.Context[ctxSection] != "" {
						evaluated = append(evaluated, tk)
					}
				}
				return simpleAnswer(tk, llm)
			}
			h.note("in-1", factPoints)
			h.runAll()
			sec := h.m.Sections()[0]
			require.Len(t, sec.Reviews, 1)
			assert.Nil(t, sec.Proposal)
			assert.Equal(t, 1, sec.RevisedFor)
			if !tc.replaced {
				assert.Empty(t, evaluated, "refused before an evaluation")
				assert.Equal(t, 1, sec.Version)
				assert.Empty(t, sec.History)
				return
			}
			require.Len(t, evaluated, 1)
			assert.NotEqual(t, sec.Reviews[0].LLM, "")
			assert.Equal(t, 2, sec.Version)
			assert.Equal(t, factPoints+" A shorter proof: count the flags.", sec.Markdown, "cleaned of filler")
			require.Len(t, sec.History, 1)
			assert.Equal(t, 1, sec.History[0].Version)
			assert.Contains(t, sec.History[0].Markdown, "smallest projective plane")
			assert.Contains(t, sec.History[0].Reason, "review of version 1")
			assert.Len(t, h.m.Document().Sections[0].History, 1, "history in document.json")

			evs, err := h.m.DecideAddComment(sec.ID, "Name the plane's order.", h.now)
			require.NoError(t, err)
			h.apply(evs)
			assert.Contains(t, h.m.DocumentMarkdown(), "comments: 0 resolved, 1 open")
			h.runAll()
			assert.Equal(t, CommentAddressed, h.m.Comments()[0].Status)
			assert.Contains(t, h.m.DocumentMarkdown(), "comments: 1 resolved, 0 open")
			assert.Len(t, h.m.Sections()[0].History, 2, "the comment's revision keeps the text it replaced")
			assert.Equal(t, snapshot(t, h.m), snapshot(t, h.replayed()), "replay rebuilds the same state")
		})
	}
}
