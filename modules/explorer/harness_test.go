package explorer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"fano/modules"
	"fano/pb"
)

// harness drives a Module as its host would, without actors: it runs
// proposed tasks one request at a time against answer functions and
// applies the decided events, keeping them for replay checks.
type harness struct {
	t   *testing.T
	m   *Module
	now time.Time
	log []*pb.ModuleEvent
	at  []time.Time
	// answer returns the answer of llm to a task's prompt.
	answer func(t *pb.Task, llm, prompt string) string
	// pick chooses the backend of a task (default: preference, else the
	// first allowed backend).
	pick func(t *pb.Task) string
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	if cfg.Backends == nil {
		cfg.Backends = []string{"chatgpt", "claude", "gemini"}
	}
	m, err := New(cfg)
	require.NoError(t, err)
	h := &harness{t: t, m: m, now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	h.answer = func(t *pb.Task, llm, prompt string) string { return simpleAnswer(t) }
	return h
}

// simpleAnswer answers each task type in its format with a fixed text.
func simpleAnswer(t *pb.Task) string {
	switch t.TaskType {
	case TypeExtraction:
		return `[{"text": "The Fano plane has exactly 7 points and 7 lines.", "tags": ["fano"], "confidence": 0.9},
		         {"text": "There is no projective plane of order 6.", "tags": ["existence"], "confidence": 0.8}]`
	case TypeReview:
		return `{"verdict": "bless", "rationale": "Correct and standard."}`
	case TypeDedupConfirm:
		return `{"duplicates": []}`
	}
	return "Some prose about " + t.Id + ". What happens next?"
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

func (h *harness) llmFor(t *pb.Task) string {
	if h.pick != nil {
		return h.pick(t)
	}
	if t.LlmPreference != "" {
		return t.LlmPreference
	}
	for _, b := range h.m.cfg.Backends {
		allowed := true
		for _, x := range t.LlmExclude {
			if x == b {
				allowed = false
			}
		}
		if allowed {
			return b
		}
	}
	return h.m.cfg.Backends[0]
}

// run runs one task to its end and returns it.
func (h *harness) run(t *pb.Task) *pb.Task {
	h.t.Helper()
	t = proto.Clone(t).(*pb.Task)
	t.LlmAssigned = h.llmFor(t)
	t.Conversation = &pb.ConversationState{Llm: t.LlmAssigned}
	for i := 0; ; i++ {
		require.Less(h.t, i, 100, "task %s does not end", t.Id)
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
		ans := h.answer(t, t.LlmAssigned, act.Prompt)
		t.Conversation.Messages = append(t.Conversation.Messages, &pb.Message{Role: "assistant", Content: ans, Llm: t.LlmAssigned})
		evs, err := h.m.DecideResponse(t, ans, h.now)
		if modules.IsValidation(err) {
			t.Attempts++
			t.Error = "validation: " + err.Error()
			if t.Attempts > 3 {
				evs, err := h.m.DecideFailure(t, "gave up: "+err.Error(), h.now)
				require.NoError(h.t, err)
				h.apply(evs)
				return t
			}
			continue
		}
		require.NoError(h.t, err)
		h.apply(evs)
	}
}

// runAll runs proposed tasks until none is left; it returns every task run.
func (h *harness) runAll() []*pb.Task {
	h.t.Helper()
	var ran []*pb.Task
	seen := map[string]bool{}
	for round := 0; ; round++ {
		require.Less(h.t, round, 500)
		var next *pb.Task
		for _, t := range h.m.Propose(h.now) {
			if !seen[t.Id] {
				next = t
				break
			}
		}
		if next == nil {
			return ran
		}
		seen[next.Id] = true
		ran = append(ran, h.run(next))
	}
}

// replayed builds a fresh module from the harness's events.
func (h *harness) replayed(cfg Config) *Module {
	h.t.Helper()
	if cfg.Backends == nil {
		cfg.Backends = h.m.cfg.Backends
	}
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

func byType(ts []*pb.Task, typ string) []*pb.Task {
	var out []*pb.Task
	for _, t := range ts {
		if t.TaskType == typ {
			out = append(out, t)
		}
	}
	return out
}

func mustSeed(t *testing.T, h *harness, text string, prio int) string {
	t.Helper()
	evs, err := h.m.DecideAddSeed(text, prio, h.now)
	require.NoError(t, err)
	h.apply(evs)
	return seedID(text)
}
