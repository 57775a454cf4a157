package explorer

import (
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"fano/modules"
	"fano/pb"
)

// Task keys (docs/architecture.md, State, WAL and recovery): one task per
// piece of work, so proposing it again is harmless.
//
//	explorer/exploration/<thread>            a thread's exploration (also the spawn of a new thread)
//	explorer/critique/<thread>
//	explorer/synthesis/<thread>
//	explorer/insight_extraction/<chunk>
//	explorer/insight_review/<insight>/r<round>/<reviewer backend>
//	explorer/dedup_confirm/<first insight of the batch>

// Context keys of the explorer's tasks.
const (
	ctxSeed     = "seed"
	ctxThread   = "thread"
	ctxChunk    = "chunk"
	ctxInsight  = "insight"
	ctxRound    = "round"
	ctxReviewer = "reviewer"
	ctxInsights = "insights" // dedup_confirm: comma-separated insight ids
)

// explorationBase is the base priority of an exploration; a spawn task
// gets explorationBase + 10*seed priority (docs/architecture.md, Priority).
const explorationBase = 50

func reviewSubject(insight string, round int, reviewer string) string {
	return insight + "/r" + strconv.Itoa(round) + "/" + reviewer
}

func (m *Module) task(typ, subject string, ctx map[string]string) *pb.Task {
	return &pb.Task{
		Id: modules.TaskKey(Name, typ, subject), Module: Name, TaskType: typ, Subject: subject,
		Context: ctx, MaxRequests: m.maxRequests(typ, 1),
	}
}

// Propose returns the tasks the state calls for: active
// threads' next step, reviews of pending insights (one task per panel
// seat), dedup confirmation batches, and new threads for unexplored seeds
// while fewer than max_active_threads are active.
func (m *Module) Propose(now time.Time) []*pb.Task {
	var out []*pb.Task
	for _, id := range sortedKeys(m.active) {
		if t := m.threadTask(m.st.Threads[id]); t != nil {
			out = append(out, t)
		}
	}
	for _, id := range sortedKeys(m.open) {
		ins := m.st.Insights[id]
		if ins.Status != StatusPending {
			continue
		}
		for _, reviewer := range m.panel(ins, ins.Round) {
			if ins.reviewBy(ins.Round, reviewer) != nil {
				continue
			}
			t := m.task(TypeReview, reviewSubject(ins.ID, ins.Round, reviewer), map[string]string{
				ctxInsight: ins.ID, ctxRound: strconv.Itoa(ins.Round), ctxReviewer: reviewer,
			})
			t.LlmPreference = reviewer
			out = append(out, t)
		}
	}
	if t := m.dedupTask(now); t != nil {
		out = append(out, t)
	}
	return append(out, m.spawnTasks()...)
}

func (m *Module) threadTask(th *Thread) *pb.Task {
	ctx := map[string]string{ctxSeed: th.SeedID, ctxThread: th.ID}
	switch th.Status {
	case ThreadExploring:
		t := m.task(TypeExploration, th.ID, ctx)
		t.MaxRequests = m.maxRequests(TypeExploration, m.cfg.ExplorationTurns)
		if th.Priority > 0 {
			t.BasePriority = int32(explorationBase + 10*th.Priority)
		}
		return t
	case ThreadCritique:
		t := m.task(TypeCritique, th.ID, ctx)
		t.LlmExclude = m.critiqueExclude(th)
		return t
	case ThreadSynthesis:
		t := m.task(TypeSynthesis, th.ID, ctx)
		t.RequiresDeepMode = m.deepMode()
		if t.RequiresDeepMode {
			t.LlmPreference = m.cfg.PreferDeep
		}
		return t
	case ThreadExtraction:
		if ch := m.st.Chunks[th.ChunkID]; ch != nil && ch.Status == chunkNew {
			ctx[ctxChunk] = ch.ID
			return m.task(TypeExtraction, ch.ID, ctx)
		}
	}
	return nil
}

// deepMode: synthesis runs in deep mode when some backend has one.
func (m *Module) deepMode() bool { return len(m.cfg.DeepBackends) > 0 || m.cfg.PreferDeep != "" }

// authors are the backends that explored a thread.
func authors(th *Thread) []string {
	var out []string
	for _, e := range th.Exchanges {
		if e.Kind == TypeExploration && e.LLM != "" && !slices.Contains(out, e.LLM) {
			out = append(out, e.LLM)
		}
	}
	slices.Sort(out)
	return out
}

