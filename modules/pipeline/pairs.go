package pipeline

import (
	"encoding/json"
	"hash/maphash"
	"math"
	"unsafe"
)

// pair is the durable state of one (step, item, model), slim: a run
// holds one per pair, a million and more. The notes of an invalid or
// failed answer (stage, error, raw text), rare, are a side struct.
type pair struct {
	Output   outText
	Cost     float64
	Tokens   int64
	notes    *pairNotes // nil: no stage, error or raw answer
	Gen      int32      // rounds given up (retries, deferrals)
	Attempts int16      // invalid answers in this generation (at most 20 are asked for)
	status   pairStatus
	used     bool // the pair has state (an event was applied to it)
}

// outText is an output's JSON text: a string, 16 bytes in a pair where
// a slice took 24 (48 bytes a pair, not 64: 16 MB of a million).
type outText string

// raw is the output's text as bytes, without a copy: read it, never
// write it (the bytes are the string's).
func (o outText) raw() json.RawMessage {
	if o == "" {
		return nil
	}
	return unsafe.Slice(unsafe.StringData(string(o)), len(o))
}

// addAttempt counts an invalid answer (it stops at the type's bound).
func (p *pair) addAttempt() {
	if p.Attempts < math.MaxInt16 {
		p.Attempts++
	}
}

// attemptsOf is n as a pair's attempts (bounded).
func attemptsOf(n int64) int16 { return int16(min(max(n, 0), math.MaxInt16)) }

// pairNotes: why a pair's latest answer failed, and that answer.
type pairNotes struct{ Stage, Error, Raw string }

// pairStatus is a pair's Status, a byte.
type pairStatus uint8

const (
	statusNone pairStatus = iota
	statusOK
	statusFailed
)

// Status is "", StatusOK or StatusFailed.
func (p *pair) Status() string {
	switch p.status {
	case statusOK:
		return StatusOK
	case statusFailed:
		return StatusFailed
	}
	return ""
}

func (p *pair) setStatus(s string) {
	switch s {
	case StatusOK:
		p.status = statusOK
	case StatusFailed:
		p.status = statusFailed
	default:
		p.status = statusNone
	}
}

func (p *pair) Stage() string {
	if p.notes == nil {
		return ""
	}
	return p.notes.Stage
}

func (p *pair) Error() string {
	if p.notes == nil {
		return ""
	}
	return p.notes.Error
}

func (p *pair) Raw() string {
	if p.notes == nil {
		return ""
	}
	return p.notes.Raw
}

// setNotes sets stage, error and raw answer; all empty frees the notes.
func (p *pair) setNotes(stage, err, raw string) {
	if stage == "" && err == "" && raw == "" {
		p.notes = nil
		return
	}
	p.notes = &pairNotes{Stage: stage, Error: err, Raw: raw}
}

// pairRecord is a pair as a snapshot holds it (encoding/json, by its
// tags): the format Snapshot writes and Restore reads.
type pairRecord struct {
	Status   string          `json:"s,omitempty"`
	Output   json.RawMessage `json:"o,omitempty"`
	Stage    string          `json:"st,omitempty"`
	Error    string          `json:"e,omitempty"`
	Raw      string          `json:"r,omitempty"`
	Attempts int             `json:"a,omitempty"`
	Gen      int             `json:"g,omitempty"`
	Cost     float64         `json:"c,omitempty"`
	Tokens   int64           `json:"t,omitempty"`
}

func (p *pair) record() *pairRecord {
	return &pairRecord{Status: p.Status(), Output: p.Output.raw(), Stage: p.Stage(), Error: p.Error(), Raw: p.Raw(),
		Attempts: int(p.Attempts), Gen: int(p.Gen), Cost: p.Cost, Tokens: p.Tokens}
}

func (r *pairRecord) load(p *pair, outputs *outputSet) {
	*p = pair{Output: outputs.intern(r.Output), Cost: r.Cost, Tokens: r.Tokens, Attempts: attemptsOf(int64(r.Attempts)), Gen: int32(r.Gen), used: true}
	p.setStatus(r.Status)
	p.setNotes(r.Stage, r.Error, r.Raw)
}

