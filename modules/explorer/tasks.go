package explorer

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"fano/modules"
	"fano/modules/dedup"
	"fano/pb"
)

var done = modules.Action{Kind: modules.ActionDone}

func ask(prompt string) modules.Action {
	return modules.Action{Kind: modules.ActionLLMRequest, Prompt: prompt}
}

// lastMessage returns the newest message of role in the task's
// conversation: the prompt that was sent ("user") or the raw answer
// ("assistant").
func lastMessage(t *pb.Task, role string) string {
	msgs := t.GetConversation().GetMessages()
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].GetRole() == role {
			return msgs[i].GetContent()
		}
	}
	return ""
}

// llmOf is the backend a task runs on.
func llmOf(t *pb.Task) string {
	if t.GetLlmAssigned() != "" {
		return t.GetLlmAssigned()
	}
	return t.GetConversation().GetLlm()
}

func unknownType(t *pb.Task) error {
	return fmt.Errorf("explorer: task %s: unknown task type %q", t.GetId(), t.GetTaskType())
}

// NextAction says what a running task does next. Every task type asks
// until the state holds its result, so a task resumed after a crash asks
// only for what is missing.
func (m *Module) NextAction(t *pb.Task) (modules.Action, error) {
	switch t.TaskType {
	case TypeExploration:
		return m.nextExploration(t)
	case TypeCritique:
		th, err := m.thread(t)
		if err != nil || th.Status != ThreadCritique || hasKind(th, TypeCritique) {
			return done, err
		}
		p, err := m.prompts.render(promptCritique, threadData{Seed: th.Seed, Exchanges: explorations(th)})
		return ask(p), err
	case TypeSynthesis:
		th, err := m.thread(t)
		if err != nil || th.Status != ThreadSynthesis || th.ChunkID != "" {
			return done, err
		}
		p, err := m.prompts.render(promptSynthesis, threadData{Seed: th.Seed, Exchanges: explorations(th), Critique: critiqueOf(th)})
		a := ask(p)
		a.DeepMode = t.RequiresDeepMode
		return a, err
	case TypeExtraction:
		ch, err := m.chunk(t)
		if err != nil || ch.Status != chunkNew {
			return done, err
		}
		d := extractData{Chunk: ch.Text, MinChars: m.cfg.InsightMinChars, MaxChars: m.cfg.InsightMaxChars, MaxInsights: m.cfg.MaxInsights}
		if th := m.st.Threads[ch.ThreadID]; th != nil {
			d.Seed = th.Seed
		}
		if (t.ValidationAttempts > 0 || t.Attempts > 0) && strings.HasPrefix(t.Error, "validation") {
			d.Retry = clip(300, t.Error)
		}
		p, err := m.prompts.render(promptExtract, d)
		return ask(p), err
	case TypeReview:
		ins, round, reviewer, err := m.reviewTarget(t)
		if err != nil || !awaitsReview(ins, round, reviewer) {
			return done, err
		}
		d := reviewPromptData{Insight: ins.Text, Round: round, MinChars: m.cfg.InsightMinChars, MaxChars: m.cfg.InsightMaxChars}
		if th := m.st.Threads[ins.ThreadID]; th != nil {
			d.Seed = th.Seed
		}
		if round > 1 && len(ins.History) > 0 {
			d.Previous = ins.History[len(ins.History)-1]
			d.PriorReviews = ins.roundReviews(round - 1)
		}
		p, err := m.prompts.render(promptReview, d)
		return ask(p), err
	case TypeDedupConfirm:
		batch := m.dedupBatch(t)
		if len(batch) == 0 {
			return done, nil
		}
		d := dedupData{}
		for i, ins := range batch {
			d.Pairs = append(d.Pairs, dedupPair{A: 2*i + 1, B: 2*i + 2, New: ins.Text, Existing: ins.BorderlineText})
		}
		p, err := m.prompts.render(promptDedup, d)
		return ask(p), err
	}
	return modules.Action{}, unknownType(t)
}

