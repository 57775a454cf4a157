package researcher

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"fano/modules"
	"fano/pb"
)

// Task keys:
//
//	researcher/evaluate_source/<source>
//	researcher/extract_content/<source>
//	researcher/synthesize_findings/<source>
//	researcher/generate_questions/g<round>
const (
	ctxSource = "source"
	ctxRound  = "round"
)

// Base priorities (docs/architecture.md, Priority).
var basePriority = map[string]int32{
	TypeGenerateQuestions: 35, TypeEvaluateSource: 45, TypeExtractContent: 40, TypeSynthesizeFindings: 50,
}

var done = modules.Action{Kind: modules.ActionDone}

func (m *Module) task(typ, subject string, ctx map[string]string) *pb.Task {
	return &pb.Task{
		Id: modules.TaskKey(Name, typ, subject), Module: Name, TaskType: typ, Subject: subject,
		Context: ctx, MaxRequests: int32(max(1, m.cfg.MaxRequests(typ))), BasePriority: basePriority[typ],
	}
}

// DecideNoteSection records a section of the document (its title is what
// generate_questions looks for gaps in); a section known with the same
// title decides nothing.
func (m *Module) DecideNoteSection(id, title string) ([]*pb.ModuleEvent, error) {
	id, title = strings.TrimSpace(id), strings.TrimSpace(title)
	if id == "" {
		return nil, fmt.Errorf("researcher: section with an empty id (title %q)", title)
	}
	if t, ok := m.st.Sections[id]; ok && t == title {
		return nil, nil
	}
	return []*pb.ModuleEvent{event(evSection, "", sectionData{ID: id, Title: title})}, nil
}

// DecideDelivered records that a finding's question became an explorer
// seed (or was one already).
func (m *Module) DecideDelivered(finding string) ([]*pb.ModuleEvent, error) {
	f := m.st.Findings[finding]
	if f == nil {
		return nil, fmt.Errorf("researcher: unknown finding %q", finding)
	}
	if f.Delivered {
		return nil, nil
	}
	return []*pb.ModuleEvent{event(evDelivered, "", deliveredData{Finding: finding})}, nil
}

// Propose returns the next step of each source, and a generate_questions
// round once the document has grown enough for it.
func (m *Module) Propose(time.Time) []*pb.Task {
	var out []*pb.Task
	for _, id := range sortedKeys(m.sources) {
		ctx := map[string]string{ctxSource: id}
		switch status := m.status(id); status {
		case SourceNew:
			out = append(out, m.task(TypeEvaluateSource, id, ctx))
		case SourceRelevant:
			out = append(out, m.task(TypeExtractContent, id, ctx))
		case SourceExtracted:
			out = append(out, m.task(TypeSynthesizeFindings, id, ctx))
		}
	}
	if r := m.nextRound(); r > 0 {
		round := "g" + strconv.Itoa(r)
		out = append(out, m.task(TypeGenerateQuestions, round, map[string]string{ctxRound: round}))
	}
	return out
}

// nextRound is the generate_questions round due now, 0 if none.
func (m *Module) nextRound() int {
	r := len(m.st.Rounds) + 1
	if m.cfg.GapRounds < 0 || r > m.cfg.GapRounds || len(m.st.Sections) < r*m.cfg.GapSections {
		return 0
	}
	return r
}

func (m *Module) status(id string) string {
	if s := m.st.Sources[id]; s != nil {
		return s.Status
	}
	return SourceNew
}

// NextAction says what a running task does next.
func (m *Module) NextAction(t *pb.Task) (modules.Action, error) {
	if t.TaskType == TypeGenerateQuestions {
		if _, ok := m.st.Rounds[t.Context[ctxRound]]; ok {
			return done, nil
		}
		p, err := m.prompts.render(promptQuestions, promptData{Sections: m.sectionTitles(), Max: m.cfg.MaxQuestions})
		return ask(p), err
	}
	src, want, err := m.sourceTarget(t)
	if err != nil || m.status(src.ID) != want {
		return done, err
	}
	d := promptData{Name: src.Name, Source: clip(MaxSourceChars, src.Text)}
	if s := m.st.Sources[src.ID]; s != nil {
		d.Extract = s.Extract
	}
	name := map[string]string{TypeEvaluateSource: promptEvaluate, TypeExtractContent: promptExtract, TypeSynthesizeFindings: promptSynthesize}[t.TaskType]
	p, err := m.prompts.render(name, d)
	return ask(p), err
}

func ask(p string) modules.Action { return modules.Action{Kind: modules.ActionLLMRequest, Prompt: p} }

// sourceTarget is the task's source and the status its step starts from.
func (m *Module) sourceTarget(t *pb.Task) (Source, string, error) {
	src, ok := m.sources[t.Context[ctxSource]]
	if !ok {
		return Source{}, "", fmt.Errorf("researcher: task %s: unknown source %q (is it still in researcher.sources_dir?)", t.Id, t.Context[ctxSource])
	}
	switch t.TaskType {
	case TypeEvaluateSource:
		return src, SourceNew, nil
	case TypeExtractContent:
		return src, SourceRelevant, nil
	case TypeSynthesizeFindings:
		return src, SourceExtracted, nil
	}
	return Source{}, "", fmt.Errorf("researcher: task %s: unknown task type %q", t.Id, t.TaskType)
}

func (m *Module) sectionTitles() []string {
	var out []string
	for _, id := range sortedKeys(m.st.Sections) {
		out = append(out, m.st.Sections[id])
	}
	return out
}

func llmOf(t *pb.Task) string {
	if t.GetLlmAssigned() != "" {
		return t.GetLlmAssigned()
	}
	return t.GetConversation().GetLlm()
}