// The pairs of the definition's grid (llm step, model) x item are a
// dense table, a pair each, item by item: slot item*width + column,
// where the step's models have the columns pairCol.. of the step. Pairs
// outside it (of steps, models or items the definition no longer has,
// from an older run) are kept by name in extra.

// slotOf is the table slot of step s, item position i and model, or -1
// when the step does not fan out to the model.
func (m *Module) slotOf(s *Step, i int, model string) int {
	if s.LLM == nil || m.width == 0 {
		return -1
	}
	for j, mo := range s.models {
		if mo == model {
			return i*m.width + s.pairCol + j
		}
	}
	return -1
}

// pairFor is the pair of step s, item it and model (nil: no state yet).
func (m *Module) pairFor(s *Step, it *Item, model string) *pair {
	if i := m.posOf(it); i >= 0 {
		if k := m.slotOf(s, i, model); k >= 0 {
			if p := &m.slots[k]; p.used {
				return p
			}
			return nil
		}
	}
	return m.extra[pairID{s.Name, it.Key, model}]
}

// slotOfID is the table slot of a pair named by its names, -1 if it is
// not in the grid.
func (m *Module) slotOfID(id pairID) int {
	s := m.def.Step(id.step)
	if s == nil {
		return -1
	}
	i, ok := m.itemIndex(id.item)
	if !ok {
		return -1
	}
	return m.slotOf(s, i, id.model)
}

// lookup is the pair of a pairID (nil: no state yet).
func (m *Module) lookup(id pairID) *pair {
	if k := m.slotOfID(id); k >= 0 {
		if p := &m.slots[k]; p.used {
			return p
		}
		return nil
	}
	return m.extra[id]
}

// pairOf is the pair of step, item and model by name (nil: none yet).
func (m *Module) pairOf(step, item, model string) *pair {
	return m.lookup(pairID{step, item, model})
}

// pairAt is the pair of a key.
func (m *Module) pairAt(key string) *pair { return m.lookup(pairIDOf(key)) }

// ensure is the pair of id, made (with no state) if it has none.
func (m *Module) ensure(id pairID) *pair {
	p, _ := m.ensureSlot(id)
	return p
}

// ensureSlot is ensure, and the pair's table slot (-1: not in the grid).
func (m *Module) ensureSlot(id pairID) (*pair, int) {
	if k := m.slotOfID(id); k >= 0 {
		p := &m.slots[k]
		if !p.used {
			p.used = true
			m.npairs++
		}
		return p, k
	}
	if p := m.extra[id]; p != nil {
		return p, -1
	}
	if m.extra == nil {
		m.extra = map[pairID]*pair{}
	}
	p := &pair{used: true}
	m.extra[m.canonical(id)] = p
	m.npairs++
	return p, -1
}

// idOfSlot names the pair of slot k.
func (m *Module) idOfSlot(k int) pairID {
	c := m.cols[k%m.width]
	return pairID{c.step.Name, m.items[k/m.width].Key, c.model}
}

// eachPair calls fn for every pair with state, in no order.
func (m *Module) eachPair(fn func(id pairID, p *pair)) {
	for k := range m.slots {
		if p := &m.slots[k]; p.used {
			fn(m.idOfSlot(k), p)
		}
	}
	for id, p := range m.extra {
		if p != nil {
			fn(id, p)
		}
	}
}

// column is the llm step and model of a table column.
type column struct {
	step  *Step
	model string
}

// layoutPairs sizes the pair table for the definition and items.
func (m *Module) layoutPairs() {
	m.cols = m.cols[:0]
	for _, s := range m.def.order {
		if s.LLM == nil {
			continue
		}
		for _, model := range s.models {
			m.cols = append(m.cols, column{s, model})
		}
	}
	m.width = len(m.cols)
	m.slots = make([]pair, m.width*len(m.items))
	m.extra, m.npairs = nil, 0
}