func (m *Module) nextExploration(t *pb.Task) (modules.Action, error) {
	th := m.st.Threads[t.Context[ctxThread]]
	if th == nil {
		s, ok := m.lookupSeed(t.Context[ctxSeed])
		if !ok {
			return modules.Action{}, fmt.Errorf("explorer: task %s: unknown seed %q", t.Id, t.Context[ctxSeed])
		}
		if _, failed := m.st.FailedSeeds[s.ID]; failed {
			return done, nil
		}
		p, err := m.prompts.render(promptStart, startData{Seed: s.Text})
		return ask(p), err
	}
	ex := explorations(th)
	if th.Status != ThreadExploring || len(ex) >= m.cfg.ExplorationTurns {
		return done, nil
	}
	if len(ex) == 0 {
		p, err := m.prompts.render(promptStart, startData{Seed: th.Seed})
		return ask(p), err
	}
	d := followupData{Seed: th.Seed, Turn: len(ex) + 1, Turns: m.cfg.ExplorationTurns, Exchanges: ex,
		OpenQuestion: lastQuestion(ex[len(ex)-1].Answer)}
	for _, e := range ex[max(0, len(ex)-3):] {
		d.Recent = append(d.Recent, firstSentence(e.Answer))
	}
	p, err := m.prompts.render(promptFollowup, d)
	return ask(p), err
}

// DecideResponse turns an answer into events. An answer that fails
// validation is a *modules.ValidationError (the request is retried); an
// answer for work the state no longer awaits decides nothing.
func (m *Module) DecideResponse(t *pb.Task, answer string, now time.Time) ([]*pb.ModuleEvent, error) {
	llm := llmOf(t)
	switch t.TaskType {
	case TypeExploration, TypeCritique:
		text := strings.TrimSpace(answer)
		if text == "" {
			return nil, rulesErr(t.Id, answer, "empty answer")
		}
		return m.decideExchange(t, text, llm)
	case TypeSynthesis:
		th, err := m.thread(t)
		if err != nil || th.Status != ThreadSynthesis || th.ChunkID != "" {
			return nil, err
		}
		text := strings.TrimSpace(answer)
		if text == "" {
			return nil, rulesErr(t.Id, answer, "empty synthesis")
		}
		return []*pb.ModuleEvent{event(evChunk, t.Id, chunkData{Chunk: chunkID(th.ID), Thread: th.ID, Text: text, LLM: llm, Task: t.Id})}, nil
	case TypeExtraction:
		ch, err := m.chunk(t)
		if err != nil || ch.Status != chunkNew {
			return nil, err
		}
		cands, dropped, verr := parseInsights(t.Id, answer, m.cfg.InsightMinChars, m.cfg.InsightMaxChars, m.cfg.MaxInsights)
		if verr != nil {
			return nil, verr
		}
		return []*pb.ModuleEvent{event(evExtracted, t.Id, m.decideInsights(ch, t.Id, llm, cands, dropped, now))}, nil
	case TypeReview:
		ins, round, reviewer, err := m.reviewTarget(t)
		if err != nil || !awaitsReview(ins, round, reviewer) {
			return nil, err
		}
		v, verr := parseVerdict(t.Id, answer, m.cfg.InsightMinChars, m.cfg.InsightMaxChars)
		if verr != nil {
			return nil, verr
		}
		return []*pb.ModuleEvent{event(evReview, t.Id, reviewData{Insight: ins.ID, Round: round, Reviewer: reviewer, LLM: llm,
			Task: t.Id, Verdict: v.Verdict, Rationale: v.Rationale, Revision: v.Revision})}, nil
	case TypeDedupConfirm:
		batch := m.dedupBatch(t)
		if len(batch) == 0 {
			return nil, nil
		}
		dups, verr := parseDuplicates(t.Id, answer, len(batch))
		if verr != nil {
			return nil, verr
		}
		res := dedupResolvedData{}
		for i, ins := range batch {
			r := dedupResult{Insight: ins.ID, Reason: "confirmed distinct by " + llm}
			if dups[i] {
				r = dedupResult{Insight: ins.ID, DuplicateOf: ins.BorderlineOf, Similarity: ins.BorderlineScore, Reason: "confirmed a duplicate by " + llm}
			}
			res.Results = append(res.Results, r)
		}
		return []*pb.ModuleEvent{event(evDedupResolved, t.Id, res)}, nil
	}
	return nil, unknownType(t)
}

