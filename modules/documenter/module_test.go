package documenter

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/pb"
)

const (
	factPoints = "The Fano plane has exactly 7 points and 7 lines."
	factGroup  = "The automorphism group of the Fano plane is PSL(2,7), of order 168."
	factOrder6 = "There is no projective plane of order 6, by the Bruck–Ryser theorem."
)

// A blessed insight goes through the math panel (three seats on three
// different backends), a draft and an exposition evaluation into a new
// section; DOCUMENT.md has the title, a table of contents and the
// section under its stable anchor; replaying the events rebuilds the
// same state.
func TestInsightBecomesSection(t *testing.T) {
	h := newHarness(t, Config{})
	h.note("in-1", factPoints, "fano_plane")
	ran := h.runAll()

	var llms []string
	for _, tk := range ran {
		if tk.TaskType == TypeMathEvaluation {
			llms = append(llms, tk.LlmAssigned)
		}
	}
	assert.ElementsMatch(t, []string{"chatgpt", "claude", "gemini"}, llms, "one seat per backend")

	secs := h.m.Sections()
	require.Len(t, secs, 1)
	assert.Equal(t, sectionID("in-1"), secs[0].ID)
	assert.Equal(t, "On in-1", secs[0].Title)
	assert.Equal(t, []string{"in-1"}, secs[0].Insights)
	o := h.m.Opportunities()[0]
	assert.Equal(t, StatusIncorporated, o.Status)
	assert.Equal(t, secs[0].ID, o.Section)

	doc := h.m.DocumentMarkdown()
	assert.True(t, strings.HasPrefix(doc, "# Finite Projective Planes\n"), doc)
	assert.Contains(t, doc, "## Contents")
	assert.Contains(t, doc, "1. [On in-1](#"+secs[0].ID+")")
	assert.Contains(t, doc, `<a id="`+secs[0].ID+`"></a>`)
	assert.Contains(t, doc, "A paragraph about in-1.")

	js, err := h.m.Export(DocumentJSON)
	require.NoError(t, err)
	var f DocumentFile
	require.NoError(t, json.Unmarshal(js, &f))
	assert.Equal(t, "Finite Projective Planes", f.Title)
	require.Len(t, f.Sections, 1)
	assert.Equal(t, []string{"in-1"}, f.Sections[0].Insights)

	assert.Equal(t, snapshot(t, h.m), snapshot(t, h.replayed()), "replay rebuilds the same state")
	assert.Empty(t, h.m.Verify())
}

// The same insight arriving twice (the same id again, or the same
// statement under another id) yields one section.
func TestSameInsightTwiceYieldsOneSection(t *testing.T) {
	h := newHarness(t, Config{})
	h.note("in-1", factPoints)
	evs, err := h.m.DecideNoteBlessed("in-1", factPoints, nil, "", h.now)
	require.NoError(t, err)
	assert.Empty(t, evs, "an insight already known decides nothing")
	h.runAll()

	// Arriving again after incorporation, under another id and wording.
	h.note("in-2", "The Fano plane has exactly seven points and seven lines.")
	h.runAll()
	// Two copies arriving together, before either is incorporated.
	evs1, err := h.m.DecideNoteBlessed("in-3", factGroup, nil, "", h.now)
	require.NoError(t, err)
	evs2, err := h.m.DecideNoteBlessed("in-4", factGroup, nil, "", h.now) // the first is not applied yet
	require.NoError(t, err)
	h.apply(evs1)
	h.apply(evs2)
	h.runAll()

	secs := h.m.Sections()
	require.Len(t, secs, 2, "one section per distinct statement")
	byID := map[string]Opportunity{}
	for _, o := range h.m.Opportunities() {
		byID[o.Insight] = o
	}
	assert.Equal(t, StatusDuplicate, byID["in-2"].Status)
	assert.Equal(t, sectionID("in-1")+"/in-1", byID["in-2"].DuplicateOf)
	assert.Equal(t, StatusDuplicate, byID["in-4"].Status)
	assert.Equal(t, "in-3", byID["in-4"].DuplicateOf)
	// The section's statements are in the shared checker for the explorer.
	mt := h.cfg.Checker.Match(factPoints)
	assert.True(t, mt.Duplicate)
	assert.Equal(t, KindSection, mt.Kind)
	assert.Equal(t, snapshot(t, h.m), snapshot(t, h.replayed()))
}

