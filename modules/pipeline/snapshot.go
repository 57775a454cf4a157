package pipeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// snapshotJSON encodes the state as json.Marshal(m.st) would (the same
// bytes; a test holds it to that), without its reflection and its sort
// of reflected keys: the snapshot format before the binary one (Restore
// still reads it), and the state as tests read it.
func (m *Module) snapshotJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(m.snapshotSize())
	buf.WriteString(`{"pairs":`)
	buf.WriteByte('{')
	first := true
	err := m.eachSorted(func(id pairID, p *pair) error {
		if !first {
			buf.WriteByte(',')
		}
		first = false
		if err := appendPairKey(&buf, id); err != nil {
			return err
		}
		buf.WriteByte(':')
		if err := p.appendJSON(&buf); err != nil {
			return fmt.Errorf("pipeline: snapshot of pair %q: %w", id.key(), err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	buf.WriteByte('}')
	buf.WriteString(`,"requests":`)
	if m.st.Requests == nil {
		buf.WriteString("null")
	} else {
		buf.WriteByte('{')
		for i, day := range slices.Sorted(maps.Keys(m.st.Requests)) {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := appendString(&buf, day); err != nil {
				return nil, err
			}
			buf.WriteByte(':')
			buf.WriteString(strconv.Itoa(m.st.Requests[day]))
		}
		buf.WriteByte('}')
	}
	buf.WriteString(`,"finished":`)
	buf.WriteString(strconv.Itoa(m.st.Finished))
	if m.st.LastStop != nil {
		b, err := json.Marshal(m.st.LastStop)
		if err != nil {
			return nil, err
		}
		buf.WriteString(`,"last_stop":`)
		buf.Write(b)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// snapshotSize guesses the size of the snapshot from up to 512 of its
// pairs, a little over: its buffer, of a million pairs a hundred
// megabytes, is then made once, not grown and copied.
func (m *Module) snapshotSize() int {
	var buf bytes.Buffer
	n := 0
	for k := 0; k < len(m.slots) && n < 512; k++ {
		if p := &m.slots[k]; p.used {
			if appendPairKey(&buf, m.idOfSlot(k)) != nil || p.appendJSON(&buf) != nil {
				break
			}
			buf.WriteString(":,")
			n++
		}
	}
	if n == 0 {
		return 80*m.npairs + 256
	}
	return buf.Len()/n*m.npairs + m.npairs*buf.Len()/n/8 + 256
}

// appendJSON writes the pair as encoding/json would, by its tags.
func (p *pair) appendJSON(buf *bytes.Buffer) error {
	if p == nil {
		buf.WriteString("null")
		return nil
	}
	sep := byte('{')
	field := func(name string) {
		buf.WriteByte(sep)
		sep = ','
		buf.WriteByte('"')
		buf.WriteString(name)
		buf.WriteString(`":`)
	}
	str := func(name, v string) error {
		if v == "" {
			return nil
		}
		field(name)
		return appendString(buf, v)
	}
	num := func(name string, v int64) {
		if v != 0 {
			field(name)
			buf.WriteString(strconv.FormatInt(v, 10))
		}
	}
	if err := str("s", p.Status()); err != nil {
		return err
	}
	if len(p.Output) > 0 {
		field("o")
		if err := json.Compact(buf, p.Output.raw()); err != nil {
			return err
		}
	}
	for _, f := range [...]struct{ name, v string }{{"st", p.Stage()}, {"e", p.Error()}, {"r", p.Raw()}} {
		if err := str(f.name, f.v); err != nil {
			return err
		}
	}
	num("a", int64(p.Attempts))
	num("g", int64(p.Gen))
	if p.Cost != 0 {
		field("c")
		buf.Write(appendFloat(nil, p.Cost))
	}
	num("t", p.Tokens)
	if sep == '{' {
		buf.WriteByte('{')
	}
	buf.WriteByte('}')
	return nil
}

// Restore reads a snapshot, binary or (of older runs) JSON. After an
// error the module's state is not to be used.
func (m *Module) Restore(data []byte) error {
	if bytes.HasPrefix(data, []byte(snapshotMagic)) {
		if err := m.restoreBinary(data[len(snapshotMagic):]); err != nil {
			return err
		}
	} else if err := m.restoreJSON(data); err != nil {
		return err
	}
	m.low, m.scan, m.open = 0, 0, 0
	m.offered = map[offerID]bool{}
	m.priced = pricedTask{}
	m.spent = 0
	m.eachPair(func(_ pairID, p *pair) { m.spent += p.Cost })
	m.skipped = nil
	m.prep = map[int]bool{}
	for i := range m.items {
		m.notePrepared(i)
	}
	m.countItems()
	return nil
}

// restoreJSON reads a JSON snapshot (snapshotJSON's).
func (m *Module) restoreJSON(data []byte) error {
	st := newState()
	// The pairs' map made at its size at once, not grown and copied as
	// a million pairs are read: at most the grid's pairs, and no more
	// than the snapshot could hold (an entry takes 20 bytes or more).
	st.Pairs = make(map[string]*pairRecord, min(len(m.slots), len(data)/20))
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("pipeline: restore: %w", err)
	}
	if st.Requests == nil {
		st.Requests = map[string]int{}
	}
	m.st = st
	m.reindex()
	return nil
}