func invalid(t *pb.Task, answer, msg string) error {
	return &modules.ValidationError{TaskID: t.Id, Phase: "rules", Msg: msg, Raw: answer}
}

// DecideResponse turns an answer into events.
func (m *Module) DecideResponse(t *pb.Task, answer string, _ time.Time) ([]*pb.ModuleEvent, error) {
	llm := llmOf(t)
	text := strings.TrimSpace(answer)
	if t.TaskType == TypeGenerateQuestions {
		round := t.Context[ctxRound]
		if _, ok := m.st.Rounds[round]; ok {
			return nil, nil
		}
		qs := parseQuestions(text, m.cfg.MaxQuestions)
		if len(qs) == 0 {
			return nil, invalid(t, answer, "no numbered questions in the answer")
		}
		d := questionsData{Round: round, Task: t.Id, LLM: llm, Sections: m.sectionTitles(), Questions: qs}
		for _, q := range qs {
			d.Findings = append(d.Findings, "f-"+shortHash(round, q))
		}
		return []*pb.ModuleEvent{event(evQuestions, t.Id, d)}, nil
	}
	src, want, err := m.sourceTarget(t)
	if err != nil || m.status(src.ID) != want {
		return nil, err
	}
	switch t.TaskType {
	case TypeEvaluateSource:
		v, verr := parseVerdict(t, answer)
		if verr != nil {
			return nil, verr
		}
		return []*pb.ModuleEvent{event(evEvaluated, t.Id, evaluatedData{Source: src.ID, Name: src.Name, Task: t.Id, LLM: llm, Verdict: v.Verdict, Rationale: v.Rationale})}, nil
	case TypeExtractContent:
		if text == "" {
			return nil, invalid(t, answer, "empty extract")
		}
		return []*pb.ModuleEvent{event(evExtracted, t.Id, extractedData{Source: src.ID, Task: t.Id, LLM: llm, Text: text})}, nil
	default: // synthesize_findings
		if text == "" {
			return nil, invalid(t, answer, "empty synthesis")
		}
		q := lastQuestion(text)
		if q == "" {
			q = "What follows from this finding of " + src.Name + ": " + firstSentence(text)
		}
		return []*pb.ModuleEvent{event(evSynthesized, t.Id, synthesizedData{Source: src.ID, Finding: "f-" + shortHash(src.ID), Task: t.Id, LLM: llm, Text: text, Question: q})}, nil
	}
}

// DecideCompletion: a source step that ended without its result fails
// the source (reason kept); a question round without questions is retried
// by nobody (it stays due, under the same task key: done).
func (m *Module) DecideCompletion(t *pb.Task, now time.Time) ([]*pb.ModuleEvent, error) {
	return m.DecideFailure(t, "request budget spent without a usable answer", now)
}

// DecideFailure records a failed source step.
func (m *Module) DecideFailure(t *pb.Task, reason string, _ time.Time) ([]*pb.ModuleEvent, error) {
	if t.TaskType == TypeGenerateQuestions {
		return nil, nil
	}
	src, want, err := m.sourceTarget(t)
	if err != nil || m.status(src.ID) != want {
		return nil, err
	}
	return []*pb.ModuleEvent{event(evSourceFail, t.Id, sourceFailData{Source: src.ID, Name: src.Name, Reason: t.TaskType + ": " + reason})}, nil
}

type verdict struct {
	Verdict   string `json:"verdict"`
	Rationale string `json:"rationale"`
}

func parseVerdict(t *pb.Task, answer string) (verdict, error) {
	i, j := strings.IndexByte(answer, '{'), strings.LastIndexByte(answer, '}')
	if i < 0 || j < i {
		return verdict{}, &modules.ValidationError{TaskID: t.Id, Phase: "schema", Msg: "no JSON object in the answer", Raw: answer}
	}
	var v verdict
	if err := json.Unmarshal([]byte(answer[i:j+1]), &v); err != nil {
		return verdict{}, &modules.ValidationError{TaskID: t.Id, Phase: "schema", Msg: "the JSON verdict does not decode: " + err.Error(), Raw: answer}
	}
	v.Verdict = strings.ToLower(strings.TrimSpace(v.Verdict))
	switch v.Verdict {
	case "bless", "revise", "reject":
		return v, nil
	}
	return verdict{}, invalid(t, answer, fmt.Sprintf("verdict %q is not bless, revise or reject", v.Verdict))
}

var numbered = regexp.MustCompile(`(?m)^\s*\d+[.)]\s+(.+?)\s*$`)

// parseQuestions takes the numbered lines of an answer (at most n).
func parseQuestions(s string, n int) []string {
	var out []string
	for _, m := range numbered.FindAllStringSubmatch(s, -1) {
		q := strings.TrimSpace(strings.ReplaceAll(m[1], "**", ""))
		if q != "" && len(out) < n {
			out = append(out, clip(500, q))
		}
	}
	return out
}

// lastQuestion is the last sentence ending in '?' of a text.
func lastQuestion(s string) string {
	end := strings.LastIndexByte(s, '?')
	if end < 0 {
		return ""
	}
	s = s[:end+1]
	start := 0
	for _, sep := range []string{". ", "\n", ": ", "! "} {
		if i := strings.LastIndex(s, sep); i >= 0 && i+len(sep) > start {
			start = i + len(sep)
		}
	}
	return clip(500, strings.TrimSpace(strings.ReplaceAll(s[start:], "**", "")))
}

func firstSentence(s string) string {
	s = strings.TrimLeft(strings.TrimSpace(s), "#*-> ")
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i+1]
	}
	return clip(300, strings.ReplaceAll(s, "**", ""))
}
