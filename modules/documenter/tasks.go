package documenter

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"fano/modules"
	"fano/modules/dedup"
	"fano/pb"
)

// Task keys (one task per piece of work, so proposing again is harmless):
//
//	documenter/math_evaluation/<insight>/s<seat>   (seats in turn, on distinct backends)
//	documenter/draft_section/<insight>/d<draft>
//	documenter/exposition_evaluation/<insight>/d<draft>
//	documenter/address_comment/<comment>
//	documenter/review_section/<section>/v<version>
const (
	ctxInsight  = "insight"
	ctxReviewer = "reviewer"
	ctxDraft    = "draft"
	ctxComment  = "comment"
	ctxSection  = "section"
	ctxVersion  = "version"
)

var done = modules.Action{Kind: modules.ActionDone}

func ask(prompt string) modules.Action {
	return modules.Action{Kind: modules.ActionLLMRequest, Prompt: prompt}
}

func (m *Module) task(typ, subject string, prio int, ctx map[string]string) *pb.Task {
	return &pb.Task{
		Id: modules.TaskKey(Name, typ, subject), Module: Name, TaskType: typ, Subject: subject,
		Context: ctx, MaxRequests: int32(max(1, m.cfg.MaxRequests(typ))), BasePriority: int32(prio),
	}
}

// ErrUnknownSection: a comment names a section the document does not have.
var ErrUnknownSection = errors.New("unknown section")

// ErrEmptyComment: a comment without text.
var ErrEmptyComment = errors.New("empty comment")

// MaxCommentChars bounds a comment.
const MaxCommentChars = 4000

// DecideAddComment decides the event that adds a comment on a section
// (modules.Commenter). An empty comment or an unknown section is an error
// naming it, and nothing is decided. The errors carry no module prefix:
// the caller (the control panel) names the module.
func (m *Module) DecideAddComment(sectionID, text string, now time.Time) ([]*pb.ModuleEvent, error) {
	sectionID, text = strings.TrimSpace(sectionID), strings.TrimSpace(text)
	if _, ok := m.st.Sections[sectionID]; !ok {
		known := m.SectionIDs()
		if len(known) == 0 {
			return nil, fmt.Errorf("%w %q: the document has no sections yet", ErrUnknownSection, sectionID)
		}
		return nil, fmt.Errorf("%w %q (sections: %s)", ErrUnknownSection, sectionID, strings.Join(known, ", "))
	}
	if text == "" {
		return nil, fmt.Errorf("%w on section %s", ErrEmptyComment, sectionID)
	}
	if n := utf8.RuneCountInString(text); n > MaxCommentChars {
		return nil, fmt.Errorf("comment on section %s is %d characters long; the limit is %d", sectionID, n, MaxCommentChars)
	}
	id := commentID(sectionID, text, now)
	return []*pb.ModuleEvent{event(evCommentAdded, "", commentAddedData{ID: id, Section: sectionID, Text: text})}, nil
}

// DecideNoteBlessed decides the event that makes a blessed insight an
// opportunity. An insight already known decides nothing; one whose text
// duplicates a section's insight or another opportunity is recorded as a
// duplicate (the shared checker decides), so the same insight arriving
// twice yields one section.
func (m *Module) DecideNoteBlessed(insight, text string, tags []string, seed string, now time.Time) ([]*pb.ModuleEvent, error) {
	insight, text = strings.TrimSpace(insight), strings.TrimSpace(text)
	if insight == "" || text == "" {
		return nil, fmt.Errorf("documenter: blessed insight %q: empty id or text", insight)
	}
	if _, ok := m.st.Opportunities[insight]; ok {
		return nil, nil
	}
	if tv, ok := m.tentative[insight]; ok && now.Sub(tv.at) <= tentativeTTL {
		return nil, nil
	}
	d := availableData{Insight: insight, Text: text, Tags: tags, Seed: seed}
	if dup, score := m.duplicateOf(insight, text, now); dup != "" {
		d.DuplicateOf, d.Similarity = dup, score
	} else {
		m.tentative[insight] = tentativeItem{text: text, at: now}
	}
	return []*pb.ModuleEvent{event(evAvailable, "", d)}, nil
}