// An insight close to a section's (borderline similar) extends that
// section instead of founding a new one.
func TestBorderlineInsightExtendsSection(t *testing.T) {
	h := newHarness(t, Config{})
	h.note("in-1", factPoints)
	h.runAll()
	h.note("in-2", "The Fano plane has exactly 7 points, and every line of it has 3 points.")
	h.runAll()
	secs := h.m.Sections()
	require.Len(t, secs, 1)
	assert.Equal(t, []string{"in-1", "in-2"}, secs[0].Insights)
	assert.Equal(t, 2, secs[0].Version)
}

// Bad input: a comment on a section that does not exist, or an empty
// comment, is an error naming it, and nothing is decided.
func TestCommentBadInput(t *testing.T) {
	h := newHarness(t, Config{})
	_, err := h.m.DecideAddComment("sec-nope", "Please add an example.", h.now)
	require.ErrorIs(t, err, ErrUnknownSection)
	assert.Contains(t, err.Error(), `"sec-nope"`)

	h.note("in-1", factPoints)
	h.runAll()
	sec := h.m.SectionIDs()[0]
	before := snapshot(t, h.m)
	_, err = h.m.DecideAddComment("sec-nope", "Please add an example.", h.now)
	require.ErrorIs(t, err, ErrUnknownSection)
	assert.Contains(t, err.Error(), "sec-nope")
	assert.Contains(t, err.Error(), sec, "the error lists the sections there are")
	_, err = h.m.DecideAddComment(sec, "   ", h.now)
	require.ErrorIs(t, err, ErrEmptyComment)
	assert.Contains(t, err.Error(), sec)
	assert.Equal(t, before, snapshot(t, h.m), "state unchanged")
}

// A comment is proposed ahead of pending incorporation work, at the
// address_comment priority, and rewrites its section.
func TestCommentProposedFirstAndAddressed(t *testing.T) {
	h := newHarness(t, Config{})
	h.note("in-1", factPoints)
	h.runAll()
	sec := h.m.SectionIDs()[0]
	h.note("in-2", factGroup)
	h.note("in-3", factOrder6)
	evs, err := h.m.DecideAddComment(sec, "Please add an example.", h.now)
	require.NoError(t, err)
	h.apply(evs)

	props := h.m.Propose(h.now)
	require.NotEmpty(t, props)
	assert.Equal(t, TypeAddressComment, props[0].TaskType)
	assert.Equal(t, int32(priorityComment), props[0].BasePriority)
	for _, p := range props[1:] {
		assert.Less(t, p.BasePriority, props[0].BasePriority, p.Id)
	}
	h.run(props[0])
	c := h.m.Comments()[0]
	assert.Equal(t, CommentAddressed, c.Status)
	assert.Equal(t, "The revised section, addressing the comment.", h.m.Sections()[0].Markdown)
	assert.Equal(t, 2, h.m.Sections()[0].Version)
	h.runAll()
	assert.Equal(t, snapshot(t, h.m), snapshot(t, h.replayed()))
}

