package explorer

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"

	"fano/modules/dedup"
	"fano/pb"
)

// Seed is a seed question.
type Seed struct {
	ID       string    `json:"id"`
	Text     string    `json:"text"`
	Priority int       `json:"priority"`
	AddedAt  time.Time `json:"added_at,omitzero"` // zero for config seeds
	Order    int64     `json:"order"`             // config seeds first, then in the order added
	From     string    `json:"from,omitempty"`    // the message it came from (a research finding)
}

// Exchange is one prompt and its answer on a thread.
type Exchange struct {
	Kind   string    `json:"kind"` // exploration | critique
	Task   string    `json:"task"`
	LLM    string    `json:"llm"`
	Prompt string    `json:"prompt"`
	Answer string    `json:"answer"`
	At     time.Time `json:"at"`
}

// Thread is the exploration of one seed.
type Thread struct {
	ID        string     `json:"id"`
	SeedID    string     `json:"seed_id"`
	Seed      string     `json:"seed"`
	Priority  int        `json:"priority"`
	Status    string     `json:"status"`
	Exchanges []Exchange `json:"exchanges"`
	// Exchanged is how many exchanges a finished thread had: it keeps
	// the count, not the exchanges (setThreadStatus).
	Exchanged int       `json:"exchanged,omitempty"`
	ChunkID   string    `json:"chunk_id,omitempty"`
	Error     string    `json:"error,omitempty"`
	StartedAt time.Time `json:"started_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Chunk is a thread's synthesis, the text insights are extracted from.
type Chunk struct {
	ID       string    `json:"id"`
	ThreadID string    `json:"thread_id"`
	Text     string    `json:"text"`
	LLM      string    `json:"llm"`
	Task     string    `json:"task"`
	At       time.Time `json:"at"`
	Status   string    `json:"status"` // new | extracted | failed
	Insights []string  `json:"insights,omitempty"`
	Dropped  []Dropped `json:"dropped,omitempty"` // extracted items that broke the rules
	Error    string    `json:"error,omitempty"`
	Raw      string    `json:"raw,omitempty"` // the last unusable answer, kept for inspection
}

// Dropped is an extracted item that failed a rule (kept for inspection).
type Dropped struct {
	Text   string `json:"text"`
	Reason string `json:"reason"`
}

// Review is one reviewer's verdict on one round of an insight.
type Review struct {
	Round     int       `json:"round"`
	Reviewer  string    `json:"reviewer"` // the backend the panel seat belongs to
	LLM       string    `json:"llm"`      // the backend that answered
	Task      string    `json:"task"`
	Verdict   string    `json:"verdict"`
	Rationale string    `json:"rationale"`
	Revision  string    `json:"revision,omitempty"`
	At        time.Time `json:"at"`
}

// Insight is an atomic statement extracted from a chunk.
type Insight struct {
	ID         string   `json:"id"`
	ChunkID    string   `json:"chunk_id"`
	ThreadID   string   `json:"thread_id"`
	SeedID     string   `json:"seed_id"`
	Text       string   `json:"text"`
	History    []string `json:"history,omitempty"` // earlier texts, oldest first (revisions)
	Tags       []string `json:"tags,omitempty"`
	Confidence float64  `json:"confidence"`
	Author     string   `json:"author"` // the backend that extracted it
	Status     string   `json:"status"`
	Round      int      `json:"round"`
	Reason     string   `json:"reason,omitempty"`
	// DuplicateOf names the stored statement this one duplicates.
	DuplicateOf string  `json:"duplicate_of,omitempty"`
	Similarity  float64 `json:"similarity,omitempty"`
	// Borderline: the closest statement when the match awaits LLM confirmation.
	BorderlineOf    string    `json:"borderline_of,omitempty"`
	BorderlineText  string    `json:"borderline_text,omitempty"`
	BorderlineScore float64   `json:"borderline_score,omitempty"`
	Reviews         []Review  `json:"reviews,omitempty"`
	Order           int64     `json:"order"`
	CreatedAt       time.Time `json:"created_at"`
	DecidedAt       time.Time `json:"decided_at,omitzero"`
	BlessedAt       time.Time `json:"blessed_at,omitzero"` // kept if later found a duplicate
	// Delivered: the documenter acknowledged the blessing (flows.go).
	Delivered bool `json:"delivered,omitempty"`
}

// state is everything the explorer logs. Its JSON is the snapshot.
type state struct {
	Seeds       map[string]*Seed    `json:"seeds"`        // added by command
	FailedSeeds map[string]string   `json:"failed_seeds"` // seed id -> why its thread never started
	Threads     map[string]*Thread  `json:"threads"`
	Chunks      map[string]*Chunk   `json:"chunks"`
	Insights    map[string]*Insight `json:"insights"`
	Blessed     []string            `json:"blessed"` // the blessed store, in blessing order
	Seq         int64               `json:"seq"`     // order counter (seeds, insights)
}

func newState() state {
	return state{
		Seeds: map[string]*Seed{}, FailedSeeds: map[string]string{}, Threads: map[string]*Thread{},
		Chunks: map[string]*Chunk{}, Insights: map[string]*Insight{}, Blessed: []string{},
	}
}

// Event types (pb.ModuleEvent.Type); their data are the structs below,
// as JSON.
const (
	evSeedAdded        = "seed_added"
	evSeedFailed       = "seed_failed"
	evThreadStarted    = "thread_started"
	evExchange         = "exchange_recorded"
	evThreadStatus     = "thread_status"
	evChunk            = "chunk_created"
	evExtracted        = "insights_extracted"
	evExtractionFailed = "extraction_failed"
	evDedupResolved    = "dedup_resolved"
	evReview           = "review_recorded"
	evDecided          = "insight_decided"
	evMarkedDuplicate  = "insight_marked_duplicate" // repair
	evBlessedReindexed = "blessed_reindexed"        // repair
	evInsightDelivered = "insight_delivered"        // the documenter acknowledged a blessing
)

// Outcomes of a review round (insight_decided).
const (
	outcomeBlessed   = "blessed"
	outcomeRejected  = "rejected"
	outcomeRevised   = "revised"
	outcomeDuplicate = "duplicate"
)

// Chunk statuses.
const (
	chunkNew    = "new"
	chunkDone   = "extracted"
	chunkFailed = "failed"
)

const (
	reasonBudget           = "request budget spent without a usable answer"
	reasonNoVerdict        = "no reviewer gave a verdict"
	reasonDedupUnconfirmed = "not confirmed as a duplicate"
)

type seedAddedData struct {
	ID       string `json:"id"`
	Text     string `json:"text"`
	Priority int    `json:"priority"`
	From     string `json:"from,omitempty"` // a message's id (flows.go)
}

type insightDeliveredData struct {
	Insight string `json:"insight"`
	Outcome string `json:"outcome"`          // taken | refused
	Reason  string `json:"reason,omitempty"` // why refused
}

type seedFailedData struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

type threadStartedData struct {
	Thread   string `json:"thread"`
	Seed     string `json:"seed"`
	Text     string `json:"text"`
	Priority int    `json:"priority"`
}

type exchangeData struct {
	Thread string `json:"thread"`
	Index  int    `json:"index"`
	Kind   string `json:"kind"`
	Task   string `json:"task"`
	LLM    string `json:"llm"`
	Prompt string `json:"prompt"`
	Answer string `json:"answer"`
}

type threadStatusData struct {
	Thread string `json:"thread"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

type chunkData struct {
	Chunk  string `json:"chunk"`
	Thread string `json:"thread"`
	Text   string `json:"text"`
	LLM    string `json:"llm"`
	Task   string `json:"task"`
}

type insightRecord struct {
	ID              string   `json:"id"`
	Text            string   `json:"text"`
	Tags            []string `json:"tags,omitempty"`
	Confidence      float64  `json:"confidence"`
	Status          string   `json:"status"`
	DuplicateOf     string   `json:"duplicate_of,omitempty"`
	Similarity      float64  `json:"similarity,omitempty"`
	BorderlineOf    string   `json:"borderline_of,omitempty"`
	BorderlineText  string   `json:"borderline_text,omitempty"`
	BorderlineScore float64  `json:"borderline_score,omitempty"`
}

type extractedData struct {
	Chunk    string          `json:"chunk"`
	Task     string          `json:"task"`
	LLM      string          `json:"llm"`
	Insights []insightRecord `json:"insights"`
	Dropped  []Dropped       `json:"dropped,omitempty"`
}

type extractionFailedData struct {
	Chunk  string `json:"chunk"`
	Reason string `json:"reason"`
	Raw    string `json:"raw,omitempty"`
}

type dedupResult struct {
	Insight     string  `json:"insight"`
	DuplicateOf string  `json:"duplicate_of,omitempty"` // "" = not a duplicate: review it
	Similarity  float64 `json:"similarity,omitempty"`
	Reason      string  `json:"reason,omitempty"`
}

type dedupResolvedData struct {
	Results []dedupResult `json:"results"`
}

type reviewData struct {
	Insight   string `json:"insight"`
	Round     int    `json:"round"`
	Reviewer  string `json:"reviewer"`
	LLM       string `json:"llm"`
	Task      string `json:"task"`
	Verdict   string `json:"verdict"`
	Rationale string `json:"rationale"`
	Revision  string `json:"revision,omitempty"`
}

type decidedData struct {
	Insight     string  `json:"insight"`
	Round       int     `json:"round"`
	Outcome     string  `json:"outcome"`
	Text        string  `json:"text,omitempty"` // the revision, for outcome revised
	DuplicateOf string  `json:"duplicate_of,omitempty"`
	Similarity  float64 `json:"similarity,omitempty"`
	Reason      string  `json:"reason,omitempty"`
}

type markedDuplicateData struct {
	Insight     string  `json:"insight"`
	DuplicateOf string  `json:"duplicate_of"`
	Similarity  float64 `json:"similarity"`
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("explorer: encode event: %v", err)) // only plain structs reach here
	}
	return b
}