// valueOf is a pair's output decoded, kept while its item is open (its
// later steps read it for every prompt and answer); a change of the pair
// or the item's end drops it.
func (m *Module) valueOf(p *pair) (any, error) {
	if v, ok := m.vals[p]; ok {
		return v, nil
	}
	var v any
	if err := json.Unmarshal(p.Output.raw(), &v); err != nil {
		return nil, err
	}
	if m.vals == nil {
		m.vals = map[*pair]any{}
	}
	m.vals[p] = v
	return v, nil
}

// keyIndex finds an item's position by its key: an open-addressing table
// of positions (4 bytes a slot, half full), not a map of strings.
type keyIndex struct {
	seed  maphash.Seed
	slots []int32 // position + 1; 0: empty
	mask  uint64
}

func newKeyIndex(items []*Item) keyIndex {
	x, _ := buildKeyIndex(items, nil)
	return x
}

// buildKeyIndex is newKeyIndex, telling dup (if not nil) of each key seen
// before, by the positions of its last and this item; dup's error stops
// it.
func buildKeyIndex(items []*Item, dup func(prev, i int) error) (keyIndex, error) {
	n := 8
	for n < 2*len(items) {
		n <<= 1
	}
	x := keyIndex{seed: maphash.MakeSeed(), slots: make([]int32, n), mask: uint64(n - 1)}
	for i, it := range items {
		h := maphash.String(x.seed, it.Key) & x.mask
		for {
			j := x.slots[h]
			if j == 0 {
				x.slots[h] = int32(i + 1)
				break
			}
			if items[j-1].Key == it.Key {
				if dup != nil {
					if err := dup(int(j-1), i); err != nil {
						return x, err
					}
				}
				x.slots[h] = int32(i + 1) // a repeated key: the last one, as a map would keep
				break
			}
			h = (h + 1) & x.mask
		}
	}
	return x, nil
}

func (x *keyIndex) find(items []*Item, key string) (int, bool) {
	if len(x.slots) == 0 {
		return 0, false
	}
	for h := maphash.String(x.seed, key) & x.mask; ; h = (h + 1) & x.mask {
		j := x.slots[h]
		if j == 0 {
			return 0, false
		}
		if items[j-1].Key == key {
			return int(j - 1), true
		}
	}
}

func (x *keyIndex) findBytes(items []*Item, key []byte) (int, bool) {
	if len(x.slots) == 0 {
		return 0, false
	}
	for h := maphash.Bytes(x.seed, key) & x.mask; ; h = (h + 1) & x.mask {
		j := x.slots[h]
		if j == 0 {
			return 0, false
		}
		if items[j-1].Key == string(key) {
			return int(j - 1), true
		}
	}
}

// itemIndex is the position of the item with a key.
func (m *Module) itemIndex(key string) (int, bool) { return m.keys.find(m.items, key) }

// posOf is it's position among the module's items, -1 if it is not one.
func (m *Module) posOf(it *Item) int {
	if p := int(it.pos); p < len(m.items) && m.items[p] == it {
		return p
	}
	if i, ok := m.itemIndex(it.Key); ok {
		return i
	}
	return -1
}

// outputSet holds one copy of each short output seen, up to a bound:
// pairs with the same output share it.
type outputSet map[string]outText

const (
	sharedOutputLen = 64   // longer outputs are rarely the same
	sharedOutputs   = 4096 // distinct outputs kept at most
)

// intern returns out as a pair's output: a copy, or an equal output
// already held (out is not kept: it may be an event's or a snapshot's
// buffer).
func (set *outputSet) intern(out []byte) outText {
	if len(out) == 0 {
		return ""
	}
	if len(out) > sharedOutputLen {
		return outText(out)
	}
	if kept, ok := (*set)[string(out)]; ok {
		return kept
	}
	if *set == nil {
		*set = outputSet{}
	}
	o := outText(out)
	if len(*set) < sharedOutputs {
		(*set)[string(o)] = o
	}
	return o
}