// decideExchange records an exploration or critique answer; the first
// answer of a spawn task also starts the thread.
func (m *Module) decideExchange(t *pb.Task, answer, llm string) ([]*pb.ModuleEvent, error) {
	thID := t.Context[ctxThread]
	th := m.st.Threads[thID]
	var evs []*pb.ModuleEvent
	index := 0
	switch {
	case th == nil && t.TaskType == TypeExploration:
		s, ok := m.lookupSeed(t.Context[ctxSeed])
		if !ok {
			return nil, fmt.Errorf("explorer: task %s: unknown seed %q", t.Id, t.Context[ctxSeed])
		}
		thID = threadID(s.ID)
		evs = append(evs, event(evThreadStarted, t.Id, threadStartedData{Thread: thID, Seed: s.ID, Text: s.Text, Priority: s.Priority}))
	case th == nil:
		return nil, fmt.Errorf("explorer: task %s: unknown thread %q", t.Id, t.Context[ctxThread])
	case t.TaskType == TypeExploration && th.Status != ThreadExploring,
		t.TaskType == TypeCritique && (th.Status != ThreadCritique || hasKind(th, TypeCritique)):
		return nil, nil
	default:
		index = len(th.Exchanges)
	}
	prompt := lastMessage(t, "user")
	return append(evs, event(evExchange, t.Id, exchangeData{Thread: thID, Index: index, Kind: t.TaskType,
		Task: t.Id, LLM: llm, Prompt: prompt, Answer: answer})), nil
}

// decideInsights records extracted insights, each checked against the
// shared checker (blessed insights, insights under review, document
// sections), against decisions not yet applied and against the earlier
// items of the same answer: a duplicate is recorded as such with the id
// it duplicates; a borderline match awaits LLM confirmation when
// deduplication.use_batch_llm is on.
func (m *Module) decideInsights(ch *Chunk, taskID, llm string, cands []candidate, dropped []Dropped, now time.Time) extractedData {
	d := extractedData{Chunk: ch.ID, Task: taskID, LLM: llm, Dropped: dropped}
	extra := m.tentativeItems(now, ch.ID, KindPending, KindBlessed)
	var kept []dedup.Item
	for i, c := range cands {
		rec := insightRecord{ID: insightID(ch.ID, i), Text: c.Text, Tags: c.Tags, Confidence: c.Confidence, Status: StatusPending}
		if m.cfg.Dedup.Enabled {
			mt := m.closest(c.Text, slices.Concat(extra, kept), dedup.SkipIDs(rec.ID))
			switch {
			case mt.Duplicate:
				rec.Status, rec.DuplicateOf, rec.Similarity = StatusDuplicate, mt.ID, mt.Score
			case mt.Borderline && m.cfg.Dedup.UseBatchLLM:
				rec.Status, rec.BorderlineOf, rec.BorderlineText, rec.BorderlineScore = StatusDedupCheck, mt.ID, mt.Text, mt.Score
			}
		}
		if rec.Status != StatusDuplicate {
			kept = append(kept, dedup.Item{ID: rec.ID, Text: rec.Text, Kind: KindPending})
		}
		d.Insights = append(d.Insights, rec)
	}
	for _, it := range kept {
		m.tentative[it.ID] = tentative{text: it.Text, kind: KindPending, group: ch.ID, at: now}
	}
	return d
}