func decode[T any](e *pb.ModuleEvent) (T, error) {
	var v T
	if err := json.Unmarshal(e.Data, &v); err != nil {
		return v, fmt.Errorf("explorer: %s event (task %q) does not decode: %w", e.Type, e.TaskId, err)
	}
	return v, nil
}

func isActive(status string) bool {
	switch status {
	case ThreadExploring, ThreadCritique, ThreadSynthesis, ThreadExtraction:
		return true
	}
	return false
}

func isOpen(status string) bool { return status == StatusPending || status == StatusDedupCheck }

// Apply changes the state. It is idempotent: an event whose effect is
// already there (a second verdict of the same reviewer, a decision on an
// insight already decided) changes nothing. at is the event's time.
func (m *Module) Apply(e *pb.ModuleEvent, at time.Time) error {
	at = at.UTC()
	st := &m.st
	switch e.Type {
	case evSeedAdded:
		d, err := decode[seedAddedData](e)
		if err != nil {
			return err
		}
		if _, ok := st.Seeds[d.ID]; ok {
			return nil
		}
		st.Seq++
		st.Seeds[d.ID] = &Seed{ID: d.ID, Text: d.Text, Priority: d.Priority, AddedAt: at, Order: st.Seq, From: d.From}

	case evSeedFailed:
		d, err := decode[seedFailedData](e)
		if err != nil {
			return err
		}
		delete(m.spawning, d.ID)
		if _, started := st.Threads[threadID(d.ID)]; !started {
			st.FailedSeeds[d.ID] = d.Reason
		}

	case evThreadStarted:
		d, err := decode[threadStartedData](e)
		if err != nil {
			return err
		}
		delete(m.spawning, d.Seed)
		if _, ok := st.Threads[d.Thread]; ok {
			return nil
		}
		st.Threads[d.Thread] = &Thread{ID: d.Thread, SeedID: d.Seed, Seed: d.Text, Priority: d.Priority,
			Status: ThreadExploring, Exchanges: []Exchange{}, StartedAt: at, UpdatedAt: at}
		m.active[d.Thread] = true

	case evExchange:
		d, err := decode[exchangeData](e)
		if err != nil {
			return err
		}
		th, ok := st.Threads[d.Thread]
		if !ok {
			return fmt.Errorf("explorer: exchange for unknown thread %s (task %s)", d.Thread, e.TaskId)
		}
		if d.Index != len(th.Exchanges) || !isActive(th.Status) {
			return nil // recorded already, out of turn, or the thread is finished: keep what is there
		}
		th.Exchanges = append(th.Exchanges, Exchange{Kind: d.Kind, Task: d.Task, LLM: d.LLM, Prompt: d.Prompt, Answer: d.Answer, At: at})
		th.UpdatedAt = at

	case evThreadStatus:
		d, err := decode[threadStatusData](e)
		if err != nil {
			return err
		}
		th, ok := st.Threads[d.Thread]
		if !ok {
			return fmt.Errorf("explorer: status for unknown thread %s (task %s)", d.Thread, e.TaskId)
		}
		m.setThreadStatus(th, d.Status, d.Reason, at)

	case evChunk:
		d, err := decode[chunkData](e)
		if err != nil {
			return err
		}
		th, ok := st.Threads[d.Thread]
		if !ok {
			return fmt.Errorf("explorer: chunk %s of unknown thread %s", d.Chunk, d.Thread)
		}
		if _, ok := st.Chunks[d.Chunk]; ok {
			return nil
		}
		st.Chunks[d.Chunk] = &Chunk{ID: d.Chunk, ThreadID: d.Thread, Text: d.Text, LLM: d.LLM, Task: d.Task, At: at, Status: chunkNew}
		th.ChunkID = d.Chunk
		m.setThreadStatus(th, ThreadExtraction, "", at)

	case evExtracted:
		d, err := decode[extractedData](e)
		if err != nil {
			return err
		}
		return m.applyExtracted(d, at)

	case evExtractionFailed:
		d, err := decode[extractionFailedData](e)
		if err != nil {
			return err
		}
		ch, ok := st.Chunks[d.Chunk]
		if !ok {
			return fmt.Errorf("explorer: extraction of unknown chunk %s failed", d.Chunk)
		}
		if ch.Status != chunkNew {
			return nil
		}
		ch.Status, ch.Error, ch.Raw = chunkFailed, d.Reason, d.Raw
		if th := st.Threads[ch.ThreadID]; th != nil {
			m.setThreadStatus(th, ThreadFailed, "insight extraction failed: "+d.Reason, at)
		}

	case evDedupResolved:
		d, err := decode[dedupResolvedData](e)
		if err != nil {
			return err
		}
		for _, r := range d.Results {
			ins := st.Insights[r.Insight]
			if ins == nil || ins.Status != StatusDedupCheck {
				continue
			}
			if r.DuplicateOf != "" {
				ins.Status, ins.DuplicateOf, ins.Similarity, ins.DecidedAt = StatusDuplicate, r.DuplicateOf, r.Similarity, at
				ins.Reason = r.Reason
				m.closeInsight(ins)
				continue
			}
			ins.Status = StatusPending
			ins.Reason = r.Reason
		}

	case evReview:
		d, err := decode[reviewData](e)
		if err != nil {
			return err
		}
		ins := st.Insights[d.Insight]
		if ins == nil {
			return fmt.Errorf("explorer: review of unknown insight %s (task %s)", d.Insight, e.TaskId)
		}
		if ins.Status != StatusPending || ins.Round != d.Round || ins.reviewBy(d.Round, d.Reviewer) != nil {
			return nil
		}
		ins.Reviews = append(ins.Reviews, Review{Round: d.Round, Reviewer: d.Reviewer, LLM: d.LLM, Task: d.Task,
			Verdict: d.Verdict, Rationale: d.Rationale, Revision: d.Revision, At: at})

	case evDecided:
		d, err := decode[decidedData](e)
		if err != nil {
			return err
		}
		delete(m.tentative, d.Insight)
		ins := st.Insights[d.Insight]
		if ins == nil {
			return fmt.Errorf("explorer: decision on unknown insight %s (task %s)", d.Insight, e.TaskId)
		}
		if ins.Status != StatusPending || ins.Round != d.Round {
			return nil
		}
		ins.Reason = d.Reason
		switch d.Outcome {
		case outcomeBlessed:
			ins.Status, ins.DecidedAt, ins.BlessedAt = StatusBlessed, at, at
			st.Blessed = append(st.Blessed, ins.ID)
			delete(m.open, ins.ID)
			m.checker.Add(ins.ID, ins.Text, KindBlessed)
		case outcomeDuplicate:
			ins.Status, ins.DuplicateOf, ins.Similarity, ins.DecidedAt = StatusDuplicate, d.DuplicateOf, d.Similarity, at
			m.closeInsight(ins)
		case outcomeRejected:
			ins.Status, ins.DecidedAt = StatusRejected, at
			m.closeInsight(ins)
		case outcomeRevised:
			ins.History = append(ins.History, ins.Text)
			ins.Text = d.Text
			ins.Round++
			m.checker.Add(ins.ID, ins.Text, KindPending)
		default:
			return fmt.Errorf("explorer: decision on insight %s has unknown outcome %q", d.Insight, d.Outcome)
		}

	case evInsightDelivered:
		d, err := decode[insightDeliveredData](e)
		if err != nil {
			return err
		}
		ins := st.Insights[d.Insight]
		if ins == nil {
			return fmt.Errorf("explorer: delivery of unknown insight %s", d.Insight)
		}
		ins.Delivered = true

	case evMarkedDuplicate:
		d, err := decode[markedDuplicateData](e)
		if err != nil {
			return err
		}
		ins := st.Insights[d.Insight]
		if ins == nil {
			return fmt.Errorf("explorer: repair of unknown insight %s", d.Insight)
		}
		if ins.Status == StatusDuplicate {
			return nil
		}
		ins.Status, ins.DuplicateOf, ins.Similarity, ins.DecidedAt = StatusDuplicate, d.DuplicateOf, d.Similarity, at
		ins.Reason = "found a duplicate of a blessed insight by verify"
		st.Blessed = slices.DeleteFunc(st.Blessed, func(id string) bool { return id == d.Insight })
		m.closeInsight(ins)

	case evBlessedReindexed:
		m.reindexBlessed()

	default:
		return fmt.Errorf("explorer: unknown event type %q (task %s)", e.Type, e.TaskId)
	}
	return nil
}

