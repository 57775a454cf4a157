package pipeline

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"fano/modules"
	"fano/pb"
)

// Name is the module's name.
const Name = "pipeline"

// TaskType is the type of every pipeline task: one (item, llm step, model)
// pair. The simulator answers it in the shape of the step's schema.
const TaskType = "pipeline_llm"

// Output files, relative to <run dir>/output.
const (
	ResultsFile  = "results.jsonl"
	FailuresFile = "failures.jsonl"
	SummaryFile  = "summary.json"
)

// Pair statuses.
const (
	StatusOK     = "ok"
	StatusFailed = "failed"
)

// Module runs one pipeline definition over its items. Not safe for
// concurrent use: its host actor is its only caller.
type Module struct {
	def    *Definition
	items  []*Item
	keys   keyIndex // item key -> position
	window int
	hold   bool
	st     state
	// usage is the usage the backend reported with the answer being
	// decided (TakeUsage), for that task only.
	usage     modules.Usage
	usageTask string

	// Transient: what is in flight now. A crash loses nothing here that
	// matters: in-flight requests are re-asked after recovery.
	reserved map[string]reservation // task id -> cost and request held back for it
	deferred map[string]string      // task id -> why NextAction refused to ask
	stopped  string                 // why no new work is proposed (a cap was reached)
	capNote  string                 // the latest request max_cost could not afford, and why
	low      int                    // items before it are finished (Propose's cursor)
	offered  map[offerID]bool       // tasks proposed (Propose skips them but every reofferEvery calls)
	proposes int
	now      time.Time
	dayKey   dayKey     // the last day's text (dayOf)
	grid     *gridOrder // the pairs' order by key (snapshots), once worked out
	// spent is the sum of the pairs' cost (not a second copy in the
	// state): kept up to date by Apply, summed again by Restore.
	spent float64
	// prep holds the items in the prepared buffer (only with a
	// watermark), updated per item as its pairs or offers change, so
	// Propose does not walk every item to count them.
	prep map[int]bool
	// priced: the prompt and estimate Propose worked out for the task it
	// checked against the cost cap; that task's NextAction uses them
	// instead of rendering the prompt again.
	priced pricedTask
	// items' status (open, done, failed) and how many are finished,
	// updated per item as its pairs change, so progress is not a walk
	// over every item.
	itemSt   []itemState
	finished int
	// allFinished mirrors finished == len(items) for other goroutines:
	// `fano pipeline run` ends as soon as it is true and the system is
	// idle, instead of waiting for idle ticks.
	allFinished atomic.Bool
	// Propose's window: items [low, scan) were looked at; open counts
	// their ready pairs not done (openAt per item, as of its last look);
	// dirty lists those whose pairs changed since, starved those a full
	// prepared buffer held back.
	scan    int
	open    int32
	openAt  []int32
	dirty   []int
	isDirty []bool
	starved map[int]bool
	// skipped caches the when: decisions (when.go), per step and item.
	skipped map[int]map[*Step]bool
	// panelRate: the panel's rate per step and model (Report).
	panelRate RateMeter

	// The pairs (pairs.go): the grid's in slots, column by column of
	// cols; others by name in extra; npairs: how many have state. (st.Pairs
	// holds them only as a snapshot is read.)
	slots  []pair
	width  int
	cols   []column
	extra  map[pairID]*pair
	npairs int
	// vals: outputs decoded, of open items' pairs (valueOf).
	vals map[*pair]any
	// outputs: the short outputs seen, shared by the pairs that gave
	// them (most answers of a step are one of a few: {"verdict":true}).
	outputs outputSet
}

type pricedTask struct {
	taskID, prompt string
	est            float64
}

type reservation struct {
	cost      float64
	promptLen int
}

// state is what a snapshot holds. (Snapshots of older runs also have
// "spent", the pairs' cost summed; it is ignored and summed again.)
// Pairs is filled only while a snapshot is read: the module keeps its
// pairs in its table (pairs.go), not by a key string each.
type state struct {
	Pairs    map[string]*pairRecord `json:"pairs"`
	Requests map[string]int         `json:"requests"` // UTC day -> LLM answers
	Finished int                    `json:"finished"` // run_finished events
	LastStop *Stop                  `json:"last_stop,omitempty"`
}

// Config shapes a module.
type Config struct {
	Def   *Definition
	Items []*Item
	// Window bounds the tasks proposed ahead of the running ones (default
	// 2048): a run of a million items does not offer a million tasks.
	Window int
	// Hold: propose nothing (maintenance commands change state only).
	Hold bool
}

// TakeUsage notes the usage the backend reported with a task's answer
// (from the answer's event), just before the answer is decided: the
// answer's cost is from it; without it, it is estimated from sizes.
func (m *Module) TakeUsage(taskID string, u modules.Usage) {
	m.usage, m.usageTask = u, taskID
}

// DefaultWindow is Config.Window's default.
const DefaultWindow = 2048

// New returns a module for a definition and its items.
func New(cfg Config) *Module {
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	m := &Module{def: cfg.Def, items: cfg.Items, window: cfg.Window, hold: cfg.Hold, keys: newKeyIndex(cfg.Items),
		reserved: map[string]reservation{}, deferred: map[string]string{}, st: newState(),
		offered: map[offerID]bool{}, prep: map[int]bool{},
		openAt: make([]int32, len(cfg.Items)), isDirty: make([]bool, len(cfg.Items)), starved: map[int]bool{}}
	m.layoutPairs()
	m.countItems()
	releaseLineSums(cfg.Items)
	return m
}

