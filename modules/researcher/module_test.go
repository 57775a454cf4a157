package researcher

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"fano/modules"
	"fano/pb"
)

// harness runs proposed tasks against fixed answers and keeps the events.
type harness struct {
	t   *testing.T
	m   *Module
	cfg Config
	now time.Time
	log []*pb.ModuleEvent
	at  []time.Time
	ran map[string]bool
}

func newHarness(t *testing.T, cfg Config) *harness {
	m, err := New(cfg)
	require.NoError(t, err)
	return &harness{t: t, m: m, cfg: cfg, now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), ran: map[string]bool{}}
}

func answer(t *pb.Task) string {
	switch t.TaskType {
	case TypeEvaluateSource:
		return "```json\n{\"verdict\": \"bless\", \"rationale\": \"Relevant.\"}\n```"
	case TypeExtractContent:
		return "The source proves that the Fano plane is the unique projective plane of order 2."
	case TypeSynthesizeFindings:
		return "The Fano plane is unique. Is every projective plane of prime order Desarguesian?"
	case TypeGenerateQuestions:
		return "Open questions:\n1. Which orders admit a projective plane?\n2. **How many** Latin squares of order 10 are orthogonal?\n3. A third one?"
	}
	return ""
}

func (h *harness) apply(evs []*pb.ModuleEvent) {
	for _, e := range evs {
		require.NoError(h.t, h.m.Apply(e, h.now))
		h.log = append(h.log, proto.Clone(e).(*pb.ModuleEvent))
		h.at = append(h.at, h.now)
	}
	h.now = h.now.Add(time.Second)
}

func (h *harness) runAll() {
	for i := 0; ; i++ {
		require.Less(h.t, i, 100)
		var next *pb.Task
		for _, t := range h.m.Propose(h.now) {
			if !h.ran[t.Id] {
				next = t
				break
			}
		}
		if next == nil {
			return
		}
		h.ran[next.Id] = true
		t := proto.Clone(next).(*pb.Task)
		t.LlmAssigned = "chatgpt"
		for {
			act, err := h.m.NextAction(t)
			require.NoError(h.t, err)
			if act.Kind == modules.ActionDone {
				break
			}
			assert.NotEmpty(h.t, act.Prompt)
			evs, err := h.m.DecideResponse(t, answer(t), h.now)
			require.NoError(h.t, err)
			h.apply(evs)
		}
	}
}

func (h *harness) replayed() *Module {
	m, err := New(h.cfg)
	require.NoError(h.t, err)
	for i, e := range h.log {
		require.NoError(h.t, m.Apply(e, h.at[i]))
	}
	return m
}

func snap(t *testing.T, m *Module) string {
	b, err := m.Snapshot()
	require.NoError(t, err)
	return string(b)
}

func writeSources(t *testing.T, files map[string]string) string {
	dir := t.TempDir()
	for name, text := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	return dir
}

// A source file goes through evaluation, extraction and synthesis to a
// finding whose question awaits delivery as a seed; other files are
// ignored; replay rebuilds the same state.
func TestSourceBecomesFinding(t *testing.T) {
	dir := writeSources(t, map[string]string{
		"fano.md":   "# The Fano plane\n\nThe Fano plane is the projective plane of order 2.",
		"notes.txt": "Projective planes of order n have n^2+n+1 points.",
		"image.png": "not a source",
	})
	srcs, problems, err := LoadSources(dir)
	require.NoError(t, err)
	assert.Empty(t, problems)
	require.Len(t, srcs, 2)
	assert.Equal(t, "fano.md", srcs[0].Name)

	h := newHarness(t, Config{Sources: srcs})
	h.runAll()
	fs := h.m.Undelivered()
	require.Len(t, fs, 2)
	assert.Equal(t, "Is every projective plane of prime order Desarguesian?", fs[0].Question)
	for _, s := range h.m.Sources() {
		assert.Equal(t, SourceDone, s.Status)
	}
	evs, err := h.m.DecideDelivered(fs[0].ID)
	require.NoError(t, err)
	h.apply(evs)
	assert.Len(t, h.m.Undelivered(), 1)
	evs, err = h.m.DecideDelivered(fs[0].ID)
	require.NoError(t, err)
	assert.Empty(t, evs, "delivered once")
	_, err = h.m.DecideDelivered("f-nope")
	assert.ErrorContains(t, err, "f-nope")
	assert.Equal(t, snap(t, h.m), snap(t, h.replayed()))
}

