package pipeline

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// The binary snapshot. A run of a million pairs wrote a JSON snapshot of
// 77 MB, held three times over while a checkpoint was saved; this one is
// a quarter of it, and restoring it makes no map of every pair. It
// begins with snapshotMagic (a JSON snapshot, of older runs and still
// read, begins with '{'); then, in varints and length-prefixed strings:
//
//	requests: count, then (UTC day, answers) by day
//	finished run count
//	last stop: its JSON, or nothing
//	columns: count, then (step, model) each
//	items: count, then (key, pair count, then (column, pair) each) each
//
// A pair: a byte of status (low two bits) and which fields follow (the
// others are zero): output, stage/error/raw, attempts, generation, cost
// (8 bytes, IEEE 754), tokens. The pairs of the definition's grid come
// item by item in the items' order, those outside it (by name, of an
// older definition) after them in their keys' order: the same state
// gives the same bytes.
const snapshotMagic = "\x00fano pipeline snapshot 1\n"

const (
	hasOutput byte = 1 << (iota + 2)
	hasNotes
	hasAttempts
	hasGen
	hasCost
	hasTokens
)

// Snapshot encodes the state in the binary snapshot format.
func (m *Module) Snapshot() ([]byte, error) {
	w := snapWriter{b: make([]byte, 0, m.binarySize())}
	w.b = append(w.b, snapshotMagic...)
	days := slices.Sorted(maps.Keys(m.st.Requests))
	w.uint(uint64(len(days)))
	for _, d := range days {
		w.str(d)
		w.int(int64(m.st.Requests[d]))
	}
	w.int(int64(m.st.Finished))
	if m.st.LastStop != nil {
		b, err := json.Marshal(m.st.LastStop)
		if err != nil {
			return nil, err
		}
		w.str(string(b))
	} else {
		w.str("")
	}

	// Columns: the grid's, then those of pairs outside it.
	extras := slices.SortedFunc(maps.Keys(m.extra), func(a, b pairID) int { return strings.Compare(a.key(), b.key()) })
	type sm struct{ step, model string }
	colOf := map[sm]int{}
	var cols []sm
	for _, c := range m.cols {
		colOf[sm{c.step.Name, c.model}] = len(cols)
		cols = append(cols, sm{c.step.Name, c.model})
	}
	for _, id := range extras {
		if _, ok := colOf[sm{id.step, id.model}]; !ok {
			colOf[sm{id.step, id.model}] = len(cols)
			cols = append(cols, sm{id.step, id.model})
		}
	}
	w.uint(uint64(len(cols)))
	for _, c := range cols {
		w.str(c.step)
		w.str(c.model)
	}

	groups := 0
	for i := range m.items {
		if m.rowUsed(i) > 0 {
			groups++
		}
	}
	for _, id := range extras {
		if m.extra[id] != nil {
			groups++
		}
	}
	w.uint(uint64(groups))
	for i, it := range m.items {
		n := m.rowUsed(i)
		if n == 0 {
			continue
		}
		w.str(it.Key)
		w.uint(uint64(n))
		row := m.slots[i*m.width : (i+1)*m.width]
		for c := range row {
			if p := &row[c]; p.used {
				w.uint(uint64(c))
				w.pair(p)
			}
		}
	}
	for _, id := range extras {
		if p := m.extra[id]; p != nil {
			w.str(id.item)
			w.uint(1)
			w.uint(uint64(colOf[sm{id.step, id.model}]))
			w.pair(p)
		}
	}
	return w.b, nil
}

// rowUsed counts item i's pairs in the grid that have state.
func (m *Module) rowUsed(i int) int {
	n := 0
	for _, p := range m.slots[i*m.width : (i+1)*m.width] {
		if p.used {
			n++
		}
	}
	return n
}

// binarySize guesses the snapshot's size, a little over, so its buffer
// is made once.
func (m *Module) binarySize() int {
	size := 256
	for _, it := range m.items[:min(len(m.items), 512)] {
		size += len(it.Key)
	}
	keys := size / max(1, min(len(m.items), 512))
	outs := 0
	n := 0
	for k := 0; k < len(m.slots) && n < 512; k++ {
		if p := &m.slots[k]; p.used {
			outs += len(p.Output) + 16
			n++
		}
	}
	if n > 0 {
		outs /= n
	}
	return 256 + len(m.items)*(keys+2) + m.npairs*(outs+4) + m.npairs/8
}

// snapWriter appends the binary snapshot's parts.
type snapWriter struct{ b []byte }

func (w *snapWriter) uint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }
func (w *snapWriter) int(v int64)   { w.b = binary.AppendVarint(w.b, v) }
func (w *snapWriter) str(s string) {
	w.uint(uint64(len(s)))
	w.b = append(w.b, s...)
}

