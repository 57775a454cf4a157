package pipeline

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
)

// Item is one unit of work: its unique key and its values. A run holds
// one per item, a million and more: it is kept small (40 bytes).
type Item struct {
	Key string
	// vals are the item's values (nil: it has none). An item of a JSONL
	// file has its values decoded from its line only while it is open,
	// and shares its file's vals while it is not: decoded maps for every
	// item of a large source would be a third of a run's heap.
	vals *itemVals
	// off: where the item's JSONL line begins in its file (vals.src),
	// read back when the item opens. The lines are not kept: a million of
	// them were a fifth of a run's heap.
	off  int64
	Line int32 // line in the source file (0 for generated items)
	pos  int32 // its place in the list LoadItems returned (a module checks it)
}

// itemVals are an item's values: its fields, and for an item of a JSONL
// file (src) those only while it is open, with the fields its simple
// prompts put in, as text (open), worked out from the line when a prompt
// first needs them. Both are dropped when the item is finished (release).
type itemVals struct {
	src    *lineFile
	fields map[string]any
	open   *itemRefs
}

// newItem is an item with its fields.
func newItem(key string, fields map[string]any) *Item {
	return &Item{Key: key, vals: &itemVals{fields: fields}}
}

// Fields returns the item's values as they are now: for an item of a
// JSONL file, nil unless it is open.
func (it *Item) Fields() map[string]any {
	if it.vals == nil {
		return nil
	}
	return it.vals.fields
}

// own returns the item's own vals, made from its file's shared ones on
// first use.
func (it *Item) own() *itemVals {
	if v := it.vals; v != nil && v.src != nil && v == &v.src.closed {
		it.vals = &itemVals{src: v.src}
	}
	return it.vals
}

// itemRefs are the fields simple prompts of a definition put in
// (Definition.itemRefs), read from an item's JSONL line, so its prompts
// need no decoding of the line; refs nil: read them from the fields.
type itemRefs struct {
	from    *Definition // whose itemRefs refs follows
	refs    []string
	refText uint64 // bit i: refs[i] is the field's text (else not a string, or missing)
}

// fields returns the item's values, decoding its JSONL line on first
// use. An error: the line could not be read back as the item it was.
func (it *Item) fields() (map[string]any, error) {
	v := it.vals
	if v == nil {
		return nil, nil
	}
	if v.fields == nil && v.src != nil {
		line, err := v.src.line(it)
		if err != nil {
			return nil, err
		}
		f, err := decodeLine(line)
		if err != nil {
			return nil, v.src.changed(it, err.Error())
		}
		it.own().fields = f
	}
	return it.vals.fields, nil
}

// refsFor returns the item's text of d's simple prompts' fields, read
// from its JSONL line once while it is open; nil: read the fields (an
// unreadable line included: fields says why).
func (it *Item) refsFor(d *Definition) *itemRefs {
	v := it.vals
	if v == nil || v.src == nil || len(d.itemRefs) == 0 || len(d.itemRefs) > 64 {
		return nil
	}
	if r := v.open; r != nil && r.from == d {
		return r
	}
	r := &itemRefs{from: d}
	if v.fields != nil {
		r.refs, r.refText = itemRefValues(v.fields, d.itemRefs)
	} else {
		line, err := v.src.line(it)
		if err != nil {
			return nil
		}
		if refs, text, ok := flatRefs(line, d.itemRefs); ok {
			r.refs, r.refText = refs, text
		} else {
			f, err := decodeLine(line)
			if err != nil {
				return nil
			}
			r.refs, r.refText = itemRefValues(f, d.itemRefs)
		}
	}
	it.own().open = r
	return r
}

// release drops the values decoded from a JSONL line (a finished item's
// prompts are not rendered again).
func (it *Item) release() {
	if v := it.vals; v != nil && v.src != nil {
		it.vals = &v.src.closed
	}
}

// LoadItems reads or generates the items. A duplicate key, an unreadable
// line or a missing key field is an error naming the file and line: an
// item is never processed twice, nor silently dropped.
func (d *Definition) LoadItems() ([]*Item, error) {
	spec := d.Items
	var items []*Item
	var err error
	switch {
	case spec.Permutations != nil:
		items = permutations(spec.Permutations.Of, spec.Permutations.Size)
	case spec.Cross != nil:
		items = cross(spec.Cross)
	default:
		path := spec.Source
		if !filepath.IsAbs(path) {
			path = filepath.Join(d.Dir, path)
		}
		items, err = readSource(path, spec.Key)
		if err != nil {
			return nil, err
		}
	}
	if spec.Limit > 0 && len(items) > spec.Limit {
		items = items[:spec.Limit]
	}
	if n := d.Limits.MaxItems; n > 0 && len(items) > n {
		items = items[:n]
	}
	for i, it := range items {
		it.pos = int32(i)
	}
	// An index of positions, 8 MB for a million items, where a map of
	// the keys was 50 MB at the start of a run.
	_, err = buildKeyIndex(items, func(prev, i int) error {
		return fmt.Errorf("items: key %q appears twice (line %d and line %d): keys must be unique", items[i].Key, items[prev].Line, items[i].Line)
	})
	if err != nil {
		return nil, err
	}
	return items, nil
}