// duplicateOf finds a section item or a live opportunity (or one decided
// but not yet applied) stating the same as text.
func (m *Module) duplicateOf(insight, text string, now time.Time) (string, float64) {
	if mt := m.checker.Match(text, dedup.OnlyKinds(KindSection), dedup.SkipIDs(insight)); mt.Duplicate {
		if _, ins, _ := strings.Cut(mt.ID, "/"); ins != insight {
			return mt.ID, mt.Score
		}
	}
	threshold := m.checker.Config().Threshold
	best, bestScore := "", 0.0
	consider := func(id, other string) {
		if id == insight {
			return
		}
		if s := dedup.Similarity(text, other); s >= threshold && (s > bestScore || (s == bestScore && id < best)) {
			best, bestScore = id, s
		}
	}
	for _, id := range sortedKeys(m.st.Opportunities) {
		if o := m.st.Opportunities[id]; isOpen(o.Status) {
			consider(id, o.Text)
		}
	}
	for _, id := range sortedKeys(m.tentative) {
		if tv := m.tentative[id]; now.Sub(tv.at) <= tentativeTTL {
			consider(id, tv.text)
		}
	}
	return best, bestScore
}

// Propose returns the tasks the state calls for: open comments first,
// then the next stage of each opportunity, then section reviews within
// the review share of recent work.
func (m *Module) Propose(now time.Time) []*pb.Task {
	var out []*pb.Task
	for _, c := range m.openComments() {
		out = append(out, m.task(TypeAddressComment, c.ID, priorityComment, map[string]string{ctxComment: c.ID, ctxSection: c.Section}))
	}
	for _, o := range m.openOpportunities() {
		switch o.Status {
		case StatusEvaluating:
			if seat := m.nextSeat(o); seat != "" {
				t := m.task(TypeMathEvaluation, o.Insight+"/"+seat, priorityIncorporate, map[string]string{ctxInsight: o.Insight, ctxReviewer: seat})
				if used := usedLLMs(o); len(used) < len(m.cfg.Backends) {
					t.LlmExclude = used
				}
				out = append(out, t)
			}
		case StatusDrafting:
			n := strconv.Itoa(o.Drafts + 1)
			out = append(out, m.task(TypeDraft, o.Insight+"/d"+n, priorityDraft, map[string]string{ctxInsight: o.Insight, ctxDraft: n}))
		case StatusExposition:
			n := strconv.Itoa(o.Drafts)
			t := m.task(TypeExpositionEvaluation, o.Insight+"/d"+n, priorityIncorporate, map[string]string{ctxInsight: o.Insight, ctxDraft: n})
			if o.DraftLLM != "" && len(m.cfg.Backends) > 1 {
				t.LlmExclude = []string{o.DraftLLM} // another LLM judges the exposition
			}
			out = append(out, t)
		}
	}
	for _, sec := range m.revisionsDue() {
		if p := sec.Proposal; p != nil {
			t := m.task(TypeExpositionEvaluation, sec.ID+"/r"+strconv.Itoa(p.Version), priorityReview, map[string]string{ctxSection: sec.ID, ctxVersion: strconv.Itoa(p.Version - 1)})
			if p.LLM != "" && len(m.cfg.Backends) > 1 {
				t.LlmExclude = []string{p.LLM} // another LLM judges the revision
			}
			out = append(out, t)
			continue
		}
		v := strconv.Itoa(sec.Version)
		out = append(out, m.task(TypeReviseSection, sec.ID+"/v"+v, priorityReview, map[string]string{ctxSection: sec.ID, ctxVersion: v}))
	}
	for _, sec := range m.reviewsDue(now) {
		v := strconv.Itoa(sec.Version)
		t := m.task(TypeReviewSection, sec.ID+"/v"+v, priorityReview, map[string]string{ctxSection: sec.ID, ctxVersion: v})
		t.RequiresDeepMode = len(m.cfg.DeepBackends) > 0
		out = append(out, t)
	}
	return out
}

// revisionsDue are the sections with a proposed revision to evaluate or
// a review of their current version not yet turned into one, in
// document order.
func (m *Module) revisionsDue() []*Section {
	var out []*Section
	for _, id := range sortedKeys(m.st.Sections) {
		sec := m.st.Sections[id]
		if sec.Proposal != nil || (sec.RevisedFor < sec.Version && sec.Reviewed == sec.Version && len(sec.Reviews) > 0) {
			out = append(out, sec)
		}
	}
	slices.SortFunc(out, func(a, b *Section) int { return int(a.Order - b.Order) })
	return out
}

func (m *Module) openComments() []*Comment {
	var out []*Comment
	for _, id := range sortedKeys(m.st.Comments) {
		if c := m.st.Comments[id]; c.Status == CommentOpen {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b *Comment) int { return int(a.Order - b.Order) })
	return out
}

func (m *Module) openOpportunities() []*Opportunity {
	var out []*Opportunity
	for _, o := range m.st.Opportunities {
		if isOpen(o.Status) {
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b *Opportunity) int { return int(a.Order - b.Order) })
	return out
}