func (w *snapWriter) pair(p *pair) {
	flags := byte(p.status)
	if len(p.Output) > 0 {
		flags |= hasOutput
	}
	if p.notes != nil {
		flags |= hasNotes
	}
	if p.Attempts != 0 {
		flags |= hasAttempts
	}
	if p.Gen != 0 {
		flags |= hasGen
	}
	if p.Cost != 0 {
		flags |= hasCost
	}
	if p.Tokens != 0 {
		flags |= hasTokens
	}
	w.b = append(w.b, flags)
	if flags&hasOutput != 0 {
		w.str(string(p.Output))
	}
	if flags&hasNotes != 0 {
		w.str(p.notes.Stage)
		w.str(p.notes.Error)
		w.str(p.notes.Raw)
	}
	if flags&hasAttempts != 0 {
		w.int(int64(p.Attempts))
	}
	if flags&hasGen != 0 {
		w.int(int64(p.Gen))
	}
	if flags&hasCost != 0 {
		w.b = binary.LittleEndian.AppendUint64(w.b, math.Float64bits(p.Cost))
	}
	if flags&hasTokens != 0 {
		w.int(p.Tokens)
	}
}

// errShortSnapshot: the snapshot ends inside a part.
var errShortSnapshot = errors.New("the snapshot ends early")

// snapReader reads the binary snapshot's parts; the first error sticks.
type snapReader struct {
	b   []byte
	err error
}

func (r *snapReader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *snapReader) uint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(errShortSnapshot)
		r.b = nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *snapReader) int() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(errShortSnapshot)
		r.b = nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

// bytes returns the next length-prefixed part, within the snapshot's
// buffer (copy what is kept).
func (r *snapReader) bytes() []byte {
	n := r.uint()
	if n > uint64(len(r.b)) {
		r.fail(errShortSnapshot)
		r.b = nil
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *snapReader) byte() byte {
	if len(r.b) == 0 {
		r.fail(errShortSnapshot)
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

// count reads a count of parts each at least min bytes long: one the
// rest of the snapshot cannot hold is refused before anything is made
// at its size.
func (r *snapReader) count(min int) int {
	n := r.uint()
	if n > uint64(len(r.b)/min) {
		r.fail(fmt.Errorf("a count of %d is more than the snapshot holds", n))
		r.b = nil
		return 0
	}
	return int(n)
}

// restoreBinary reads a binary snapshot (without its magic) into the
// state and the pair table.
func (m *Module) restoreBinary(data []byte) error {
	r := snapReader{b: data}
	st := newState()
	for range r.count(2) {
		day := string(r.bytes())
		st.Requests[day] = int(r.int())
	}
	st.Finished = int(r.int())
	if b := r.bytes(); len(b) > 0 && r.err == nil {
		st.LastStop = &Stop{}
		if err := json.Unmarshal(b, st.LastStop); err != nil {
			return fmt.Errorf("pipeline: restore: last stop: %w", err)
		}
	}
	// Each column: the grid's column it is, or -1 (a pair kept by name).
	type col struct {
		step, model string
		grid        int
	}
	cols := make([]col, r.count(2))
	for j := range cols {
		c := &cols[j]
		c.step, c.model, c.grid = string(r.bytes()), string(r.bytes()), -1
		if s := m.def.Step(c.step); s != nil && s.LLM != nil {
			if k := slices.Index(s.models, c.model); k >= 0 {
				c.grid = s.pairCol + k
			}
		}
	}
	if r.err != nil {
		return fmt.Errorf("pipeline: restore: %w", r.err)
	}
	clear(m.slots)
	m.extra, m.npairs, m.vals = nil, 0, nil
	for range r.count(3) {
		key := r.bytes()
		i, inGrid := m.keys.findBytes(m.items, key)
		n := r.count(2)
		for range n {
			j := r.uint()
			if r.err != nil {
				break
			}
			if j >= uint64(len(cols)) {
				return fmt.Errorf("pipeline: restore: item %q: column %d of %d", key, j, len(cols))
			}
			c := cols[j]
			var p *pair
			if inGrid && c.grid >= 0 {
				p = &m.slots[i*m.width+c.grid]
				if !p.used {
					m.npairs++
				}
			} else {
				p = m.ensure(pairID{c.step, string(key), c.model})
			}
			if err := r.pair(p, &m.outputs); err != nil {
				return fmt.Errorf("pipeline: restore: pair %q: %w", pairKey(c.step, string(key), c.model), err)
			}
		}
		if r.err != nil {
			break
		}
	}
	if r.err == nil && len(r.b) > 0 {
		r.fail(fmt.Errorf("%d bytes after its end", len(r.b)))
	}
	if r.err != nil {
		return fmt.Errorf("pipeline: restore: %w", r.err)
	}
	m.st = st
	return nil
}

// pair reads a pair into p.
func (r *snapReader) pair(p *pair, outputs *outputSet) error {
	flags := r.byte()
	status := pairStatus(flags & 3)
	if status > statusFailed {
		return fmt.Errorf("status %d", status)
	}
	*p = pair{status: status, used: true}
	if flags&hasOutput != 0 {
		p.Output = outputs.intern(r.bytes())
	}
	if flags&hasNotes != 0 {
		stage, err, raw := string(r.bytes()), string(r.bytes()), string(r.bytes())
		p.setNotes(stage, err, raw)
	}
	if flags&hasAttempts != 0 {
		p.Attempts = attemptsOf(r.int())
	}
	if flags&hasGen != 0 {
		p.Gen = int32(r.int())
	}
	if flags&hasCost != 0 {
		if len(r.b) < 8 {
			r.fail(errShortSnapshot)
			return r.err
		}
		p.Cost = math.Float64frombits(binary.LittleEndian.Uint64(r.b))
		r.b = r.b[8:]
	}
	if flags&hasTokens != 0 {
		p.Tokens = r.int()
	}
	return r.err
}