// closest is the most similar statement to text among the checker's items
// and extra ones, at or above the borderline.
func (m *Module) closest(text string, extra []dedup.Item, opts ...dedup.CheckOption) dedup.Match {
	best := m.checker.Match(text, opts...)
	cfg := m.checker.Config()
	for _, it := range extra {
		s := dedup.Similarity(text, it.Text)
		if s < cfg.BorderlineLow {
			continue
		}
		if best.ID == "" || s > best.Score || (s == best.Score && it.ID < best.ID) {
			best = dedup.Match{ID: it.ID, Kind: it.Kind, Text: it.Text, Score: s, Duplicate: s >= cfg.Threshold, Borderline: s < cfg.Threshold}
		}
	}
	return best
}

// tentativeItems are decided texts of the kinds whose events are not
// applied yet, except those of group (the decision being made again).
func (m *Module) tentativeItems(now time.Time, group string, kinds ...string) []dedup.Item {
	var out []dedup.Item
	for _, id := range sortedKeys(m.tentative) {
		tv := m.tentative[id]
		if now.Sub(tv.at) > tentativeTTL {
			delete(m.tentative, id)
			continue
		}
		if tv.group != group && slices.Contains(kinds, tv.kind) {
			out = append(out, dedup.Item{ID: id, Text: tv.text, Kind: tv.kind})
		}
	}
	return out
}

// DecideCompletion moves the task's subject on when its work is done, and
// records what a task that ended without a result leaves behind.
func (m *Module) DecideCompletion(t *pb.Task, now time.Time) ([]*pb.ModuleEvent, error) {
	return m.decideEnd(t, "", now)
}

// DecideFailure records a failed or cancelled task: a spawn that never
// started its thread fails the seed; a thread with some exploration goes
// on to critique; a failed critique is skipped; a failed synthesis or
// extraction fails the thread (the raw answer kept); a failed reviewer
// abstains; a failed dedup confirmation sends its insights to review.
func (m *Module) DecideFailure(t *pb.Task, reason string, now time.Time) ([]*pb.ModuleEvent, error) {
	if reason == "" {
		reason = "failed"
	}
	return m.decideEnd(t, reason, now)
}