func (v *checker) checkItems(d *Definition, root *yaml.Node) {
	spec := d.Items
	line := lineOf(node(root, "items"), 1)
	n := 0
	if spec.Source != "" {
		n++
	}
	if spec.Permutations != nil {
		n++
		if p := spec.Permutations; len(p.Of) == 0 || p.Size < 1 || p.Size > len(p.Of) {
			v.add(lineOf(node(root, "items", "permutations"), line), "items.permutations: give a non-empty of: list and a size from 1 to its length")
		}
	}
	if spec.Cross != nil {
		n++
		for name, vals := range spec.Cross {
			if len(vals) == 0 {
				v.add(lineOf(node(root, "items", "cross", name), line), "items.cross.%s: give at least one value", name)
			}
		}
	}
	if n != 1 {
		v.add(line, "items: give exactly one of source (a .jsonl or .csv file or a directory), permutations, cross")
		return
	}
	if spec.Source != "" {
		path := spec.Source
		if !filepath.IsAbs(path) {
			path = filepath.Join(d.Dir, path)
		}
		if _, err := os.Stat(path); err != nil {
			v.add(lineOf(node(root, "items", "source"), line), "items.source: %v", err)
		}
	}
}

func readSource(path, keyField string) ([]*Item, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("items: %w", err)
	}
	if st.IsDir() {
		return readDir(path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("items: %w", err)
	}
	defer f.Close()
	switch strings.ToLower(filepath.Ext(path)) {
	case ".jsonl", ".ndjson":
		return readJSONL(f, path, keyField)
	case ".csv":
		return readCSV(f, path, keyField)
	}
	return nil, fmt.Errorf("items: %s: use a .jsonl or .csv file or a directory", path)
}

func itemKey(fields map[string]any, keyField string, line int, path string) (string, error) {
	if keyField == "" {
		return fmt.Sprintf("%06d", line), nil
	}
	v, ok := fields[keyField]
	if s, isText := v.(string); isText && s != "" {
		return s, nil // most keys: fmt.Sprint would copy it, twice
	}
	if !ok || v == nil || fmt.Sprint(v) == "" {
		return "", fmt.Errorf("%s:%d: the item has no key field %q", path, line, keyField)
	}
	if f, ok := v.(float64); ok && f == float64(int64(f)) {
		return fmt.Sprint(int64(f)), nil
	}
	return fmt.Sprint(v), nil
}

// readJSONL reads a JSONL file's items: their keys (in blocks shared by
// many, as are the items) and where their lines are, read back when
// each item opens (lineFile).
func readJSONL(r io.Reader, path, keyField string) ([]*Item, error) {
	src := &lineFile{path: path, keyField: keyField}
	src.closed.src = src
	var block strings.Builder
	keep := func(b string) string {
		if len(b) > block.Cap()-block.Len() {
			block = strings.Builder{}
			block.Grow(max(64<<10, len(b)))
		}
		block.WriteString(b) // within its room: the keys already taken stay where they are
		s := block.String()
		return s[len(s)-len(b):]
	}
	var slab []Item
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	// The scanner hands the split function its data from the first byte
	// not yet taken: its offset is the sum of what was taken before.
	var taken, start int64
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		adv, tok, err := bufio.ScanLines(data, atEOF)
		if tok != nil {
			start = taken
		}
		taken += int64(adv)
		return adv, tok, err
	})
	var out []*Item
	line := 0
	for sc.Scan() {
		line++
		raw := sc.Bytes()
		b := bytes.TrimSpace(raw)
		if len(b) == 0 {
			continue
		}
		fields, err := decodeObject(b)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: not a JSON object: %v", path, line, err)
		}
		key, err := itemKey(fields, keyField, line, path)
		if err != nil {
			return nil, err
		}
		if len(slab) == cap(slab) {
			slab = make([]Item, 0, 1024)
		}
		lead := len(raw) - len(bytes.TrimLeft(raw, " \t\r\n\v\f"))
		slab = append(slab, Item{Key: keep(key), Line: int32(line), vals: &src.closed, off: start + int64(lead)})
		out = append(out, &slab[len(slab)-1])
		for len(src.sums) < line-1 {
			src.sums = append(src.sums, 0) // blank lines
		}
		src.sums = append(src.sums, hashBytes(b))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// lineFile reads the lines of a JSONL items file back by their offsets,
// one when its item opens, from a descriptor kept open (a file renamed
// over it meanwhile is not seen). A line that no longer holds its item
// (the file was edited in place) is an error naming both, never another
// item's prompt. Safe for concurrent use.
type lineFile struct {
	path, keyField string
	closed         itemVals // what its items share while not open
	// sums are the hashes of the items' lines as loaded, by line number
	// (from 1), until the run has compared and recorded them (ItemSumsOf).
	sums []uint64
	mu   sync.Mutex
	f    *os.File
	buf  []byte
}