func newState() state {
	return state{Requests: map[string]int{}}
}

func (m *Module) Name() string        { return Name }
func (m *Module) TaskTypes() []string { return []string{TaskType} }

// Definition returns the module's definition.
func (m *Module) Definition() *Definition { return m.def }

func pairKey(step, item, model string) string { return step + "\x00" + item + "\x00" + model }

func splitPairKey(k string) (step, item, model string) {
	a, rest, _ := strings.Cut(k, "\x00")
	b, c, _ := strings.Cut(rest, "\x00")
	return a, b, c
}

// pairID indexes the pairs without building a string key per lookup.
type pairID struct{ step, item, model string }

func pairIDOf(key string) pairID {
	a, b, c := splitPairKey(key)
	return pairID{a, b, c}
}

func (id pairID) key() string { return pairKey(id.step, id.item, id.model) }

// pairKeys lists the pairs' keys, sorted.
func (m *Module) pairKeys() []string {
	keys := make([]string, 0, m.npairs)
	m.eachSorted(func(id pairID, _ *pair) error {
		keys = append(keys, id.key())
		return nil
	})
	return keys
}

// sortedPairIDs lists the pairs in their keys' order.
func (m *Module) sortedPairIDs() []pairID {
	ids := make([]pairID, 0, m.npairs)
	m.eachSorted(func(id pairID, _ *pair) error {
		ids = append(ids, id)
		return nil
	})
	return ids
}

// eachSorted calls fn for every pair with state in their keys' order,
// until fn fails. It walks the definition's grid in that order where it
// can (walksGrid); else it sorts the pairs, without building the keys:
// with no NUL in the names (the keys' separator) the keys' order is that
// of step, then item, then model.
func (m *Module) eachSorted(fn func(id pairID, p *pair) error) error {
	if m.walksGrid() {
		return m.walkGrid(fn)
	}
	type named struct {
		id pairID
		p  *pair
	}
	all := make([]named, 0, m.npairs)
	nul := false
	m.eachPair(func(id pairID, p *pair) {
		all = append(all, named{id, p})
		nul = nul || strings.IndexByte(id.step, 0) >= 0 || strings.IndexByte(id.item, 0) >= 0 || strings.IndexByte(id.model, 0) >= 0
	})
	if nul {
		slices.SortFunc(all, func(a, b named) int { return strings.Compare(a.id.key(), b.id.key()) })
	} else {
		slices.SortFunc(all, func(a, b named) int {
			if c := strings.Compare(a.id.step, b.id.step); c != 0 {
				return c
			}
			if c := strings.Compare(a.id.item, b.id.item); c != 0 {
				return c
			}
			return strings.Compare(a.id.model, b.id.model)
		})
	}
	for _, n := range all {
		if err := fn(n.id, n.p); err != nil {
			return err
		}
	}
	return nil
}

// gridOrder is the order of the definition's pairs by key, worked out
// once (items and definition do not change under a module): llm steps by
// name, items by key (their positions), each step's models by name
// (their columns).
type gridOrder struct {
	steps []*Step
	cols  [][]int
	items []int32
	size  int  // pairs in the grid
	nul   bool // a name holds a NUL: the tuple order is not the keys'
}

func (m *Module) gridOrder() *gridOrder {
	if m.grid != nil {
		return m.grid
	}
	g := &gridOrder{items: make([]int32, len(m.items))}
	for i := range g.items {
		g.items[i] = int32(i)
	}
	hasNUL := func(s string) bool { return strings.IndexByte(s, 0) >= 0 }
	for _, s := range m.def.order {
		if s.LLM == nil {
			continue
		}
		g.steps = append(g.steps, s)
		g.nul = g.nul || hasNUL(s.Name) || slices.ContainsFunc(s.models, hasNUL)
	}
	slices.SortFunc(g.steps, func(a, b *Step) int { return strings.Compare(a.Name, b.Name) })
	for _, s := range g.steps {
		cols := make([]int, len(s.models))
		for j := range cols {
			cols[j] = j
		}
		slices.SortFunc(cols, func(a, b int) int { return strings.Compare(s.models[a], s.models[b]) })
		for j := range cols {
			cols[j] += s.pairCol
		}
		g.cols = append(g.cols, cols)
		g.size += len(s.models) * len(m.items)
	}
	slices.SortFunc(g.items, func(a, b int32) int { return strings.Compare(m.items[a].Key, m.items[b].Key) })
	g.nul = g.nul || slices.ContainsFunc(m.items, func(it *Item) bool { return hasNUL(it.Key) })
	m.grid = g
	return g
}

// walksGrid: eachSorted walks the definition's grid of pairs in the
// keys' order, so a snapshot of a large run does not sort its pairs again
// each time. Not where sorting costs less (most of the grid not yet
// begun: the grid's order is worked out once, by sorting every item) or
// the walk would not be the keys' order or miss pairs (a NUL in a name;
// pairs of steps, models or items the definition no longer has).
func (m *Module) walksGrid() bool {
	if m.npairs == 0 || len(m.extra) > 0 {
		return false
	}
	g := m.gridOrder()
	return !g.nul && m.npairs >= g.size/4
}