// decideEnd: reason "" = the task completed.
func (m *Module) decideEnd(t *pb.Task, reason string, now time.Time) ([]*pb.ModuleEvent, error) {
	status := func(th *Thread, to, why string) []*pb.ModuleEvent {
		return []*pb.ModuleEvent{event(evThreadStatus, t.Id, threadStatusData{Thread: th.ID, Status: to, Reason: why})}
	}
	switch t.TaskType {
	case TypeExploration:
		th := m.st.Threads[t.Context[ctxThread]]
		if th == nil {
			why := reason
			if why == "" {
				why = "exploration ended without an answer"
			}
			return []*pb.ModuleEvent{event(evSeedFailed, t.Id, seedFailedData{ID: t.Context[ctxSeed], Reason: why})}, nil
		}
		if th.Status != ThreadExploring {
			return nil, nil
		}
		if reason == "" {
			return status(th, ThreadCritique, ""), nil
		}
		if len(explorations(th)) == 0 {
			return status(th, ThreadFailed, "exploration failed: "+reason), nil
		}
		return status(th, ThreadCritique, "exploration stopped early: "+reason), nil
	case TypeCritique:
		th, err := m.thread(t)
		if err != nil || th.Status != ThreadCritique {
			return nil, err
		}
		why := ""
		if reason != "" {
			why = "critique failed, going on without it: " + reason
		}
		return status(th, ThreadSynthesis, why), nil
	case TypeSynthesis:
		th, err := m.thread(t)
		if err != nil || th.Status != ThreadSynthesis || th.ChunkID != "" {
			return nil, err
		}
		if reason == "" {
			reason = reasonBudget
		}
		return status(th, ThreadFailed, "synthesis failed: "+reason), nil
	case TypeExtraction:
		ch, err := m.chunk(t)
		if err != nil || ch.Status != chunkNew {
			return nil, err
		}
		if reason == "" {
			reason = reasonBudget
		}
		return []*pb.ModuleEvent{event(evExtractionFailed, t.Id, extractionFailedData{Chunk: ch.ID, Reason: reason, Raw: lastMessage(t, "assistant")})}, nil
	case TypeReview:
		ins, round, reviewer, err := m.reviewTarget(t)
		if err != nil {
			return nil, err
		}
		var evs []*pb.ModuleEvent
		var extra *Review
		if awaitsReview(ins, round, reviewer) {
			// Failed, or ended without a verdict (its request budget spent
			// on unusable answers): the seat abstains, so the panel can
			// still decide; the task's key is used up.
			if reason == "" {
				reason = "ended without a verdict: " + reasonBudget
			}
			extra = &Review{Round: round, Reviewer: reviewer, LLM: llmOf(t), Task: t.Id, Verdict: VerdictAbstain, Rationale: reason}
			evs = append(evs, event(evReview, t.Id, reviewData{Insight: ins.ID, Round: round, Reviewer: reviewer, LLM: extra.LLM,
				Task: t.Id, Verdict: VerdictAbstain, Rationale: reason}))
		}
		if d := m.decideConsensus(ins, round, extra, now); d != nil {
			evs = append(evs, event(evDecided, t.Id, *d))
		}
		return evs, nil
	case TypeDedupConfirm:
		batch := m.dedupBatch(t)
		if len(batch) == 0 {
			return nil, nil
		}
		why := reasonDedupUnconfirmed
		if reason != "" {
			why += ": " + reason
		}
		res := dedupResolvedData{}
		for _, ins := range batch {
			res.Results = append(res.Results, dedupResult{Insight: ins.ID, Reason: why})
		}
		return []*pb.ModuleEvent{event(evDedupResolved, t.Id, res)}, nil
	}
	return nil, unknownType(t)
}

// decideConsensus decides an insight's round once every panel seat has a
// review (extra: one being decided now). The rule: at least MinBless
// bless and at most MaxReject reject blesses it, unless it duplicates a
// blessed insight; otherwise a revise (and at most MaxReject reject)
// before the last round revises it for another round; otherwise it is
// rejected. nil while the panel is incomplete or the round is decided.
func (m *Module) decideConsensus(ins *Insight, round int, extra *Review, now time.Time) *decidedData {
	if ins.Status != StatusPending || ins.Round != round {
		return nil
	}
	panel := m.panel(ins, round)
	got := map[string]Review{}
	for _, r := range ins.roundReviews(round) {
		got[r.Reviewer] = r
	}
	if extra != nil {
		got[extra.Reviewer] = *extra
	}
	counts := map[string]int{}
	var revisions []string
	for _, p := range panel {
		r, ok := got[p]
		if !ok {
			return nil
		}
		counts[r.Verdict]++
		if r.Verdict == VerdictRevise && r.Revision != "" {
			revisions = append(revisions, r.Revision) // panel is sorted: deterministic
		}
	}
	minBless := min(m.cfg.MinBless, len(panel))
	tally := fmt.Sprintf("%d bless, %d revise, %d reject, %d abstain of %d (rule: >= %d bless, <= %d reject)",
		counts[VerdictBless], counts[VerdictRevise], counts[VerdictReject], counts[VerdictAbstain], len(panel), minBless, m.cfg.MaxReject)
	d := &decidedData{Insight: ins.ID, Round: round, Reason: tally}
	switch {
	case len(panel) > 0 && counts[VerdictBless] >= minBless && counts[VerdictReject] <= m.cfg.MaxReject:
		if m.cfg.Dedup.Enabled {
			mt := m.closest(ins.Text, m.tentativeItems(now, ins.ID, KindBlessed), dedup.SkipKinds(KindPending), dedup.SkipIDs(ins.ID))
			if mt.Duplicate {
				d.Outcome, d.DuplicateOf, d.Similarity = outcomeDuplicate, mt.ID, mt.Score
				d.Reason = tally + "; duplicates " + mt.ID
				return d
			}
		}
		d.Outcome = outcomeBlessed
		m.tentative[ins.ID] = tentative{text: ins.Text, kind: KindBlessed, group: ins.ID, at: now}
	case len(revisions) > 0 && counts[VerdictReject] <= m.cfg.MaxReject && round < m.cfg.ReviewRounds:
		d.Outcome, d.Text = outcomeRevised, revisions[0]
	case len(panel) == 0 || counts[VerdictAbstain] == len(panel):
		d.Outcome, d.Reason = outcomeRejected, reasonNoVerdict
	default:
		d.Outcome = outcomeRejected
	}
	return d
}