// line returns it's JSONL line, trimmed, checked to be the item.
func (lf *lineFile) line(it *Item) (string, error) {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	if lf.f == nil {
		f, err := os.Open(lf.path)
		if err != nil {
			return "", fmt.Errorf("items: reading item %q back: %w", it.Key, err)
		}
		lf.f = f
	}
	if len(lf.buf) == 0 {
		lf.buf = make([]byte, 4<<10)
	}
	n := 0
	for {
		k, err := lf.f.ReadAt(lf.buf[n:], it.off+int64(n))
		if i := bytes.IndexByte(lf.buf[n:n+k], '\n'); i >= 0 {
			n += i
			break
		}
		n += k
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", fmt.Errorf("items: %s:%d: reading item %q back: %w", lf.path, it.Line, it.Key, err)
		}
		if n == len(lf.buf) {
			lf.buf = append(lf.buf, make([]byte, n)...)
		}
	}
	text := string(bytes.TrimSpace(lf.buf[:n]))
	if lf.keyField == "" {
		return text, nil
	}
	if vals, isText, ok := flatRefs(text, []string{lf.keyField}); ok && isText&1 != 0 {
		if vals[0] != it.Key {
			return "", lf.changed(it, fmt.Sprintf("its key is %q", vals[0]))
		}
		return text, nil
	}
	fields, err := decodeLine(text)
	if err != nil {
		return "", lf.changed(it, err.Error())
	}
	if key, err := itemKey(fields, lf.keyField, int(it.Line), lf.path); err != nil || key != it.Key {
		return "", lf.changed(it, fmt.Sprintf("its key is %q", key))
	}
	return text, nil
}

// changed is the error for an item whose line no longer holds it.
func (lf *lineFile) changed(it *Item, why string) error {
	return fmt.Errorf("items: %s:%d: the file changed while the run was going: the line is no longer item %q (%s); put the file back as it was, or start a new run", lf.path, it.Line, it.Key, why)
}

func readCSV(r io.Reader, path, keyField string) ([]*Item, error) {
	cr := csv.NewReader(r)
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("%s:1: no header row: %w", path, err)
	}
	var out []*Item
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		line, _ := cr.FieldPos(0)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		fields := make(map[string]any, len(header))
		for i, h := range header {
			if i < len(rec) {
				fields[h] = rec[i]
			}
		}
		key, err := itemKey(fields, keyField, line, path)
		if err != nil {
			return nil, err
		}
		it := newItem(key, fields)
		it.Line = int32(line)
		out = append(out, it)
	}
	return out, nil
}

// readDir makes an item of each regular file: key = file name.
func readDir(dir string) ([]*Item, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("items: %w", err)
	}
	var out []*Item
	for _, e := range ents {
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("items: %w", err)
		}
		out = append(out, newItem(e.Name(), map[string]any{"name": e.Name(), "path": p, "text": string(b)}))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// permutations of size k of xs, in lexicographic index order.
func permutations(xs []string, k int) []*Item {
	var out []*Item
	used := make([]bool, len(xs))
	cur := make([]string, 0, k)
	var rec func()
	rec = func() {
		if len(cur) == k {
			vals := make([]any, k)
			for i, s := range cur {
				vals[i] = s
			}
			out = append(out, newItem(strings.Join(cur, "+"), map[string]any{"values": vals}))
			return
		}
		for i, x := range xs {
			if used[i] {
				continue
			}
			used[i] = true
			cur = append(cur, x)
			rec()
			cur = cur[:len(cur)-1]
			used[i] = false
		}
	}
	rec()
	return out
}

// cross is the cross product of named dimensions, dimensions in name
// order; the key joins the values with "+".
func cross(dims map[string][]string) []*Item {
	names := make([]string, 0, len(dims))
	for n := range dims {
		names = append(names, n)
	}
	sort.Strings(names)
	out := []*Item{newItem("", map[string]any{})}
	for _, n := range names {
		var next []*Item
		for _, it := range out {
			for _, v := range dims[n] {
				f := make(map[string]any, len(it.Fields())+1)
				for k, x := range it.Fields() {
					f[k] = x
				}
				f[n] = v
				key := v
				if it.Key != "" {
					key = it.Key + "+" + v
				}
				next = append(next, newItem(key, f))
			}
		}
		out = next
	}
	return out
}

// SelectItems keeps the items whose keys the file at path lists, one key
// a line (blank lines and lines starting with # skipped), in the items'
// own order. A key no item has is an error naming the file and line.
func SelectItems(items []*Item, path string) ([]*Item, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--items: %w", err)
	}
	have := make(map[string]bool, len(items))
	for _, it := range items {
		have[it.Key] = true
	}
	want := map[string]bool{}
	for i, line := range strings.Split(string(data), "\n") {
		key := strings.TrimSpace(line)
		if key == "" || strings.HasPrefix(key, "#") {
			continue
		}
		if !have[key] {
			return nil, fmt.Errorf("%s:%d: no item has key %q", path, i+1, key)
		}
		want[key] = true
	}
	if len(want) == 0 {
		return nil, fmt.Errorf("%s: lists no item key", path)
	}
	out := make([]*Item, 0, len(want))
	for _, it := range items {
		if want[it.Key] {
			it.pos = int32(len(out))
			out = append(out, it)
		}
	}
	return out, nil
}