func (m *Module) walkGrid(fn func(id pairID, p *pair) error) error {
	g := m.gridOrder()
	for i, s := range g.steps {
		for _, pos := range g.items {
			for _, col := range g.cols[i] {
				if p := &m.slots[int(pos)*m.width+col]; p.used {
					if err := fn(pairID{s.Name, m.items[pos].Key, m.cols[col].model}, p); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// appendPairKey writes a pair's key as a JSON string, as appendString
// writes id.key().
func appendPairKey(buf *bytes.Buffer, id pairID) error {
	if !ascii(id.step) || !ascii(id.item) || !ascii(id.model) {
		return appendString(buf, id.key())
	}
	buf.WriteByte('"')
	appendASCIIBody(buf, id.step)
	buf.WriteString(`\u0000`)
	appendASCIIBody(buf, id.item)
	buf.WriteString(`\u0000`)
	appendASCIIBody(buf, id.model)
	buf.WriteByte('"')
	return nil
}

// canonical is id with the definition's and items' own strings where it
// has them (those of a decoded event are copies): a pair's index entry
// then holds no strings of its own.
func (m *Module) canonical(id pairID) pairID {
	if s := m.def.Step(id.step); s != nil {
		id.step = s.Name
		if i := slices.Index(s.models, id.model); i >= 0 {
			id.model = s.models[i]
		}
	}
	if i, ok := m.itemIndex(id.item); ok {
		id.item = m.items[i].Key
	}
	return id
}

// internName is the definition's or items' own string for a step, item or
// model name of a decoded pair fact (field 1, 2 or 3), looked up without
// a copy; a name they do not have is copied.
func (m *Module) internName(field protowire.Number, b []byte) string {
	switch field {
	case 1:
		if s, ok := m.def.byName[string(b)]; ok {
			return s.Name
		}
	case 2:
		if i, ok := m.keys.findBytes(m.items, b); ok {
			return m.items[i].Key
		}
	case 3:
		for _, s := range m.def.order {
			for _, model := range s.models {
				if model == string(b) {
					return model
				}
			}
		}
	}
	return string(b)
}

// reindex rebuilds the pair table from the pairs of a snapshot read.
func (m *Module) reindex() {
	clear(m.slots)
	m.extra, m.npairs, m.vals = nil, 0, nil
	for k, r := range m.st.Pairs {
		if r != nil {
			r.load(m.ensure(pairIDOf(k)), &m.outputs)
		}
	}
	m.st.Pairs = nil
}

func done(p *pair) bool { return p != nil && p.status != statusNone }

// itemStatus: "done" when every llm pair of the item is finished (or can
// never run because a dependency failed), "failed" if one failed, else
// "open".
func (m *Module) itemStatus(it *Item) itemState {
	failed := false
	for _, s := range m.def.order {
		if s.LLM == nil || m.skips(s, it) {
			continue
		}
		for _, model := range s.models {
			p := m.pairFor(s, it, model)
			switch {
			case p != nil && p.Status() == StatusFailed:
				failed = true
			case done(p):
			case m.blocked(s, it):
				failed = true
			default:
				return itemOpen
			}
		}
	}
	if failed {
		return itemFailed
	}
	return itemDone
}

// itemState is an item's status, a byte each (a run holds one per item).
type itemState uint8

const (
	itemOpen itemState = iota
	itemDone
	itemFailed
)

func (s itemState) String() string {
	switch s {
	case itemDone:
		return "done"
	case itemFailed:
		return "failed"
	}
	return "open"
}

// countItems works out every item's status.
func (m *Module) countItems() {
	m.itemSt, m.finished = make([]itemState, len(m.items)), 0
	for i, it := range m.items {
		m.itemSt[i] = m.itemStatus(it)
		if m.itemSt[i] != itemOpen {
			m.finished++
		}
	}
	m.allFinished.Store(m.finished == len(m.items))
}

// AllFinished reports whether every item is finished (done or failed),
// as of the events applied so far. Safe from any goroutine.
func (m *Module) AllFinished() bool { return m.allFinished.Load() }

// noteItem updates item i's status after its pairs changed.
func (m *Module) noteItem(i int) {
	was, now := m.itemSt[i], m.itemStatus(m.items[i])
	if (was == itemOpen) != (now == itemOpen) {
		if now == itemOpen {
			m.finished--
		} else {
			m.finished++
		}
		m.allFinished.Store(m.finished == len(m.items))
	}
	m.itemSt[i] = now
	if now != itemOpen {
		// Finished: no later step reads its outputs or renders its
		// prompt; free the decoded ones.
		m.items[i].release()
		if len(m.vals) > 0 {
			for k := i * m.width; k < (i+1)*m.width; k++ {
				delete(m.vals, &m.slots[k])
			}
		}
	}
}

// ready reports whether every llm step s needs has all its pairs OK.
func (m *Module) ready(s *Step, it *Item) bool {
	for _, dep := range s.deps {
		if dep.when != nil && m.skips(dep, it) {
			continue // skipped: nothing to wait for
		}
		if dep.LLM != nil {
			for _, model := range dep.models {
				p := m.pairFor(dep, it, model)
				if p == nil || p.Status() != StatusOK {
					return false
				}
			}
		} else if !m.ready(dep, it) {
			return false
		}
	}
	return true
}

// blocked reports whether a dependency of s failed for the item, so s can
// never run in this generation.
func (m *Module) blocked(s *Step, it *Item) bool {
	for _, dep := range s.deps {
		if dep.LLM != nil {
			for _, model := range dep.models {
				if p := m.pairFor(dep, it, model); p != nil && p.Status() == StatusFailed {
					return true
				}
			}
		}
		if m.blocked(dep, it) {
			return true
		}
	}
	return false
}

// noValues: what a step that needs none sees of the other steps.
var noValues = map[string]any{}

// valuesFor is stepValues for step s's prompt and rules, which may read
// only the steps s needs (checked at load): a step that needs none is
// spared computing them.
func (m *Module) valuesFor(s *Step, it *Item) (map[string]any, error) {
	if len(s.deps) == 0 {
		return noValues, nil
	}
	return m.stepValues(it)
}

// stepValues computes the outputs available to an item's steps: llm
// outputs that are OK (one model: the output; several: model -> output),
// expressions whose needs are met, and groups as step -> output.
// (results.jsonl without expression steps writes the stored outputs
// instead: appendRawResult.)
func (m *Module) stepValues(it *Item) (map[string]any, error) {
	return m.stepValuesBefore(it, nil, true)
}

// stepValuesBefore is stepValues of the steps before stop in pipeline
// order (nil: all): what stop's when: reads. With latest, a repeated
// step's name also holds its latest round's value (what prompts, rules
// and conditions read; results list the rounds by their own names).
func (m *Module) stepValuesBefore(it *Item, stop *Step, latest bool) (map[string]any, error) {
	vals := map[string]any{}
	for _, s := range m.def.order {
		if s == stop {
			break
		}
		switch {
		case s.LLM != nil:
			outs := map[string]any{}
			for _, model := range s.models {
				p := m.pairFor(s, it, model)
				if p == nil || p.Status() != StatusOK {
					continue
				}
				v, err := m.valueOf(p)
				if err != nil {
					return nil, fmt.Errorf("step %s, item %s, model %s: stored output: %w", s.Name, it.Key, model, err)
				}
				outs[model] = v
			}
			if len(outs) < len(s.models) {
				continue
			}
			if len(s.models) == 1 {
				vals[s.Name] = outs[s.models[0]]
			} else {
				vals[s.Name] = outs
			}
		case s.expr != nil:
			if !m.ready(s, it) || m.skips(s, it) {
				continue
			}
			fields, err := it.fields()
			if err != nil {
				return nil, fmt.Errorf("step %s: %w", s.Name, err)
			}
			v, err := s.expr.eval(exprEnv(fields, it.Key, vals, nil, seededRand(m.def.Seed, it.Key, s.Name)))
			if err != nil {
				return nil, fmt.Errorf("step %s, item %s: expression: %w", s.Name, it.Key, err)
			}
			vals[s.Name] = v
		}
		if v, ok := vals[s.Name]; ok && latest && s.base != "" {
			vals[s.base] = v
		}
		if s.parent != "" {
			if v, ok := vals[s.Name]; ok {
				g, _ := vals[s.parent].(map[string]any)
				if g == nil {
					g = map[string]any{}
					vals[s.parent] = g
				}
				g[s.Name] = v
			}
		}
	}
	return vals, nil
}

func (m *Module) taskFor(s *Step, it *Item, model string, gen int) *pb.Task {
	// The subject is the id's tail (modules.TaskKey): one string for both.
	id := modules.TaskKey(Name, TaskType, offerKey(s.Name, model, gen, it.Key))
	subject := id[len(Name)+1+len(TaskType)+1:]
	return &pb.Task{
		Id: id, Module: Name, TaskType: TaskType, Subject: subject,
		LlmPreference: model, MaxRequests: int32(s.LLM.Attempts),
		RequestTimeoutMs: int64(s.LLM.TimeoutSeconds * 1000),
	}
}

// Propose offers the next pairs that can run, items in source order and,
// within an item, every model of a step side by side: a run cut short
// covers all models evenly. At most Window tasks are offered.
func (m *Module) Propose(now time.Time) []*pb.Task {
	m.now = now
	if m.hold || m.stopped != "" || m.dailySpent() {
		return nil
	}
	room := -1 // items the prepared buffer may still take (-1: no watermark)
	if m.def.Limits.MaxPrepared > 0 {
		room = max(m.def.Limits.MaxPrepared-m.prepared(), 0)
	}
	// Tasks already offered are skipped (the host has them); every
	// reofferEvery calls all are offered again, for those the scheduler
	// refused while its queue was full. Between those, only the items
	// whose pairs changed since they were looked at, and new items at
	// the end of the window, are looked at.
	m.proposes++
	reoffer := m.proposes%reofferEvery == 0
	var out []*pb.Task
	for m.low < len(m.items) && m.itemSt[m.low] != itemOpen {
		if m.low < m.scan {
			m.open -= m.openAt[m.low]
		}
		m.low++
	}
	if reoffer || m.scan < m.low {
		m.scan, m.open = m.low, 0
		m.dirty = m.dirty[:0]
		clear(m.isDirty)
		clear(m.starved)
	} else {
		if room != 0 {
			for i := range m.starved {
				m.markDirty(i)
			}
			clear(m.starved)
		}
		slices.Sort(m.dirty)
		for _, i := range m.dirty {
			m.isDirty[i] = false
			if i < m.low || i >= m.scan {
				continue
			}
			m.open -= m.openAt[i]
			m.openAt[i] = m.visit(i, false, &room, &out)
			m.open += m.openAt[i]
		}
		m.dirty = m.dirty[:0]
	}
	for m.scan < len(m.items) && int(m.open) < m.window {
		m.openAt[m.scan] = m.visit(m.scan, reoffer, &room, &out)
		m.open += m.openAt[m.scan]
		m.scan++
	}
	// At the cost cap nothing is offered: a task would only be refused
	// (and deferred) by NextAction. With nothing in flight the stop is
	// final for this run.
	if lim := m.def.Limits.MaxCost; lim > 0 && len(out) > 0 {
		prompt, est, err := m.estimate(out[0])
		if err == nil && m.spent+m.reservedCost()+est > lim {
			if r, rerr := m.ref(out[0]); rerr == nil {
				m.noteUnaffordable(r.step.Name, r.model, est)
			}
			if len(m.reserved) == 0 {
				m.stopped = fmt.Sprintf("max_cost %.4f reached (spent %.4f, next request up to %.4f)", lim, m.spent, est)
			}
			return nil
		}
		if err == nil {
			m.priced = pricedTask{taskID: out[0].Id, prompt: prompt, est: est}
		}
	}
	return out
}

const reofferEvery = 20

// visit offers item i's ready pairs (those not offered yet, or all on a
// re-offer) and returns how many of its ready pairs are not done. A
// cheap step the prepared buffer has no room for waits (starved) until
// there is room.
func (m *Module) visit(i int, reoffer bool, room *int, out *[]*pb.Task) int32 {
	it := m.items[i]
	var open int32
	for _, s := range m.def.order {
		if s.LLM == nil || !m.ready(s, it) || m.skips(s, it) {
			continue
		}
		if *room >= 0 && s.class == "cheap" && !m.cheapStarted(it) {
			if *room == 0 {
				m.starved[i] = true
				continue
			}
			*room--
		}
		for j, model := range s.models {
			k := i*m.width + s.pairCol + j
			p := &m.slots[k]
			if done(p) {
				continue
			}
			gen := int(p.Gen)
			if o := (offerID{k, int32(gen)}); reoffer || !m.offered[o] {
				m.offered[o] = true
				*out = append(*out, m.taskFor(s, it, model, gen))
			}
			open++
		}
		if *room >= 0 && s.class == "cheap" {
			m.notePrepared(i) // its cheap pairs are offered now
		}
	}
	return open
}

// markDirty: item i's pairs changed; if Propose looked at it already, it
// looks again.
func (m *Module) markDirty(i int) {
	if i < m.scan && !m.isDirty[i] {
		m.isDirty[i] = true
		m.dirty = append(m.dirty, i)
	}
}

// offerID is a task offered: its pair's table slot and its generation.
type offerID struct {
	slot int
	gen  int32
}

func offerKey(step, model string, gen int, item string) string {
	return step + "/" + model + "/" + strconv.Itoa(gen) + "/" + item
}

// prepared counts the items in the prepared buffer: a cheap step begun
// (offered, answered) and an expensive one still to do. The watermark
// bounds it, so cheap preparation never runs far ahead of the expensive
// steps that use it.
func (m *Module) prepared() int { return len(m.prep) }

// notePrepared puts item i in or out of the prepared buffer after its
// pairs or offers changed.
func (m *Module) notePrepared(i int) {
	if m.def.Limits.MaxPrepared <= 0 {
		return
	}
	if it := m.items[i]; m.cheapStarted(it) && m.expensiveOpen(it) {
		m.prep[i] = true
	} else {
		delete(m.prep, i)
	}
}

// cheapStarted: a pair of a cheap step of the item was offered or has state.
func (m *Module) cheapStarted(it *Item) bool {
	for _, s := range m.def.order {
		if s.class != "cheap" {
			continue
		}
		for _, model := range s.models {
			if m.pairFor(s, it, model) != nil {
				return true
			}
			if k := m.slotOf(s, m.posOf(it), model); k >= 0 && m.offered[offerID{k, 0}] {
				return true // offered, no state yet: generation 0
			}
		}
	}
	return false
}

func (m *Module) expensiveOpen(it *Item) bool {
	for _, s := range m.def.order {
		if s.LLM == nil || s.class == "cheap" || m.skips(s, it) {
			continue
		}
		for _, model := range s.models {
			if !done(m.pairFor(s, it, model)) {
				return true
			}
		}
	}
	return false
}

func (m *Module) day() string { return m.dayOf(m.now) }

// dayOf is t's UTC day, "2006-01-02": the day's text is made once and
// kept while the day lasts (every answer counts on its day).
func (m *Module) dayOf(t time.Time) string {
	y, mo, d := t.UTC().Date()
	if k := m.dayKey; k.text == "" || k.y != y || k.m != mo || k.d != d {
		m.dayKey = dayKey{y: y, m: mo, d: d, text: t.UTC().Format("2006-01-02")}
	}
	return m.dayKey.text
}

type dayKey struct {
	y, d int
	m    time.Month
	text string
}

// dailySpent: today's requests (answered and in flight) reached the
// daily budget.
func (m *Module) dailySpent() bool {
	lim := m.def.Limits.DailyRequests
	return lim > 0 && m.st.Requests[m.day()]+len(m.reserved) >= lim
}

func (m *Module) reservedCost() float64 {
	c := 0.0
	for _, r := range m.reserved {
		c += r.cost
	}
	return c
}

func (m *Module) price(model string) Price { return m.def.Prices[model] }

func tokens(n int) int64 { return int64((n + 3) / 4) }

// cost estimates a request from its prompt and answer sizes (about four
// characters a token), at the model's price.
func (m *Module) cost(model string, promptLen, answerLen int) (float64, int64) {
	p := m.price(model)
	in, out := tokens(promptLen), tokens(answerLen)
	return (float64(in)*p.Input + float64(out)*p.Output) / 1e6, in + out
}

// estimate renders a task's next prompt and its worst-case cost.
func (m *Module) estimate(t *pb.Task) (string, float64, error) {
	r, err := m.ref(t)
	if err != nil {
		return "", 0, err
	}
	return m.priceRequest(r)
}

func (m *Module) priceRequest(r taskRef) (string, float64, error) {
	prompt, err := m.renderPrompt(r)
	if err != nil {
		return "", 0, err
	}
	est, _ := m.cost(r.model, len(prompt), 4*m.def.Limits.MaxOutputTokens)
	return prompt, est, nil
}

// renderPrompt fills the task's prompt: a simple one from the item and
// the outputs it reads, without building the values of every step;
// else through RenderPrompt.
func (m *Module) renderPrompt(r taskRef) (string, error) {
	s := r.step
	if s.parts != nil {
		var buf strings.Builder
		buf.Grow(s.promptSize + len(s.promptTail))
		stepField := func(step, field string) (string, bool) {
			dep := m.def.Step(step)
			p := m.pairFor(dep, r.item, dep.models[0])
			if p == nil || p.Status() != StatusOK {
				return "", false
			}
			v, err := m.valueOf(p)
			if err != nil {
				return "", false
			}
			out, _ := v.(map[string]any)
			f, ok := out[field].(string)
			return f, ok
		}
		if m.def.renderParts(&buf, s, r.item, r.model, stepField) {
			buf.WriteString(s.promptTail)
			return buf.String(), nil
		}
	}
	vals, err := m.valuesFor(s, r.item)
	if err != nil {
		return "", err
	}
	return m.def.RenderPrompt(s, r.item, vals, r.model)
}

type taskRef struct {
	step  *Step
	item  *Item
	model string
	gen   int
	// dropped: the definition no longer fans this step out to the model
	// (edited between runs); its task ends with nothing recorded.
	dropped bool
}

// parseSubject splits a task subject "step/model/gen/item" (the item key,
// last, may itself hold slashes). The task carries no context map: the
// subject says it all, and a map would be copied with every message.
func parseSubject(subject string) (step, model string, gen int, item string, ok bool) {
	step, rest, ok1 := strings.Cut(subject, "/")
	model, rest, ok2 := strings.Cut(rest, "/")
	g, item, ok3 := strings.Cut(rest, "/")
	if !ok1 || !ok2 || !ok3 {
		return "", "", 0, "", false
	}
	gen, err := strconv.Atoi(g)
	if err != nil {
		return "", "", 0, "", false
	}
	return step, model, gen, item, true
}

// pairID is the task's pair.
func (r taskRef) pairID() pairID { return pairID{r.step.Name, r.item.Key, r.model} }

func (m *Module) ref(t *pb.Task) (taskRef, error) {
	stepName, model, gen, item, ok := parseSubject(t.Subject)
	if !ok {
		return taskRef{}, fmt.Errorf("task %s: subject %q is not step/model/gen/item", t.Id, t.Subject)
	}
	s := m.def.Step(stepName)
	if s == nil || s.LLM == nil {
		return taskRef{}, fmt.Errorf("task %s: step %q is not an llm step of pipeline %s", t.Id, stepName, m.def.Name)
	}
	i, ok := m.itemIndex(item)
	if !ok {
		return taskRef{}, fmt.Errorf("task %s: item %q is not among the items", t.Id, item)
	}
	return taskRef{step: s, item: m.items[i], model: model, gen: gen,
		dropped: !slices.Contains(s.models, model)}, nil
}

// NextAction asks the step's prompt until an answer passes validation or
// the attempts are spent. Before a request leaves it holds back the
// request's worst-case cost and its place in the daily budget, so caps
// stop work at the limit, not after it.
func (m *Module) NextAction(t *pb.Task) (modules.Action, error) {
	r, err := m.ref(t)
	if err != nil {
		return modules.Action{}, err
	}
	delete(m.reserved, t.Id)
	p := m.pairFor(r.step, r.item, r.model)
	if r.dropped || done(p) || (p != nil && int(p.Gen) != r.gen) || (p != nil && int(p.Attempts) >= r.step.LLM.Attempts) {
		return modules.Action{Kind: modules.ActionDone}, nil
	}
	var prompt string
	var est float64
	if m.priced.taskID == t.Id {
		prompt, est = m.priced.prompt, m.priced.est
		m.priced = pricedTask{}
	} else if prompt, est, err = m.priceRequest(r); err != nil {
		return modules.Action{}, err
	}
	if lim := m.def.Limits.MaxCost; lim > 0 && m.spent+m.reservedCost()+est > lim {
		m.noteUnaffordable(r.step.Name, r.model, est)
		m.deferred[t.Id] = fmt.Sprintf("max_cost %.4f reached (spent %.4f, in flight %.4f, next request up to %.4f)", lim, m.spent, m.reservedCost(), est)
		if len(m.reserved) == 0 {
			// Nothing in flight can hand back a reservation: final.
			m.stopped = m.deferred[t.Id]
		}
		return modules.Action{Kind: modules.ActionDone}, nil
	}
	if m.dailySpent() {
		m.deferred[t.Id] = fmt.Sprintf("daily_requests %d reached for %s", m.def.Limits.DailyRequests, m.day())
		return modules.Action{Kind: modules.ActionDone}, nil
	}
	m.reserved[t.Id] = reservation{cost: est, promptLen: len(prompt)}
	return modules.Action{Kind: modules.ActionLLMRequest, Prompt: prompt}, nil
}

// DecideResponse validates an answer in two phases (schema, then rules).
// A valid answer is the pair's result; an invalid one is recorded with
// its raw text and the stage that failed, and asked again while attempts
// remain.
func (m *Module) DecideResponse(t *pb.Task, answer string, now time.Time) ([]*pb.ModuleEvent, error) {
	m.now = now
	r, err := m.ref(t)
	if err != nil {
		return nil, err
	}
	res := m.reserved[t.Id]
	cost, toks := m.cost(r.model, res.promptLen, len(answer))
	if u := m.usage; m.usageTask == t.Id && u.PromptTokens+u.CompletionTokens > 0 {
		p := m.price(r.model)
		cost, toks = (float64(u.PromptTokens)*p.Input+float64(u.CompletionTokens)*p.Output)/1e6, u.PromptTokens+u.CompletionTokens
	}
	m.usage, m.usageTask = modules.Usage{}, ""
	ev := answerEvent{pair: r.pairID(), Gen: r.gen, Cost: cost, Tokens: toks}
	var vals map[string]any // only the rules read the other steps
	if len(r.step.rules) > 0 {
		if vals, err = m.valuesFor(r.step, r.item); err != nil {
			return nil, err
		}
	}
	// The event is applied later (after it is durable): until then the
	// request's actual cost stays held back, or other requests could be
	// let through against a spend that does not count it yet.
	m.reserved[t.Id] = reservation{cost: cost}
	out, stage, verr := m.def.ValidateAnswer(r.step, r.item, vals, answer)
	typ := "answer_ok"
	if verr != nil {
		typ = "answer_invalid"
		ev.Stage, ev.Error, ev.Raw = stage, verr.Error(), answer
	} else {
		b, err := encodeValue(out)
		if err != nil {
			return nil, fmt.Errorf("task %s: encode output: %w", t.Id, err)
		}
		ev.Output = b
	}
	return pairEvent(typ, t.Id, ev)
}

// DecideResponseEnd is DecideResponse, and says a valid answer ends its
// task: its pair is then done (or of another round), so NextAction says
// done and DecideCompletion decides nothing. An invalid answer is left to
// NextAction, which counts the attempts on the applied state.
func (m *Module) DecideResponseEnd(t *pb.Task, answer string, now time.Time) ([]*pb.ModuleEvent, bool, []*pb.ModuleEvent, error) {
	evs, err := m.DecideResponse(t, answer, now)
	ends := err == nil && len(evs) == 1 && evs[0].Type == "answer_ok"
	return evs, ends, nil, err
}

// DecideCompletion ends a pair's task: a pair whose attempts were all
// invalid fails with its last answer; one a cap held back is deferred to
// a later run under a new task id.
func (m *Module) DecideCompletion(t *pb.Task, now time.Time) ([]*pb.ModuleEvent, error) {
	m.now = now
	r, err := m.ref(t)
	if err != nil {
		return nil, err
	}
	delete(m.reserved, t.Id)
	p := m.pairFor(r.step, r.item, r.model)
	if r.dropped || done(p) || (p != nil && int(p.Gen) != r.gen) {
		delete(m.deferred, t.Id)
		return nil, nil
	}
	if why, ok := m.deferred[t.Id]; ok {
		delete(m.deferred, t.Id)
		return pairEvent("pair_deferred", t.Id, answerEvent{pair: r.pairID(), Gen: r.gen, Error: why})
	}
	if p == nil || int(p.Attempts) < r.step.LLM.Attempts {
		// The task's request budget is spent, yet fewer answers are
		// recorded than it allows: an answer counted by the task was lost
		// to a crash before its event. A new round asks again.
		return pairEvent("pair_deferred", t.Id, answerEvent{pair: r.pairID(), Gen: r.gen, Error: "an answer was lost in a crash: asked again"})
	}
	ev := answerEvent{pair: r.pairID(), Gen: r.gen, Stage: "attempts", Error: "no answer passed validation"}
	if p != nil {
		ev.Stage, ev.Error, ev.Raw = p.Stage(), fmt.Sprintf("%d attempts, none valid; last: %s", p.Attempts, p.Error()), p.Raw()
	}
	return pairEvent("pair_failed", t.Id, ev)
}

// StageTimeout is the stage of a pair whose requests all passed the
// step's timeout_seconds (the executor's failure reason starts with it).
const StageTimeout = "timeout"

// DecideFailure records a pair the executor gave up on (backend errors,
// a cancel) with the reason.
func (m *Module) DecideFailure(t *pb.Task, reason string, now time.Time) ([]*pb.ModuleEvent, error) {
	m.now = now
	r, err := m.ref(t)
	if err != nil {
		return nil, err
	}
	delete(m.reserved, t.Id)
	delete(m.deferred, t.Id)
	if p := m.pairFor(r.step, r.item, r.model); done(p) || (p != nil && int(p.Gen) != r.gen) {
		return nil, nil
	}
	stage := "request"
	if strings.HasPrefix(reason, StageTimeout+":") {
		stage = StageTimeout // every attempt passed the step's timeout_seconds
	}
	ev := answerEvent{pair: r.pairID(), Gen: r.gen, Stage: stage, Error: reason}
	if p := m.pairFor(r.step, r.item, r.model); p != nil && p.Raw() != "" {
		ev.Raw = p.Raw()
	}
	return pairEvent("pair_failed", t.Id, ev)
}

// Apply changes state. It is idempotent per generation: an event of an
// older generation than the pair's is ignored.
func (m *Module) Apply(e *pb.ModuleEvent, at time.Time) error {
	// A fact about one pair changes its item's status, maybe its place in
	// the prepared buffer, and makes Propose look at the item again; one
	// that changes outputs may change a priced prompt.
	changed := func(id pairID) {
		if i, ok := m.itemIndex(id.item); ok {
			m.forgetSkips(i)
			m.noteItem(i)
			m.notePrepared(i)
			m.markDirty(i)
		}
	}
	if e.Type == "answer_ok" || e.Type == "answer_invalid" {
		delete(m.reserved, e.TaskId) // its cost is in spent from here on
	}
	switch e.Type {
	case "answer_ok", "answer_invalid", "pair_failed", "pair_deferred", "revalidated", "output_invalidated":
		a, err := decodeAnswer(e.Data, m.internName)
		if err != nil {
			return fmt.Errorf("pipeline: %s of task %s: %w", e.Type, e.TaskId, err)
		}
		p, k := m.ensureSlot(a.pair)
		if a.Gen != int(p.Gen) {
			return nil
		}
		delete(m.vals, p) // its output may change
		defer changed(a.pair)
		// A settled pair, or one whose round is over, is not offered
		// again under that round's task: Propose need not remember it.
		forget := func() {
			if k >= 0 {
				delete(m.offered, offerID{k, int32(a.Gen)})
			}
		}
		switch e.Type {
		case "answer_ok", "answer_invalid":
			if p.status != statusNone {
				return nil // a duplicate: the pair is settled
			}
			m.st.Requests[m.dayOf(at)]++
			m.spent += a.Cost
			p.Cost += a.Cost
			p.Tokens += a.Tokens
			if e.Type == "answer_ok" {
				p.status, p.Output = statusOK, m.outputs.intern(a.Output)
				forget()
			} else {
				p.addAttempt()
				p.setNotes(a.Stage, a.Error, a.Raw)
			}
		case "pair_failed":
			if p.status == statusNone {
				raw := p.Raw()
				if a.Raw != "" {
					raw = a.Raw
				}
				p.status = statusFailed
				p.setNotes(a.Stage, a.Error, raw)
				forget()
			}
		case "pair_deferred":
			forget()
			p.Gen++
			p.Attempts = 0
		case "output_invalidated":
			m.priced = pricedTask{}
			if p.status == statusOK {
				p.status, p.Output = statusFailed, ""
				p.setNotes(a.Stage, a.Error, a.Raw)
			}
		case "revalidated":
			m.priced = pricedTask{}
			if p.status == statusFailed {
				p.status, p.Output = statusOK, m.outputs.intern(a.Output)
				p.setNotes("", "", p.Raw())
			}
		}
	case "retry_failed":
		keys, err := decodeRetry(e.Data)
		if err != nil {
			return fmt.Errorf("pipeline: retry_failed: %w", err)
		}
		for _, k := range keys {
			if p := m.pairAt(k); p != nil && p.status == statusFailed {
				p.status, p.Attempts = statusNone, 0
				p.setNotes("", "", p.Raw())
				p.Gen++
				changed(pairIDOf(k))
			}
		}
		m.priced = pricedTask{}
		m.low, m.scan, m.open, m.stopped = 0, 0, 0, "" // the retried pairs are work again
	case "rerun":
		return m.applyRerun(e, changed)
	case "run_finished":
		return m.applyRunFinished(e)
	default:
		return fmt.Errorf("pipeline: unknown event type %q", e.Type)
	}
	return nil
}

// Backlog is the number of items not finished (raises the priority of
// the module's tasks when many wait).
func (m *Module) Backlog() int { return len(m.items) - m.low }

// StopReason says why the module stopped proposing work for good in
// this run, at a cap ("" = it did not). A spent daily budget is not a
// stop: see Waiting.
func (m *Module) StopReason() string { return m.stopped }

// Waiting reports whether work is left that only the daily request
// budget holds back, as of the module's clock (the time it was last
// given): why, and when the next budget starts (the next UTC midnight).
// A run waits for it; nothing else needs to happen first.
func (m *Module) Waiting() (why string, until time.Time, ok bool) {
	lim := m.def.Limits.DailyRequests
	if lim <= 0 || m.stopped != "" || m.hold || m.st.Requests[m.day()] < lim {
		return "", time.Time{}, false
	}
	if m.finished == len(m.items) {
		return "", time.Time{}, false // nothing left to ask
	}
	y, mo, d := m.now.UTC().Date()
	return fmt.Sprintf("daily_requests %d reached for %s", lim, m.day()), time.Date(y, mo, d+1, 0, 0, 0, 0, time.UTC), true
}

// SetNow gives the module the time when no task or proposal has (a
// command that only reads the state).
func (m *Module) SetNow(now time.Time) { m.now = now }