// Once the document has GapSections sections, one generate_questions
// round asks for its gaps; each question (at most MaxQuestions) is a
// finding.
func TestGapQuestions(t *testing.T) {
	h := newHarness(t, Config{})
	for i, title := range []string{"The size of the Fano plane", "Its automorphisms"} {
		evs, err := h.m.DecideNoteSection(string(rune('a'+i)), title)
		require.NoError(t, err)
		h.apply(evs)
	}
	assert.Empty(t, h.m.Propose(h.now), "too few sections")
	evs, err := h.m.DecideNoteSection("c", "Order 6")
	require.NoError(t, err)
	h.apply(evs)
	evs, err = h.m.DecideNoteSection("c", "Order 6")
	require.NoError(t, err)
	assert.Empty(t, evs, "a known section decides nothing")
	h.runAll()
	var qs []string
	for _, f := range h.m.Undelivered() {
		qs = append(qs, f.Question)
	}
	assert.Equal(t, []string{"Which orders admit a projective plane?", "How many Latin squares of order 10 are orthogonal?"}, qs)
	assert.Empty(t, h.m.Propose(h.now), "one round by default")
	assert.Equal(t, snap(t, h.m), snap(t, h.replayed()))
}

// Bad input: a missing sources directory is an error naming it; an
// unreadable, empty or non-text file is a problem naming it while the
// other files still load.
func TestSourcesBadInput(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	_, _, err := LoadSources(missing)
	require.Error(t, err)
	assert.Contains(t, err.Error(), missing)
	assert.Contains(t, err.Error(), "researcher.sources_dir")

	dir := writeSources(t, map[string]string{
		"good.md":   "The Fano plane has 7 points.",
		"empty.txt": "  \n",
		"bin.md":    "\xff\xfe\x00bad",
	})
	require.NoError(t, os.Symlink(filepath.Join(dir, "gone"), filepath.Join(dir, "broken.md")))
	srcs, problems, err := LoadSources(dir)
	require.NoError(t, err)
	require.Len(t, srcs, 1)
	assert.Equal(t, "good.md", srcs[0].Name)
	kinds := map[string]string{}
	for _, p := range problems {
		kinds[filepath.Base(p.ID)] = p.Kind
		assert.Contains(t, p.Detail, p.ID)
	}
	assert.Equal(t, map[string]string{"broken.md": ProblemSourceUnreadable, "empty.txt": ProblemSourceEmpty, "bin.md": ProblemSourceNotUTF8}, kinds)

	m, err := New(Config{Sources: srcs, Problems: problems})
	require.NoError(t, err)
	assert.Len(t, m.Verify(), 3)
	assert.Len(t, m.Propose(time.Now()), 1, "the good source is still researched")
}

// A rejected source is not researched further; a failed step fails the
// source with its reason.
func TestRejectedAndFailedSources(t *testing.T) {
	srcs := []Source{{ID: "src-a", Name: "a.md", Text: "spam"}, {ID: "src-b", Name: "b.md", Text: "text"}}
	h := newHarness(t, Config{Sources: srcs})
	ts := h.m.Propose(h.now)
	require.Len(t, ts, 2)
	ts[0].LlmAssigned = "claude"
	evs, err := h.m.DecideResponse(ts[0], `{"verdict": "reject", "rationale": "spam"}`, h.now)
	require.NoError(t, err)
	h.apply(evs)
	evs, err = h.m.DecideFailure(ts[1], "backend down", h.now)
	require.NoError(t, err)
	h.apply(evs)
	st := h.m.Sources()
	assert.Equal(t, SourceIrrelevant, st[0].Status)
	assert.Equal(t, SourceFailed, st[1].Status)
	assert.Contains(t, st[1].Reason, "backend down")
	assert.Empty(t, h.m.Propose(h.now))
	_, err = h.m.DecideResponse(ts[0], "no json", h.now)
	assert.NoError(t, err, "an answer for a source already judged decides nothing")
}
