// Package probe is the smallest real module: it asks each of its questions
// in a conversation of a few turns and keeps the answers. It exercises the
// whole actor core (scheduling, quota, conversations, recovery) and runs
// the offline demo until the explorer module takes over.
package probe

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"fano/modules"
	"fano/pb"
)

// Name is the module's name.
const Name = "probe"

// TaskType is the one task type it runs.
const TaskType = "exploration"

// DefaultQuestions are asked when none are given.
var DefaultQuestions = []string{
	"How many points and lines does the Fano plane have, and why?",
	"Why is there no projective plane of order 6?",
	"How is the Fano plane related to the Hamming code [7,4,3]?",
	"What is the automorphism group of the Fano plane?",
	"What makes a projective plane non-Desarguesian?",
}

// Config shapes a probe.
type Config struct {
	Questions []string
	Turns     int    // answers per question (default 3)
	TaskType  string // default "exploration"
	// DeepQuestions: the first n questions need deep mode.
	DeepQuestions int
	// NoPropose: tasks come only from Submit (benchmarks submit their own).
	NoPropose bool
}

// Module asks questions and records answers. Not safe for concurrent use.
type Module struct {
	cfg   Config
	state state
}

type state struct {
	Answers map[string][]string `json:"answers"` // task id -> answer per turn
	Done    map[string]bool     `json:"done"`
	Failed  map[string]string   `json:"failed"`
}

// New returns a probe with no answers yet.
func New(cfg Config) *Module {
	if len(cfg.Questions) == 0 && !cfg.NoPropose {
		cfg.Questions = DefaultQuestions
	}
	if cfg.Turns <= 0 {
		cfg.Turns = 3
	}
	if cfg.TaskType == "" {
		cfg.TaskType = TaskType
	}
	return &Module{cfg: cfg, state: newState()}
}

func newState() state {
	return state{Answers: map[string][]string{}, Done: map[string]bool{}, Failed: map[string]string{}}
}

func (m *Module) Name() string        { return Name }
func (m *Module) TaskTypes() []string { return []string{m.cfg.TaskType} }

func (m *Module) key(i int) string {
	return modules.TaskKey(Name, m.cfg.TaskType, fmt.Sprintf("q%04d", i))
}

// Propose offers one task per question that is not finished.
func (m *Module) Propose(now time.Time) []*pb.Task {
	if m.cfg.NoPropose {
		return nil
	}
	var out []*pb.Task
	for i := range m.cfg.Questions {
		id := m.key(i)
		if m.state.Done[id] || m.state.Failed[id] != "" {
			continue
		}
		out = append(out, &pb.Task{
			Id: id, Module: Name, TaskType: m.cfg.TaskType, Subject: fmt.Sprintf("q%04d", i),
			MaxRequests:      int32(m.cfg.Turns),
			RequiresDeepMode: i < m.cfg.DeepQuestions,
			Context:          map[string]string{"question": m.cfg.Questions[i]},
		})
	}
	return out
}

// NextAction asks the question, then follow-ups, until Turns answers.
func (m *Module) NextAction(t *pb.Task) (modules.Action, error) {
	n := len(m.state.Answers[t.Id])
	if n >= m.cfg.Turns {
		return modules.Action{Kind: modules.ActionDone}, nil
	}
	q := t.Context["question"]
	if q == "" {
		return modules.Action{}, fmt.Errorf("task %s: no question in its context", t.Id)
	}
	prompt := q
	if n > 0 {
		prompt = fmt.Sprintf("Follow-up %d on %q: go one step deeper and give a precise statement.", n, q)
	}
	return modules.Action{Kind: modules.ActionLLMRequest, Prompt: prompt}, nil
}

type answerEvent struct {
	Task string `json:"task"`
	Turn int    `json:"turn"`
	Text string `json:"text"`
}

// DecideResponse records a non-empty answer; an empty one fails validation.
func (m *Module) DecideResponse(t *pb.Task, answer string, now time.Time) ([]*pb.ModuleEvent, error) {
	if answer == "" {
		return nil, &modules.ValidationError{TaskID: t.Id, Phase: "rules", Msg: "empty answer", Raw: answer}
	}
	data, err := encodeAnswer(answerEvent{Task: t.Id, Turn: len(m.state.Answers[t.Id]), Text: answer})
	if err != nil {
		return nil, err
	}
	return []*pb.ModuleEvent{{Type: "answer_recorded", Data: data, TaskId: t.Id}}, nil
}

// DecideResponseEnd is DecideResponse, and says whether the answer is the
// task's last turn: then the task is done once it is recorded.
func (m *Module) DecideResponseEnd(t *pb.Task, answer string, now time.Time) ([]*pb.ModuleEvent, bool, []*pb.ModuleEvent, error) {
	evs, err := m.DecideResponse(t, answer, now)
	if err != nil || len(m.state.Answers[t.Id])+1 < m.cfg.Turns {
		return evs, false, nil, err
	}
	end, cerr := m.DecideCompletion(t, now)
	if cerr != nil {
		return evs, false, nil, nil // not sure: NextAction decides, as without this
	}
	return evs, true, end, nil
}

func (m *Module) DecideCompletion(t *pb.Task, now time.Time) ([]*pb.ModuleEvent, error) {
	if m.state.Done[t.Id] {
		return nil, nil
	}
	return []*pb.ModuleEvent{{Type: "question_done", TaskId: t.Id}}, nil
}

func (m *Module) DecideFailure(t *pb.Task, reason string, now time.Time) ([]*pb.ModuleEvent, error) {
	return []*pb.ModuleEvent{{Type: "question_failed", TaskId: t.Id, Data: []byte(reason)}}, nil
}

// Apply is idempotent: an answer for a turn already recorded is ignored.
func (m *Module) Apply(e *pb.ModuleEvent, at time.Time) error {
	switch e.Type {
	case "answer_recorded":
		a, ok := decodeAnswer(e.Data)
		if !ok {
			if err := json.Unmarshal(e.Data, &a); err != nil {
				return fmt.Errorf("probe: answer_recorded of task %s: %w", e.TaskId, err)
			}
		}
		if a.Turn == len(m.state.Answers[a.Task]) {
			m.state.Answers[a.Task] = append(m.state.Answers[a.Task], a.Text)
		}
	case "question_done":
		m.state.Done[e.TaskId] = true
	case "question_failed":
		m.state.Failed[e.TaskId] = string(e.Data)
	default:
		return fmt.Errorf("probe: unknown event type %q", e.Type)
	}
	return nil
}

func (m *Module) Snapshot() ([]byte, error) { return json.Marshal(m.state) }

func (m *Module) Restore(data []byte) error {
	st := newState()
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("probe: restore: %w", err)
	}
	m.state = st
	return nil
}

// Answers returns the recorded answers by task id (a copy).
func (m *Module) Answers() map[string][]string {
	out := make(map[string][]string, len(m.state.Answers))
	for k, v := range m.state.Answers {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// Finished lists the finished task ids, sorted.
func (m *Module) Finished() []string {
	var out []string
	for id := range m.state.Done {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}
