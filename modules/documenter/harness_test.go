package documenter

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"fano/modules"
	"fano/modules/dedup"
	"fano/pb"
)

// harness drives a Module as its host would, without actors: it runs
// proposed tasks one request at a time against an answer function and
// applies the decided events, keeping them for replay checks.
type harness struct {
	t      *testing.T
	m      *Module
	cfg    Config
	now    time.Time
	log    []*pb.ModuleEvent
	at     []time.Time
	answer func(t *pb.Task, llm string) string
	ran    map[string]bool
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	if cfg.Backends == nil {
		cfg.Backends = []string{"chatgpt", "claude", "gemini"}
	}
	if cfg.Checker == nil {
		cfg.Checker = dedup.New(dedup.Config{Threshold: 0.6, BorderlineLow: 0.4})
	}
	if cfg.Title == "" {
		cfg.Title = "Finite Projective Planes"
	}
	m, err := New(cfg)
	require.NoError(t, err)
	return &harness{t: t, m: m, cfg: cfg, now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), answer: simpleAnswer, ran: map[string]bool{}}
}

// simpleAnswer answers each task type in its format.
func simpleAnswer(t *pb.Task, _ string) string {
	switch t.TaskType {
	case TypeMathEvaluation, TypeExpositionEvaluation:
		return "```json\n{\"verdict\": \"bless\", \"rationale\": \"Correct and clear.\"}\n```"
	case TypeDraft:
		return "## On " + t.Context[ctxInsight] + "\n\nA paragraph about " + t.Context[ctxInsight] + "."
	case TypeAddressComment:
		return "The revised section, addressing the comment."
	case TypeReviewSection:
		return "The section is sound; one proof could be shorter."
	case TypeReviseSection:
		return "A revised section about " + t.Context[ctxSection] + ", with a shorter proof."
	}
	return "?"
}

func (h *harness) apply(evs []*pb.ModuleEvent) {
	h.t.Helper()
	for _, e := range evs {
		require.NoError(h.t, h.m.Apply(e, h.now), "apply %s", e.Type)
		h.log = append(h.log, proto.Clone(e).(*pb.ModuleEvent))
		h.at = append(h.at, h.now)
	}
	h.now = h.now.Add(time.Second)
}

// llmFor picks the first backend the task allows.
func (h *harness) llmFor(t *pb.Task) string {
	if t.LlmPreference != "" {
		return t.LlmPreference
	}
	for _, b := range h.cfg.Backends {
		if !slices.Contains(t.LlmExclude, b) {
			return b
		}
	}
	return h.cfg.Backends[0]
}

// run runs one task to its end.
func (h *harness) run(t *pb.Task) *pb.Task {
	h.t.Helper()
	h.ran[t.Id] = true
	t = proto.Clone(t).(*pb.Task)
	t.LlmAssigned = h.llmFor(t)
	t.Conversation = &pb.ConversationState{Llm: t.LlmAssigned}
	for i := 0; ; i++ {
		require.Less(h.t, i, 50, "task %s does not end", t.Id)
		act, err := h.m.NextAction(t)
		require.NoError(h.t, err)
		if act.Kind == modules.ActionDone || t.RequestCount >= t.MaxRequests {
			evs, err := h.m.DecideCompletion(t, h.now)
			require.NoError(h.t, err)
			h.apply(evs)
			return t
		}
		t.RequestCount++
		t.Conversation.Messages = append(t.Conversation.Messages, &pb.Message{Role: "user", Content: act.Prompt})
		ans := h.answer(t, t.LlmAssigned)
		t.Conversation.Messages = append(t.Conversation.Messages, &pb.Message{Role: "assistant", Content: ans})
		evs, err := h.m.DecideResponse(t, ans, h.now)
		if modules.IsValidation(err) {
			continue
		}
		require.NoError(h.t, err)
		h.apply(evs)
	}
}

// next is the first proposed task not run yet (nil: none).
func (h *harness) next() *pb.Task {
	for _, t := range h.m.Propose(h.now) {
		if !h.ran[t.Id] {
			return t
		}
	}
	return nil
}

// runAll runs proposed tasks until none is left; it returns them.
func (h *harness) runAll() []*pb.Task {
	h.t.Helper()
	var out []*pb.Task
	for i := 0; ; i++ {
		require.Less(h.t, i, 5000)
		t := h.next()
		if t == nil {
			return out
		}
		out = append(out, h.run(t))
	}
}

func (h *harness) note(id, text string, tags ...string) {
	h.t.Helper()
	evs, err := h.m.DecideNoteBlessed(id, text, tags, "What is the Fano plane?", h.now)
	require.NoError(h.t, err)
	h.apply(evs)
}

// replayed builds a fresh module (with a fresh checker) from the events.
func (h *harness) replayed() *Module {
	h.t.Helper()
	cfg := h.cfg
	cfg.Checker = dedup.New(dedup.Config{Threshold: 0.6, BorderlineLow: 0.4})
	m, err := New(cfg)
	require.NoError(h.t, err)
	for i, e := range h.log {
		require.NoError(h.t, m.Apply(e, h.at[i]), "replay %d %s", i, e.Type)
	}
	return m
}

func snapshot(t *testing.T, m *Module) string {
	t.Helper()
	b, err := m.Snapshot()
	require.NoError(t, err)
	return string(b)
}