func (m *Module) applyExtracted(d extractedData, at time.Time) error {
	st := &m.st
	ch, ok := st.Chunks[d.Chunk]
	if !ok {
		return fmt.Errorf("explorer: insights of unknown chunk %s (task %s)", d.Chunk, d.Task)
	}
	for _, r := range d.Insights {
		delete(m.tentative, r.ID)
	}
	if ch.Status != chunkNew {
		return nil
	}
	th := st.Threads[ch.ThreadID]
	seed := ""
	if th != nil {
		seed = th.SeedID
	}
	// The synthesis was read once, by the extraction: its insights are
	// what stays (ids in ch.Insights); the text would only grow the heap.
	ch.Status, ch.Dropped, ch.Text = chunkDone, d.Dropped, ""
	for _, r := range d.Insights {
		if _, ok := st.Insights[r.ID]; ok {
			continue
		}
		st.Seq++
		ins := &Insight{
			ID: r.ID, ChunkID: ch.ID, ThreadID: ch.ThreadID, SeedID: seed, Text: r.Text, Tags: r.Tags,
			Confidence: r.Confidence, Author: d.LLM, Status: r.Status, Round: 1,
			DuplicateOf: r.DuplicateOf, Similarity: r.Similarity,
			BorderlineOf: r.BorderlineOf, BorderlineText: r.BorderlineText, BorderlineScore: r.BorderlineScore,
			Order: st.Seq, CreatedAt: at,
		}
		if ins.Status == StatusDuplicate {
			ins.DecidedAt = at
		}
		st.Insights[r.ID] = ins
		ch.Insights = append(ch.Insights, r.ID)
		if isOpen(ins.Status) {
			m.open[ins.ID] = true
			m.checker.Add(ins.ID, ins.Text, KindPending)
		}
	}
	if th != nil {
		m.setThreadStatus(th, ThreadDone, "", at)
	}
	return nil
}