// RecentWork counts the new and review work of the window before now.
func (m *Module) RecentWork(now time.Time) (newWork, review int) {
	for _, w := range m.st.Work {
		if now.Sub(w.At) > m.cfg.Window || w.At.After(now) {
			continue
		}
		if w.Kind == workRev {
			review++
		} else {
			newWork++
		}
	}
	return newWork, review
}

// reviewsDue lists the sections to review now: sections changed since their last review, oldest
// change first, one at a time while reviews (done and proposed) stay
// under work_allocation.review_existing of the recent work.
func (m *Module) reviewsDue(now time.Time) []*Section {
	if m.cfg.ReviewShare <= 0 {
		return nil
	}
	var stale []*Section
	for _, sec := range m.st.Sections {
		if sec.Version > sec.Reviewed {
			stale = append(stale, sec)
		}
	}
	slices.SortFunc(stale, func(a, b *Section) int {
		if c := a.UpdatedAt.Compare(b.UpdatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	nw, rv := m.RecentWork(now)
	var out []*Section
	for _, sec := range stale {
		if nw+rv == 0 || float64(rv)/float64(nw+rv) >= float64(m.cfg.ReviewShare)/100 {
			break
		}
		out = append(out, sec)
		rv++
	}
	return out
}

// seats names the math evaluation panel's seats of an insight: s1..sN,
// N = PanelSize. Seats are filled one after another, each on a backend
// none of the earlier seats used (LlmExclude), so the panel is made of
// distinct LLMs without pinning a seat to a backend whose quota may be
// spent (derived from the config, never logged).
func (m *Module) seats() []string {
	size := m.cfg.PanelSize
	if n := len(m.cfg.Backends); n > 0 {
		size = min(size, n)
	}
	out := make([]string, size)
	for i := range out {
		out[i] = "s" + strconv.Itoa(i+1)
	}
	return out
}

// nextSeat is the first seat of o without a verdict, "" when all have one.
func (m *Module) nextSeat(o *Opportunity) string {
	for _, s := range m.seats() {
		if o.evaluationBy(s) == nil {
			return s
		}
	}
	return ""
}

// usedLLMs are the backends earlier seats of o ran on.
func usedLLMs(o *Opportunity) []string {
	var out []string
	for _, e := range o.Evaluations {
		if e.LLM != "" && !slices.Contains(out, e.LLM) {
			out = append(out, e.LLM)
		}
	}
	slices.Sort(out)
	return out
}

// NextAction says what a running task does next; a task whose result is
// already in the state is done (a task resumed after a crash asks only
// for what is missing).
func (m *Module) NextAction(t *pb.Task) (modules.Action, error) {
	switch t.TaskType {
	case TypeMathEvaluation:
		o, r, err := m.mathTarget(t)
		if err != nil || o.Status != StatusEvaluating || o.evaluationBy(r) != nil {
			return done, err
		}
		p, err := m.prompts.render(promptMath, oppData{Insight: o.Text, Tags: o.Tags, Seed: o.Seed})
		return ask(p), err
	case TypeDraft:
		o, n, err := m.draftTarget(t)
		if err != nil || o.Status != StatusDrafting || o.Drafts+1 != n {
			return done, err
		}
		d := oppData{Insight: o.Text, Tags: o.Tags, Seed: o.Seed, Title: m.cfg.Title}
		if sec := m.st.Sections[o.Target]; sec != nil {
			d.Section, d.SectionTitle = sec.Markdown, sec.Title
		}
		d.Contents, d.Omitted = m.contents(promptBudgetChars / 2)
		d.Passages = m.nearPassages(o, promptBudgetChars/2)
		if len(o.Exposition) > 0 {
			d.Critique = o.Exposition[len(o.Exposition)-1].Rationale
		}
		p, err := m.prompts.render(promptDraft, d)
		return ask(p), err
	case TypeExpositionEvaluation:
		if t.Context[ctxSection] != "" {
			sec, base, err := m.reviewTarget(t)
			if err != nil || sec.Proposal == nil || sec.Proposal.Version != base+1 {
				return done, err
			}
			p, err := m.prompts.render(promptExposition, oppData{Insight: m.statements(sec), Draft: sec.Proposal.Markdown, Title: m.cfg.Title})
			return ask(p), err
		}
		o, n, err := m.draftTarget(t)
		if err != nil || o.Status != StatusExposition || o.Drafts != n || len(o.Exposition) >= n {
			return done, err
		}
		d := oppData{Insight: o.Text, Draft: o.Draft, Title: m.cfg.Title}
		d.Contents, d.Omitted = m.contents(promptBudgetChars / 2)
		d.Passages = m.nearPassages(o, promptBudgetChars/2)
		p, err := m.prompts.render(promptExposition, d)
		return ask(p), err
	case TypeReviseSection:
		sec, v, err := m.reviewTarget(t)
		if err != nil || !m.revisable(sec, v) {
			return done, err
		}
		p, err := m.prompts.render(promptRevise, reviseData{Title: sec.Title, Section: sec.Markdown, Review: sec.Reviews[len(sec.Reviews)-1].Text, Statements: m.statements(sec)})
		return ask(p), err
	case TypeAddressComment:
		c, sec, err := m.commentTarget(t)
		if err != nil || c.Status != CommentOpen {
			return done, err
		}
		p, err := m.prompts.render(promptComment, commentData{Title: sec.Title, Section: sec.Markdown, Comment: c.Text})
		return ask(p), err
	case TypeReviewSection:
		sec, v, err := m.reviewTarget(t)
		if err != nil || sec.Reviewed >= v || sec.Version != v {
			return done, err
		}
		p, err := m.prompts.render(promptReview, commentData{Title: sec.Title, Section: sec.Markdown})
		a := ask(p)
		a.DeepMode = t.RequiresDeepMode
		return a, err
	}
	return modules.Action{}, unknownType(t)
}

// DecideResponse turns an answer into events; an answer that does not
// parse is a *modules.ValidationError (retried).
func (m *Module) DecideResponse(t *pb.Task, answer string, now time.Time) ([]*pb.ModuleEvent, error) {
	llm := llmOf(t)
	switch t.TaskType {
	case TypeMathEvaluation:
		o, r, err := m.mathTarget(t)
		if err != nil || o.Status != StatusEvaluating || o.evaluationBy(r) != nil {
			return nil, err
		}
		v, verr := parseVerdict(t.Id, answer)
		if verr != nil {
			return nil, verr
		}
		ev := Evaluation{Reviewer: r, LLM: llm, Task: t.Id, Verdict: v.Verdict, Rationale: v.Rationale}
		evs := []*pb.ModuleEvent{event(evMathEvaluated, t.Id, mathEvaluatedData{Insight: o.Insight, Reviewer: r, LLM: llm, Task: t.Id, Verdict: v.Verdict, Rationale: v.Rationale})}
		if d := m.decideMath(o, &ev); d != nil {
			evs = append(evs, event(evMathDecided, t.Id, *d))
		}
		return evs, nil
	case TypeDraft:
		o, n, err := m.draftTarget(t)
		if err != nil || o.Status != StatusDrafting || o.Drafts+1 != n {
			return nil, err
		}
		title, body := splitHeading(m.cleanAnswer(t.Id, answer))
		if body == "" {
			return nil, &modules.ValidationError{TaskID: t.Id, Phase: "rules", Msg: "empty draft", Raw: answer}
		}
		if title == "" {
			title = titleFrom(o)
		}
		drafted := event(evDrafted, t.Id, draftedData{Insight: o.Insight, Draft: n, Task: t.Id, LLM: llm, Title: title, Text: body})
		if ovs := m.overlapsOf(body); n == 1 && n < m.cfg.MaxDrafts && 2*len(ovs) >= indexedSentences(body) && len(ovs) > 0 {
			// A first draft that mostly restates the document: the
			// editor sends it back once, naming the passages and their
			// sections. Lesser overlaps are pruned (no request spent).
			return []*pb.ModuleEvent{drafted, event(evExposition, t.Id, expositionData{Insight: o.Insight, Draft: n, Task: t.Id,
				LLM: reviewerDedup, Verdict: VerdictReject, Rationale: m.overlapCritique(ovs)})}, nil
		}
		if pruned, _ := m.prune(body); pruned == "" {
			// Nothing new in the last draft: no exposition to judge.
			return []*pb.ModuleEvent{drafted, m.incorporation(o, body, title, t.Id)}, nil
		} else if pruned != body {
			drafted = event(evDrafted, t.Id, draftedData{Insight: o.Insight, Draft: n, Task: t.Id, LLM: llm, Title: title, Text: pruned})
		}
		return []*pb.ModuleEvent{drafted}, nil
	case TypeExpositionEvaluation:
		if t.Context[ctxSection] != "" {
			sec, base, err := m.reviewTarget(t)
			if err != nil || sec.Proposal == nil || sec.Proposal.Version != base+1 {
				return nil, err
			}
			v, verr := parseVerdict(t.Id, answer)
			if verr != nil {
				return nil, verr
			}
			d := revisionDecidedData{Section: sec.ID, Base: base, Verdict: v.Verdict, Rationale: v.Rationale, LLM: llm, Task: t.Id}
			if v.Verdict != VerdictReject {
				// What another section took in meanwhile is left out.
				d.Markdown, _ = m.prune(sec.Proposal.Markdown, sec.ID, pendingOwner(sec.ID))
				if d.Markdown == "" || m.missingStatements(sec, d.Markdown) != "" {
					d.Verdict, d.Rationale, d.Markdown = VerdictReject, "the revision says nothing the document does not say elsewhere", ""
				} else {
					m.passages.Set(pendingOwner(sec.ID), d.Markdown)
				}
			}
			return []*pb.ModuleEvent{event(evRevisionDone, t.Id, d)}, nil
		}
		o, n, err := m.draftTarget(t)
		if err != nil || o.Status != StatusExposition || o.Drafts != n || len(o.Exposition) >= n {
			return nil, err
		}
		v, verr := parseVerdict(t.Id, answer)
		if verr != nil {
			return nil, verr
		}
		evs := []*pb.ModuleEvent{event(evExposition, t.Id, expositionData{Insight: o.Insight, Draft: n, Task: t.Id, LLM: llm, Verdict: v.Verdict, Rationale: v.Rationale})}
		if v.Verdict != VerdictReject {
			evs = append(evs, m.decideIncorporation(o, t.Id))
		}
		return evs, nil
	case TypeAddressComment:
		c, sec, err := m.commentTarget(t)
		if err != nil || c.Status != CommentOpen {
			return nil, err
		}
		_, body := splitHeading(m.cleanAnswer(t.Id, answer))
		body, _ = m.prune(body, sec.ID, pendingOwner(sec.ID))
		if body == "" {
			return nil, &modules.ValidationError{TaskID: t.Id, Phase: "rules", Msg: "empty revision", Raw: answer}
		}
		m.passages.Set(pendingOwner(sec.ID), body)
		return []*pb.ModuleEvent{event(evCommentDone, t.Id, commentDoneData{ID: c.ID, Section: sec.ID, Task: t.Id, LLM: llm, Markdown: body, Response: firstSentence(body)})}, nil
	case TypeReviseSection:
		sec, v, err := m.reviewTarget(t)
		if err != nil || !m.revisable(sec, v) {
			return nil, err
		}
		_, body := splitHeading(m.cleanAnswer(t.Id, answer))
		body, _ = m.prune(body, sec.ID, pendingOwner(sec.ID))
		if body == "" {
			return nil, &modules.ValidationError{TaskID: t.Id, Phase: "rules", Msg: "empty revision", Raw: answer}
		}
		if missing := m.missingStatements(sec, body); missing != "" {
			// A revision that drops a result the section presents is
			// refused before it costs an evaluation.
			return []*pb.ModuleEvent{event(evRevisionDone, t.Id, revisionDecidedData{Section: sec.ID, Base: v, Verdict: VerdictReject,
				Rationale: "the revision no longer states: " + missing, Task: t.Id})}, nil
		}
		return []*pb.ModuleEvent{event(evRevisionProp, t.Id, revisionProposedData{Section: sec.ID, Base: v, Markdown: body,
			Source: fmt.Sprintf("review of version %d", v), LLM: llm, Task: t.Id})}, nil
	case TypeReviewSection:
		sec, v, err := m.reviewTarget(t)
		if err != nil || sec.Reviewed >= v || sec.Version != v {
			return nil, err
		}
		text := strings.TrimSpace(answer)
		if text == "" {
			return nil, &modules.ValidationError{TaskID: t.Id, Phase: "rules", Msg: "empty review", Raw: answer}
		}
		return []*pb.ModuleEvent{event(evSectionReview, t.Id, sectionReviewData{Section: sec.ID, Version: v, Task: t.Id, LLM: llm, Text: text})}, nil
	}
	return nil, unknownType(t)
}

// decideIncorporation decides where an accepted draft goes: the section
// the math decision chose to extend, else a new section; an insight whose
// statement a section took in meanwhile is a duplicate instead.
func (m *Module) decideIncorporation(o *Opportunity, taskID string) *pb.ModuleEvent {
	if mt := m.checker.Match(o.Text, dedup.OnlyKinds(KindSection)); mt.Duplicate {
		if _, ins, _ := strings.Cut(mt.ID, "/"); ins != o.Insight {
			return event(evOppFailed, taskID, oppFailedData{Insight: o.Insight, Status: StatusDuplicate, Reason: "duplicates " + mt.ID + " (incorporated meanwhile)"})
		}
	}
	return m.incorporation(o, o.Draft, o.DraftTitle, taskID)
}

// incorporation decides where draft goes and what of it: what the
// document says already is left out; a draft titled like a section, or
// whose statement a section states, extends it (one subject, one
// section); a draft with nothing new goes
// to the section that says it, or, founding no section, makes the
// insight a duplicate.
func (m *Module) incorporation(o *Opportunity, draft, title, taskID string) *pb.ModuleEvent {
	d := incorporatedData{Insight: o.Insight}
	target := o.Target
	if m.st.Sections[target] == nil {
		target = m.sameTitle(title)
	}
	if m.st.Sections[target] == nil {
		target = m.statedIn(o.Text) // its statement stands there already
	}
	md, where := m.prune(draft)
	if md == "" && m.st.Sections[target] == nil && where != "" {
		target = where
	}
	d.Markdown = md
	// Decided but not yet applied: the next decision must see it.
	m.passages.Set(pendingOwner(o.Insight), md)
	if sec := m.st.Sections[target]; sec != nil {
		d.Section, d.Title = sec.ID, sec.Title
	} else {
		d.Section, d.Created, d.Title = sectionID(o.Insight), true, title
		if md == "" {
			return event(evOppFailed, taskID, oppFailedData{Insight: o.Insight, Status: StatusDuplicate, Reason: "every passage of the draft already stands in the document"})
		}
	}
	return event(evIncorporated, taskID, d)
}

// decideMath decides an opportunity once every panel seat has a verdict
// (extra: one being decided now): at least MinBless seats finding it
// correct (bless, or revise: correct but to be worded better, which the
// draft does) accept it — the explorer's panel blessed it already, so a
// single dissent does not veto it — unless a section already states it; a
// section it is borderline-similar to becomes the one it extends.
func (m *Module) decideMath(o *Opportunity, extra *Evaluation) *mathDecidedData {
	panel := m.seats()
	got := map[string]Evaluation{}
	for _, e := range o.Evaluations {
		got[e.Reviewer] = e
	}
	if extra != nil {
		got[extra.Reviewer] = *extra
	}
	counts := map[string]int{}
	for _, p := range panel {
		e, ok := got[p]
		if !ok {
			return nil
		}
		counts[e.Verdict]++
	}
	minBless := min(m.cfg.MinBless, len(panel))
	tally := fmt.Sprintf("%d bless, %d revise, %d reject, %d abstain of %d (rule: >= %d bless or revise)",
		counts[VerdictBless], counts[VerdictRevise], counts[VerdictReject], counts[VerdictAbstain], len(panel), minBless)
	d := &mathDecidedData{Insight: o.Insight, Reason: tally}
	if len(panel) == 0 || counts[VerdictBless]+counts[VerdictRevise] < minBless {
		d.Outcome = "rejected"
		return d
	}
	mt := m.checker.Match(o.Text, dedup.OnlyKinds(KindSection))
	sec, ins, _ := strings.Cut(mt.ID, "/")
	switch {
	case mt.Duplicate && ins != o.Insight:
		d.Outcome, d.DuplicateOf, d.Similarity = "duplicate", mt.ID, mt.Score
		d.Reason = tally + "; duplicates " + mt.ID
	case mt.Borderline:
		d.Outcome, d.Target = "accepted", sec
		d.Reason = tally + fmt.Sprintf("; extends section %s (similarity %.2f)", sec, mt.Score)
	case m.statedIn(o.Text) != "":
		sec := m.statedIn(o.Text)
		d.Outcome, d.Target = "accepted", sec
		d.Reason = tally + "; its statement stands in section " + sec + ", which it extends"
	default:
		d.Outcome = "accepted"
		d.Reason = tally + "; a new section"
	}
	return d
}

// pendingOwner names, in the passage index, text decided for owner (an
// insight or a section) whose event is not applied yet; Apply drops it.
func pendingOwner(id string) string { return "pending:" + id }

// revisable: version v of sec is current, reviewed, and not yet revised.
func (m *Module) revisable(sec *Section, v int) bool {
	return sec.Version == v && sec.Reviewed == v && sec.RevisedFor < v && sec.Proposal == nil && len(sec.Reviews) > 0
}

// statements are the insight statements a section presents.
func (m *Module) statements(sec *Section) string {
	var out []string
	for _, ins := range sec.Insights {
		if o := m.st.Opportunities[ins]; o != nil {
			out = append(out, o.Text)
		}
	}
	return strings.Join(out, " ")
}

// missingStatements names the section's insight statements that text no
// longer states (each one stated in the section's current text must
// stay), "" when none is missing.
func (m *Module) missingStatements(sec *Section, text string) string {
	before := dedup.NewPassages(m.checker.Config())
	before.Set("old", sec.Markdown)
	after := dedup.NewPassages(m.checker.Config())
	after.Set("new", text)
	var missing []string
	for _, ins := range sec.Insights {
		o := m.st.Opportunities[ins]
		if o == nil {
			continue
		}
		if _, was := before.Find(o.Text); !was {
			continue
		}
		if _, is := after.Find(o.Text); !is {
			missing = append(missing, strconv.Quote(clip(160, o.Text)))
		}
	}
	return strings.Join(missing, "; ")
}

// indexedSentences counts the sentences of text the passage check reads.
func indexedSentences(text string) int {
	n := 0
	for _, s := range dedup.Sentences(text) {
		if dedup.Indexed(s) {
			n++
		}
	}
	return n
}

// statedIn is the section whose text states text, "" if none.
func (m *Module) statedIn(text string) string {
	if ov, ok := m.passages.Find(text); ok {
		return ov.Owner
	}
	return ""
}

// reviewerDedup names the text-level duplicate check where an exposition
// verdict records who refused a draft.
const reviewerDedup = "dedup"

// DecideCompletion records what a task that ended without its result
// leaves behind (its request budget spent on unusable answers).
func (m *Module) DecideCompletion(t *pb.Task, now time.Time) ([]*pb.ModuleEvent, error) {
	return m.decideEnd(t, "", now)
}

// DecideFailure records a failed or cancelled task: a panel seat
// abstains; a failed draft or exposition evaluation fails the
// opportunity (the reason kept); a failed comment is marked failed.
func (m *Module) DecideFailure(t *pb.Task, reason string, now time.Time) ([]*pb.ModuleEvent, error) {
	if reason == "" {
		reason = "failed"
	}
	return m.decideEnd(t, reason, now)
}

const reasonBudget = "request budget spent without a usable answer"

func (m *Module) decideEnd(t *pb.Task, reason string, _ time.Time) ([]*pb.ModuleEvent, error) {
	why := reason
	if why == "" {
		why = reasonBudget
	}
	switch t.TaskType {
	case TypeMathEvaluation:
		o, r, err := m.mathTarget(t)
		if err != nil || o.Status != StatusEvaluating || o.evaluationBy(r) != nil {
			return nil, err
		}
		ev := Evaluation{Reviewer: r, LLM: llmOf(t), Task: t.Id, Verdict: VerdictAbstain, Rationale: why}
		evs := []*pb.ModuleEvent{event(evMathEvaluated, t.Id, mathEvaluatedData{Insight: o.Insight, Reviewer: r, LLM: ev.LLM, Task: t.Id, Verdict: VerdictAbstain, Rationale: why})}
		if d := m.decideMath(o, &ev); d != nil {
			evs = append(evs, event(evMathDecided, t.Id, *d))
		}
		return evs, nil
	case TypeDraft:
		o, n, err := m.draftTarget(t)
		if err != nil || o.Status != StatusDrafting || o.Drafts+1 != n {
			return nil, err
		}
		return []*pb.ModuleEvent{event(evOppFailed, t.Id, oppFailedData{Insight: o.Insight, Status: StatusFailed, Reason: "draft failed: " + why})}, nil
	case TypeExpositionEvaluation:
		if t.Context[ctxSection] != "" {
			sec, base, err := m.reviewTarget(t)
			if err != nil || sec.Proposal == nil || sec.Proposal.Version != base+1 {
				return nil, err
			}
			return []*pb.ModuleEvent{event(evRevisionDone, t.Id, revisionDecidedData{Section: sec.ID, Base: base, Verdict: VerdictReject, Rationale: "evaluation failed: " + why, Task: t.Id})}, nil
		}
		o, n, err := m.draftTarget(t)
		if err != nil || o.Status != StatusExposition || o.Drafts != n {
			return nil, err
		}
		return []*pb.ModuleEvent{event(evOppFailed, t.Id, oppFailedData{Insight: o.Insight, Status: StatusFailed, Reason: "exposition evaluation failed: " + why})}, nil
	case TypeAddressComment:
		c, _, err := m.commentTarget(t)
		if err != nil || c.Status != CommentOpen {
			return nil, err
		}
		return []*pb.ModuleEvent{event(evCommentFailed, t.Id, commentFailedData{ID: c.ID, Reason: why})}, nil
	case TypeReviewSection:
		return nil, nil // the section stays due for review
	case TypeReviseSection:
		sec, v, err := m.reviewTarget(t)
		if err != nil || !m.revisable(sec, v) {
			return nil, err
		}
		return []*pb.ModuleEvent{event(evRevisionDone, t.Id, revisionDecidedData{Section: sec.ID, Base: v, Verdict: VerdictReject, Rationale: "revision failed: " + why, Task: t.Id})}, nil
	}
	return nil, unknownType(t)
}

// Helpers reading a task's subject.

func unknownType(t *pb.Task) error {
	return fmt.Errorf("documenter: task %s: unknown task type %q", t.GetId(), t.GetTaskType())
}

func llmOf(t *pb.Task) string {
	if t.GetLlmAssigned() != "" {
		return t.GetLlmAssigned()
	}
	return t.GetConversation().GetLlm()
}

func (m *Module) mathTarget(t *pb.Task) (*Opportunity, string, error) {
	o := m.st.Opportunities[t.Context[ctxInsight]]
	if o == nil {
		return nil, "", fmt.Errorf("documenter: task %s: unknown insight %q", t.Id, t.Context[ctxInsight])
	}
	r := t.Context[ctxReviewer]
	if r == "" {
		return nil, "", fmt.Errorf("documenter: task %s: no reviewer", t.Id)
	}
	return o, r, nil
}

func (m *Module) draftTarget(t *pb.Task) (*Opportunity, int, error) {
	o := m.st.Opportunities[t.Context[ctxInsight]]
	if o == nil {
		return nil, 0, fmt.Errorf("documenter: task %s: unknown insight %q", t.Id, t.Context[ctxInsight])
	}
	n, err := strconv.Atoi(t.Context[ctxDraft])
	if err != nil || n < 1 {
		return nil, 0, fmt.Errorf("documenter: task %s: bad draft number %q", t.Id, t.Context[ctxDraft])
	}
	return o, n, nil
}

func (m *Module) commentTarget(t *pb.Task) (*Comment, *Section, error) {
	c := m.st.Comments[t.Context[ctxComment]]
	if c == nil {
		return nil, nil, fmt.Errorf("documenter: task %s: unknown comment %q", t.Id, t.Context[ctxComment])
	}
	sec := m.st.Sections[c.Section]
	if sec == nil {
		return nil, nil, fmt.Errorf("documenter: task %s: comment %s on unknown section %q", t.Id, c.ID, c.Section)
	}
	return c, sec, nil
}

func (m *Module) reviewTarget(t *pb.Task) (*Section, int, error) {
	sec := m.st.Sections[t.Context[ctxSection]]
	if sec == nil {
		return nil, 0, fmt.Errorf("documenter: task %s: unknown section %q", t.Id, t.Context[ctxSection])
	}
	v, err := strconv.Atoi(t.Context[ctxVersion])
	if err != nil || v < 1 {
		return nil, 0, fmt.Errorf("documenter: task %s: bad section version %q", t.Id, t.Context[ctxVersion])
	}
	return sec, v, nil
}

// verdict is the JSON of math_evaluation and exposition_evaluation.
type verdict struct {
	Verdict   string `json:"verdict"`
	Rationale string `json:"rationale"`
	Revision  string `json:"revision,omitempty"`
}

// parseVerdict reads a JSON verdict, fenced or not, from an answer.
func parseVerdict(taskID, answer string) (verdict, error) {
	s := answer
	i, j := strings.IndexByte(s, '{'), strings.LastIndexByte(s, '}')
	if i < 0 || j < i {
		return verdict{}, &modules.ValidationError{TaskID: taskID, Phase: "schema", Msg: "no JSON object in the answer", Raw: answer}
	}
	var v verdict
	if err := json.Unmarshal([]byte(s[i:j+1]), &v); err != nil {
		return verdict{}, &modules.ValidationError{TaskID: taskID, Phase: "schema", Msg: "the JSON verdict does not decode: " + err.Error(), Raw: answer}
	}
	v.Verdict = strings.ToLower(strings.TrimSpace(v.Verdict))
	switch v.Verdict {
	case VerdictBless, VerdictRevise, VerdictReject:
	default:
		return verdict{}, &modules.ValidationError{TaskID: taskID, Phase: "rules", Msg: fmt.Sprintf("verdict %q is not bless, revise or reject", v.Verdict), Raw: answer}
	}
	return v, nil
}

// splitHeading takes a leading Markdown heading off a text: its title and
// the rest.
func splitHeading(s string) (title, body string) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "#") {
		line, rest, _ := strings.Cut(s, "\n")
		return strings.TrimSpace(strings.TrimLeft(line, "# ")), strings.TrimSpace(rest)
	}
	return "", s
}

// titleFrom is a section title for an insight drafted without a heading.
func titleFrom(o *Opportunity) string {
	if len(o.Tags) > 0 && o.Tags[0] != "" {
		t := strings.ReplaceAll(o.Tags[0], "_", " ")
		return strings.ToUpper(t[:1]) + t[1:]
	}
	return clip(60, o.Text)
}

func firstSentence(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i+1]
	}
	return clip(300, s)
}