// Over a simulated day with an insight blessed every 20 minutes, section
// reviews stay at work_allocation.review_existing (30 %) of the recent
// documenter work, and they run in deep mode.
func TestReviewAllocationOverADay(t *testing.T) {
	h := newHarness(t, Config{ReviewShare: 30, DeepBackends: []string{"gemini"}})
	start := h.now
	n := 0
	deep, reviews := 0, 0
	for h.now.Sub(start) < 24*time.Hour {
		n++
		// Distinct statements: each founds or extends a section.
		h.note(fmt.Sprintf("in-%03d", n), fmt.Sprintf("Statement number %d about structure %d with property p%d holds.", n, n*7919, n*104729))
		for _, tk := range h.runAll() {
			if tk.TaskType == TypeReviewSection {
				reviews++
				if tk.RequiresDeepMode {
					deep++
				}
			}
		}
		h.now = h.now.Add(20 * time.Minute)
	}
	nw, rv := h.m.RecentWork(h.now)
	share := float64(rv) / float64(nw+rv)
	t.Logf("%d insights; recent work: %d new, %d reviews (%.1f %%)", n, nw, rv, 100*share)
	assert.Greater(t, nw, 50)
	assert.InDelta(t, 0.30, share, 0.03, "reviews are 30 %% of recent work")
	assert.Positive(t, reviews)
	assert.Equal(t, reviews, deep, "every review runs in deep mode")
}

// Failures: a failed panel seat abstains (the panel still decides); a
// failed draft fails the opportunity with its reason; a failed comment is
// marked failed.
func TestFailures(t *testing.T) {
	h := newHarness(t, Config{})
	h.note("in-1", factPoints)
	seat := h.next()
	require.Equal(t, TypeMathEvaluation, seat.TaskType)
	h.ran[seat.Id] = true
	evs, err := h.m.DecideFailure(seat, "backend down", h.now)
	require.NoError(t, err)
	h.apply(evs)
	o := h.m.Opportunities()[0]
	require.Len(t, o.Evaluations, 1)
	assert.Equal(t, VerdictAbstain, o.Evaluations[0].Verdict)

	for tk := h.next(); tk != nil && tk.TaskType == TypeMathEvaluation; tk = h.next() {
		h.run(tk)
	}
	draft := h.next()
	require.NotNil(t, draft)
	require.Equal(t, TypeDraft, draft.TaskType)
	h.ran[draft.Id] = true
	evs, err = h.m.DecideFailure(draft, "gave up", h.now)
	require.NoError(t, err)
	h.apply(evs)
	o = h.m.Opportunities()[0]
	assert.Equal(t, StatusFailed, o.Status)
	assert.Contains(t, o.Reason, "gave up")
	assert.Empty(t, h.m.Sections())
	assert.Equal(t, 0, h.m.Backlog())
}

// An unusable verdict is a validation error (retried), not an event.
func TestBadVerdictIsValidationError(t *testing.T) {
	h := newHarness(t, Config{})
	h.note("in-1", factPoints)
	tk := h.next()
	tk.LlmAssigned = "chatgpt"
	_, err := h.m.DecideResponse(tk, "I think it is fine.", h.now)
	require.Error(t, err)
	assert.True(t, isValidation(err))
	_, err = h.m.DecideResponse(tk, `{"verdict": "maybe"}`, h.now)
	assert.True(t, isValidation(err))
}

func isValidation(err error) bool {
	var v interface{ Error() string }
	return errors.As(err, &v) && strings.Contains(err.Error(), "validation")
}

// Apply is idempotent: applying the whole log twice changes nothing, and
// an insight is incorporated once.
func TestApplyTwiceIsIdempotent(t *testing.T) {
	h := newHarness(t, Config{})
	h.note("in-1", factPoints)
	h.note("in-2", factGroup)
	h.runAll()
	before := snapshot(t, h.m)
	for i, e := range h.log {
		require.NoError(t, h.m.Apply(e, h.at[i]))
	}
	assert.Equal(t, before, snapshot(t, h.m))
	for _, s := range h.m.Sections() {
		assert.Len(t, s.Insights, 1)
	}
	var inc []*pb.ModuleEvent
	for _, e := range h.log {
		if e.Type == evIncorporated {
			inc = append(inc, e)
		}
	}
	assert.Len(t, inc, 2)
}