// setThreadStatus moves a thread on; a finished thread stays finished.
func (m *Module) setThreadStatus(th *Thread, status, reason string, at time.Time) {
	if th.Status == ThreadDone || th.Status == ThreadFailed || th.Status == status {
		return
	}
	th.Status, th.UpdatedAt = status, at
	if reason != "" {
		th.Error = reason
	}
	if status == ThreadDone || status == ThreadFailed {
		// A finished thread keeps how many exchanges it had, not the
		// exchanges: nothing reads them again (its chunk and insights
		// carry what came of it), and keeping them grew the heap with
		// every thread of a long run. The WAL's exchange events hold
		// them until compaction.
		th.Exchanged, th.Exchanges = len(th.Exchanges), []Exchange{}
	}
	if isActive(status) {
		m.active[th.ID] = true
	} else {
		delete(m.active, th.ID)
	}
}

// closeInsight takes an insight out of the open set and the checker, and
// compacts what it will not need again.
func (m *Module) closeInsight(ins *Insight) {
	delete(m.open, ins.ID)
	m.checker.Remove(ins.ID)
	compactClosed(ins)
}

// compactClosed drops the texts of a closed insight that was never
// blessed: its reviewers' rationales and revisions, its earlier texts and
// the borderline match's text. Nothing reads them once it is closed, and
// most insights end this way, so they grew the heap all run; who gave
// which verdict in which round stays. A once-blessed insight keeps all:
// its output file (blessed/<id>.json) shows them and `fano verify`
// renders it again from the state.
func compactClosed(ins *Insight) {
	if !ins.BlessedAt.IsZero() {
		return
	}
	for i := range ins.Reviews {
		ins.Reviews[i].Rationale, ins.Reviews[i].Revision = "", ""
	}
	ins.History, ins.BorderlineText = nil, ""
}

