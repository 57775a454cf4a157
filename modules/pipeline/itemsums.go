package pipeline

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
)

// ItemSumsFile, in a run directory, records what each item held when the
// last run started: a hash of its key and of its line (a JSONL item) or
// its fields (any other). An item whose line was edited since then has
// answers given to what it said before.
const ItemSumsFile = "items.sums"

// itemSumsMagic begins an ItemSumsFile; a count and the sums follow.
const itemSumsMagic = "fano-item-sums-1\n"

// itemSum is one item's record: its key's hash and its content's.
type itemSum struct{ key, content uint64 }

// ItemSums are the records of a run's items, sorted by key hash.
type ItemSums struct {
	sums  []itemSum
	items []*Item
}

func hashBytes(b []byte) uint64 {
	h := fnv.New64a()
	_, _ = h.Write(b)
	return h.Sum64()
}

func hashString(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return h.Sum64()
}

// ItemSumsOf records items as they were loaded. The line hashes kept
// since loading are let go: call it once, after the items are chosen and
// before New (which lets them go too: a module does not need them).
func ItemSumsOf(items []*Item) (*ItemSums, error) {
	out := &ItemSums{sums: make([]itemSum, 0, len(items)), items: items}
	for _, it := range items {
		s := itemSum{key: hashString(it.Key)}
		if v := it.vals; v != nil && v.src != nil {
			if it.Line < 1 || int(it.Line) > len(v.src.sums) {
				return nil, fmt.Errorf("items: %s:%d: no record of the line as loaded", v.src.path, it.Line)
			}
			s.content = v.src.sums[it.Line-1]
		} else {
			b, err := json.Marshal(it.Fields()) // map keys sorted: the same fields, the same bytes
			if err != nil {
				return nil, fmt.Errorf("items: item %q: %w", it.Key, err)
			}
			s.content = hashBytes(b)
		}
		out.sums = append(out.sums, s)
	}
	releaseLineSums(items)
	slices.SortFunc(out.sums, byKey)
	return out, nil
}

func byKey(a, b itemSum) int { return cmp.Compare(a.key, b.key) }

// ChangedItem is an item whose content differs from the last run's.
type ChangedItem struct {
	Key  string
	Line int // in its source file (0: a generated item)
}

// Changed lists the items whose content differs from what dir recorded
// at the last run's start, in source order; none when dir recorded
// nothing (a new run, or one from before the record was kept). Items the
// last run did not have are new work, not a change.
func (s *ItemSums) Changed(dir string) ([]ChangedItem, error) {
	old, err := readItemSums(filepath.Join(dir, ItemSumsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	changed := map[uint64]bool{}
	i := 0
	for _, o := range old {
		for i < len(s.sums) && s.sums[i].key < o.key {
			i++
		}
		if i < len(s.sums) && s.sums[i].key == o.key && s.sums[i].content != o.content {
			changed[o.key] = true
		}
	}
	if len(changed) == 0 {
		return nil, nil
	}
	var out []ChangedItem
	for _, it := range s.items {
		if changed[hashString(it.Key)] {
			out = append(out, ChangedItem{Key: it.Key, Line: int(it.Line)})
		}
	}
	return out, nil
}

// Save records the items in dir, whole (a temporary file, synced,
// renamed into place). The records of items this run did not load (a
// run of some items only) are kept as they were.
func (s *ItemSums) Save(dir string) error {
	path := filepath.Join(dir, ItemSumsFile)
	all := s.sums
	if old, err := readItemSums(path); err == nil {
		all = slices.Clone(s.sums)
		i := 0
		for _, o := range old {
			for i < len(s.sums) && s.sums[i].key < o.key {
				i++
			}
			if i == len(s.sums) || s.sums[i].key != o.key {
				all = append(all, o)
			}
		}
		slices.SortFunc(all, byKey)
	}
	b := make([]byte, 0, len(itemSumsMagic)+8+16*len(all))
	b = append(b, itemSumsMagic...)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(all)))
	for _, x := range all {
		b = binary.LittleEndian.AppendUint64(b, x.key)
		b = binary.LittleEndian.AppendUint64(b, x.content)
	}
	return writeWhole(path, b)
}

func readItemSums(path string) ([]itemSum, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	bad := func(why string) error {
		return fmt.Errorf("%s: %s: not a record of items (%s)", path, why, itemSumsMagic[:len(itemSumsMagic)-1])
	}
	if len(b) < len(itemSumsMagic)+8 || string(b[:len(itemSumsMagic)]) != itemSumsMagic {
		return nil, bad("no header")
	}
	b = b[len(itemSumsMagic):]
	n := binary.LittleEndian.Uint64(b)
	b = b[8:]
	if uint64(len(b)) != n*16 {
		return nil, bad(fmt.Sprintf("%d bytes for %d items", len(b), n))
	}
	out := make([]itemSum, n)
	for i := range out {
		out[i] = itemSum{key: binary.LittleEndian.Uint64(b[16*i:]), content: binary.LittleEndian.Uint64(b[16*i+8:])}
	}
	return out, nil
}

// releaseLineSums lets go of the line hashes of the items' files.
func releaseLineSums(items []*Item) {
	var last *lineFile
	for _, it := range items {
		if v := it.vals; v != nil && v.src != nil && v.src != last {
			last = v.src
			last.sums = nil
		}
	}
}