// Helpers reading a task's subject.

func (m *Module) thread(t *pb.Task) (*Thread, error) {
	th := m.st.Threads[t.Context[ctxThread]]
	if th == nil {
		return nil, fmt.Errorf("explorer: task %s: unknown thread %q", t.Id, t.Context[ctxThread])
	}
	return th, nil
}

func (m *Module) chunk(t *pb.Task) (*Chunk, error) {
	ch := m.st.Chunks[t.Context[ctxChunk]]
	if ch == nil {
		return nil, fmt.Errorf("explorer: task %s: unknown chunk %q", t.Id, t.Context[ctxChunk])
	}
	return ch, nil
}

func (m *Module) reviewTarget(t *pb.Task) (*Insight, int, string, error) {
	ins := m.st.Insights[t.Context[ctxInsight]]
	if ins == nil {
		return nil, 0, "", fmt.Errorf("explorer: task %s: unknown insight %q", t.Id, t.Context[ctxInsight])
	}
	round, err := strconv.Atoi(t.Context[ctxRound])
	if err != nil || round < 1 {
		return nil, 0, "", fmt.Errorf("explorer: task %s: bad review round %q", t.Id, t.Context[ctxRound])
	}
	reviewer := t.Context[ctxReviewer]
	if reviewer == "" {
		return nil, 0, "", fmt.Errorf("explorer: task %s: no reviewer", t.Id)
	}
	return ins, round, reviewer, nil
}

// awaitsReview: the insight's round still needs this reviewer's verdict.
func awaitsReview(ins *Insight, round int, reviewer string) bool {
	return ins.Status == StatusPending && ins.Round == round && ins.reviewBy(round, reviewer) == nil
}

// dedupBatch lists the task's insights still awaiting confirmation.
func (m *Module) dedupBatch(t *pb.Task) []*Insight {
	var out []*Insight
	for _, id := range strings.Split(t.Context[ctxInsights], ",") {
		if ins := m.st.Insights[id]; ins != nil && ins.Status == StatusDedupCheck {
			out = append(out, ins)
		}
	}
	return out
}

func explorations(th *Thread) []Exchange {
	var out []Exchange
	for _, e := range th.Exchanges {
		if e.Kind == TypeExploration {
			out = append(out, e)
		}
	}
	return out
}

func hasKind(th *Thread, kind string) bool {
	return slices.ContainsFunc(th.Exchanges, func(e Exchange) bool { return e.Kind == kind })
}

func critiqueOf(th *Thread) string {
	for _, e := range th.Exchanges {
		if e.Kind == TypeCritique {
			return e.Answer
		}
	}
	return ""
}

// firstSentence is the opening sentence of an answer, without Markdown marks.
func firstSentence(s string) string {
	s = strings.TrimLeft(strings.TrimSpace(s), "#*-> ")
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i+1]
	}
	return clip(200, strings.ReplaceAll(s, "**", ""))
}

// lastQuestion is the last sentence ending in '?' of an answer.
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
	return clip(300, strings.TrimSpace(strings.ReplaceAll(s[start:], "**", "")))
}