func (m *Module) reindexBlessed() {
	var ids []string
	for id, ins := range m.st.Insights {
		if ins.Status == StatusBlessed {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(a, b int) bool {
		x, y := m.st.Insights[ids[a]], m.st.Insights[ids[b]]
		if !x.BlessedAt.Equal(y.BlessedAt) {
			return x.BlessedAt.Before(y.BlessedAt)
		}
		return x.Order < y.Order
	})
	m.st.Blessed = append([]string{}, ids...)
}

func (ins *Insight) reviewBy(round int, reviewer string) *Review {
	for i := range ins.Reviews {
		if r := &ins.Reviews[i]; r.Round == round && r.Reviewer == reviewer {
			return r
		}
	}
	return nil
}

func (ins *Insight) roundReviews(round int) []Review {
	var out []Review
	for _, r := range ins.Reviews {
		if r.Round == round {
			out = append(out, r)
		}
	}
	return out
}

// Snapshot encodes the state (JSON with sorted keys: equal states give
// equal bytes).
func (m *Module) Snapshot() ([]byte, error) { return json.Marshal(m.st) }

// Restore replaces the state with a snapshot and rebuilds what is derived
// from it, including the explorer's items in the shared checker.
func (m *Module) Restore(data []byte) error {
	st := newState()
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("explorer: restore: %w", err)
	}
	if st.Seeds == nil || st.Threads == nil || st.Chunks == nil || st.Insights == nil || st.FailedSeeds == nil || st.Blessed == nil {
		return fmt.Errorf("explorer: restore: the snapshot has a null section")
	}
	m.reset(st)
	return nil
}

// reset installs st and derives the indexes and checker items from it.
func (m *Module) reset(st state) {
	m.st = st
	m.active, m.open = map[string]bool{}, map[string]bool{}
	m.spawning, m.tentative = map[string]bool{}, map[string]tentative{}
	for id, th := range st.Threads {
		if isActive(th.Status) {
			m.active[id] = true
		}
	}
	var blessed, pending []dedup.Item
	for _, id := range sortedKeys(st.Insights) {
		ins := st.Insights[id]
		switch {
		case ins.Status == StatusBlessed:
			blessed = append(blessed, dedup.Item{ID: id, Text: ins.Text})
		case isOpen(ins.Status):
			m.open[id] = true
			pending = append(pending, dedup.Item{ID: id, Text: ins.Text})
		}
	}
	m.checker.Load(KindBlessed, blessed)
	m.checker.Load(KindPending, pending)
}