// critiqueExclude keeps the critic off the thread's authors, unless that
// would leave no backend at all.
func (m *Module) critiqueExclude(th *Thread) []string {
	ex := authors(th)
	if len(m.cfg.Backends) > 0 {
		left := 0
		for _, b := range m.cfg.Backends {
			if !slices.Contains(ex, b) {
				left++
			}
		}
		if left == 0 {
			return nil
		}
	}
	return ex
}

// panel chooses the review panel of an insight's round: ReviewPanelSize
// different backends, without the insight's author when there are enough
// others, starting at a position hashed from the insight and round so
// that reviews spread over the backends. A function of the config and
// the insight, so it is derived, never logged.
func (m *Module) panel(ins *Insight, round int) []string {
	cands := m.cfg.Backends
	size := min(m.cfg.ReviewPanelSize, len(cands))
	if size == 0 {
		return nil
	}
	if len(cands)-1 >= size && slices.Contains(cands, ins.Author) {
		cands = slices.DeleteFunc(slices.Clone(cands), func(b string) bool { return b == ins.Author })
	}
	h := fnv.New32a()
	h.Write([]byte(ins.ID + "/r" + strconv.Itoa(round)))
	start := int(h.Sum32() % uint32(len(cands)))
	out := make([]string, 0, size)
	for i := range size {
		out = append(out, cands[(start+i)%len(cands)])
	}
	slices.Sort(out)
	return out
}

// dedupTask batches insights awaiting dedup confirmation: a task when
// BatchSize of them wait, or fewer once the oldest has waited
// DedupFlushAfter or no thread is active to add more. The batch is keyed
// by its first insight; its task resolves every insight it names, so the
// next batch starts at another insight.
func (m *Module) dedupTask(now time.Time) *pb.Task {
	var waiting []*Insight
	for _, id := range sortedKeys(m.open) {
		if ins := m.st.Insights[id]; ins.Status == StatusDedupCheck {
			waiting = append(waiting, ins)
		}
	}
	if len(waiting) == 0 {
		return nil
	}
	slices.SortFunc(waiting, func(a, b *Insight) int { return int(a.Order - b.Order) })
	n := min(len(waiting), m.cfg.Dedup.BatchSize)
	if n < m.cfg.Dedup.BatchSize && len(m.active) > 0 && now.Sub(waiting[0].CreatedAt) < m.cfg.DedupFlushAfter {
		return nil
	}
	ids := make([]string, n)
	for i, ins := range waiting[:n] {
		ids[i] = ins.ID
	}
	return m.task(TypeDedupConfirm, ids[0], map[string]string{ctxInsights: strings.Join(ids, ",")})
}

// spawnTasks proposes the exploration task that starts a thread for the
// best unexplored seeds while there is room.
func (m *Module) spawnTasks() []*pb.Task {
	var waiting []Seed
	consider := func(s Seed) {
		if _, started := m.st.Threads[threadID(s.ID)]; started {
			return
		}
		if _, failed := m.st.FailedSeeds[s.ID]; failed || m.spawning[s.ID] {
			return
		}
		waiting = append(waiting, s)
	}
	for _, s := range m.seeds {
		consider(s)
	}
	for _, s := range m.st.Seeds {
		consider(*s)
	}
	sortSeeds(waiting)
	room := m.cfg.MaxActiveThreads - len(m.active) - len(m.spawning)
	for _, s := range waiting[:max(0, min(room, len(waiting)))] {
		m.spawning[s.ID] = true
	}
	var spawn []Seed
	for _, id := range sortedKeys(m.spawning) {
		s, ok := m.lookupSeed(id)
		if _, started := m.st.Threads[threadID(id)]; !ok || started {
			delete(m.spawning, id)
			continue
		}
		spawn = append(spawn, s)
	}
	sortSeeds(spawn)
	var out []*pb.Task
	for _, s := range spawn {
		th := threadID(s.ID)
		t := m.task(TypeExploration, th, map[string]string{ctxSeed: s.ID, ctxThread: th})
		t.MaxRequests = m.maxRequests(TypeExploration, m.cfg.ExplorationTurns)
		if s.Priority > 0 {
			t.BasePriority = int32(explorationBase + 10*s.Priority)
		}
		out = append(out, t)
	}
	return out
}
