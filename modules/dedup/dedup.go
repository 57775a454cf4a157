// Package dedup is fano's one shared duplicate checker: every module that stores statements (the explorer's insights, the
// documenter's sections) adds them here and checks new text against all of
// them, so a statement found by one module is a duplicate for the others.
//
// Texts are normalized (case, punctuation, spelled numbers, plurals,
// stopwords) and cut into shingles: content words and adjacent pairs of
// them. Similarity is the exact Jaccard similarity of two shingle sets.
// Small stores are compared exhaustively; from Config.ExactBelow items on,
// candidates come from MinHash signatures in LSH bands and only they are
// compared exactly, so a check costs about the same at 100k items as at 5k
// (see bench_test.go). Scores are always exact; only recall is
// probabilistic, and the band shape is chosen so that a pair at the
// duplicate threshold is found with probability ≈ 0.99.
//
// The checker holds derived state: owners rebuild their items from their
// own state (Load) after a restart. It is safe for concurrent use.
package dedup

import (
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
)

// Config tunes a Checker. Zero fields take the defaults of DefaultConfig.
type Config struct {
	// Threshold: a score at or above it is a duplicate (deduplication.similarity_threshold).
	Threshold float64
	// BorderlineLow: scores in [BorderlineLow, Threshold) are borderline,
	// for an LLM to confirm (deduplication.borderline_low). 0 = Threshold.
	BorderlineLow float64
	// Bands and Rows shape the LSH index: Bands*Rows MinHash values per
	// text; a pair of similarity s becomes a candidate with probability
	// 1-(1-s^Rows)^Bands.
	Bands, Rows int
	// ExactBelow: stores smaller than this are compared exhaustively
	// (perfect recall, still well under a millisecond).
	ExactBelow int
	// Seed of the MinHash functions (fixed: checks are reproducible).
	Seed uint64
}

// DefaultConfig: the default thresholds, 32 bands of 4 rows.
func DefaultConfig() Config {
	return Config{Threshold: 0.6, BorderlineLow: 0.4, Bands: 32, Rows: 4, ExactBelow: 4096, Seed: 0xfa0_ded0}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Threshold <= 0 {
		c.Threshold = d.Threshold
	}
	if c.BorderlineLow <= 0 || c.BorderlineLow > c.Threshold {
		c.BorderlineLow = c.Threshold
	}
	if c.Bands <= 0 {
		c.Bands = d.Bands
	}
	if c.Rows <= 0 {
		c.Rows = d.Rows
	}
	if c.ExactBelow == 0 {
		c.ExactBelow = d.ExactBelow
	}
	if c.Seed == 0 {
		c.Seed = d.Seed
	}
	return c
}

// Item is one stored statement. Kind says whose it is and in what role,
// e.g. "explorer/blessed", "explorer/pending", "documenter/section".
type Item struct {
	ID   string
	Text string
	Kind string
}

// Match is the result of a check.
type Match struct {
	ID         string  // the most similar stored item at or above BorderlineLow; "" if none
	Kind       string  // its kind
	Text       string  // its text
	Score      float64 // exact Jaccard similarity with it (best score seen when ID is "")
	Duplicate  bool    // Score >= Threshold
	Borderline bool    // BorderlineLow <= Score < Threshold
}

// Checker stores items and finds the one most similar to a text.
type Checker struct {
	cfg Config
	a   []uint64 // MinHash multipliers (odd)
	b   []uint64

	mu    sync.RWMutex
	items []item         // by slot; dead slots are skipped and reclaimed by rebuild
	byID  map[string]int // id -> live slot
	live  int
	bands []band
}

type item struct {
	id, text, kind string
	sh             []uint32
	alive          bool
}

// New returns an empty checker.
func New(cfg Config) *Checker {
	cfg = cfg.withDefaults()
	k := cfg.Bands * cfg.Rows
	r := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	c := &Checker{cfg: cfg, a: make([]uint64, k), b: make([]uint64, k), byID: map[string]int{}, bands: make([]band, cfg.Bands)}
	for i := range k {
		c.a[i] = r.Uint64() | 1
		c.b[i] = r.Uint64()
	}
	return c
}

// Config returns the effective configuration.
func (c *Checker) Config() Config { return c.cfg }

// Len is the number of stored items.
func (c *Checker) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.live
}

// Get returns a stored item.
func (c *Checker) Get(id string) (Item, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	s, ok := c.byID[id]
	if !ok {
		return Item{}, false
	}
	it := c.items[s]
	return Item{ID: it.id, Text: it.text, Kind: it.kind}, true
}

// Add stores text under id, replacing what id held before (its text or
// its kind may change: a pending insight becomes blessed, a revision
// changes the text).
func (c *Checker) Add(id, text, kind string) {
	sh := Shingles(text)
	sig := c.signature(sh)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(id)
	c.addLocked(item{id: id, text: text, kind: kind, sh: sh, alive: true}, sig)
	c.maybeRebuildLocked()
}

// Remove forgets id; false if it was not stored.
func (c *Checker) Remove(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	ok := c.removeLocked(id)
	c.maybeRebuildLocked()
	return ok
}

// Load replaces every item of kind with items (their Kind is set to kind):
// how an owner rebuilds its share of the checker from its own state.
func (c *Checker) Load(kind string, items []Item) {
	type prepared struct {
		it  item
		sig []uint32
	}
	prep := make([]prepared, len(items))
	for i, it := range items {
		sh := Shingles(it.Text)
		prep[i] = prepared{item{id: it.ID, text: it.Text, kind: kind, sh: sh, alive: true}, c.signature(sh)}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for s := range c.items {
		if c.items[s].alive && c.items[s].kind == kind {
			c.removeLocked(c.items[s].id)
		}
	}
	for _, p := range prep {
		c.removeLocked(p.it.id)
		c.addLocked(p.it, p.sig)
	}
	c.maybeRebuildLocked()
}

// CheckOption narrows a check.
type CheckOption func(*checkOpts)

type checkOpts struct {
	skipKinds map[string]bool
	onlyKinds map[string]bool
	skipIDs   map[string]bool
	// containment also scores a pair by how much of the smaller set the
	// larger holds (see containmentScore): a sentence with a lead-in
	// ("It also helps to note that …") still repeats the sentence it wraps.
	containment bool
}

// SkipKinds ignores items of these kinds.
func SkipKinds(kinds ...string) CheckOption {
	return func(o *checkOpts) {
		for _, k := range kinds {
			o.skipKinds[k] = true
		}
	}
}

// OnlyKinds considers only items of these kinds.
func OnlyKinds(kinds ...string) CheckOption {
	return func(o *checkOpts) {
		if o.onlyKinds == nil {
			o.onlyKinds = map[string]bool{}
		}
		for _, k := range kinds {
			o.onlyKinds[k] = true
		}
	}
}

// SkipIDs ignores these items (e.g. the text's own entry).
func SkipIDs(ids ...string) CheckOption {
	return func(o *checkOpts) {
		for _, id := range ids {
			o.skipIDs[id] = true
		}
	}
}

// Check compares text with the stored items and returns the most similar
// one at or above BorderlineLow: duplicateOf is its id when the score
// reaches Threshold (borderline false) or lies in [BorderlineLow,
// Threshold) (borderline true); "" when nothing is that close.
func (c *Checker) Check(text string, opts ...CheckOption) (duplicateOf string, score float64, borderline bool) {
	m := c.Match(text, opts...)
	return m.ID, m.Score, m.Borderline
}

// Match is Check with the whole result. Ties go to the smaller id, so a
// check is a function of the stored items alone.
func (c *Checker) Match(text string, opts ...CheckOption) Match {
	return c.match(text, false, opts)
}

// Exhaustive is Match comparing every stored item, without the index:
// the baseline the index is measured against, and the reference for its
// recall.
func (c *Checker) Exhaustive(text string, opts ...CheckOption) Match {
	return c.match(text, true, opts)
}

func (c *Checker) match(text string, exhaustive bool, opts []CheckOption) Match {
	o := checkOpts{skipKinds: map[string]bool{}, skipIDs: map[string]bool{}}
	for _, f := range opts {
		f(&o)
	}
	sh := Shingles(text)
	if len(sh) == 0 {
		return Match{}
	}
	var sig []uint32
	if !exhaustive && c.Len() >= c.cfg.ExactBelow {
		sig = c.signature(sh) // outside the lock: the costly part
	}

	c.mu.RLock()
	defer c.mu.RUnlock()
	best, bestScore := -1, 0.0
	consider := func(s int) {
		it := &c.items[s]
		if !it.alive || o.skipIDs[it.id] || o.skipKinds[it.kind] || (o.onlyKinds != nil && !o.onlyKinds[it.kind]) {
			return
		}
		j := jaccard(sh, it.sh)
		if o.containment {
			j = max(j, containmentScore(sh, it.sh))
		}
		if j > bestScore || (j == bestScore && best >= 0 && it.id < c.items[best].id) {
			best, bestScore = s, j
		}
	}
	if sig == nil || c.live < c.cfg.ExactBelow {
		for s := range c.items {
			consider(s)
		}
	} else {
		for _, s := range c.candidatesLocked(sig) {
			consider(int(s))
		}
	}
	if best < 0 || bestScore < c.cfg.BorderlineLow {
		return Match{Score: bestScore}
	}
	it := c.items[best]
	return Match{
		ID: it.id, Kind: it.kind, Text: it.text, Score: bestScore,
		Duplicate: bestScore >= c.cfg.Threshold, Borderline: bestScore < c.cfg.Threshold,
	}
}

// signature is the MinHash signature of a shingle set.
func (c *Checker) signature(sh []uint32) []uint32 {
	sig := make([]uint32, len(c.a))
	for i := range sig {
		sig[i] = ^uint32(0)
	}
	for _, x := range sh {
		v := uint64(x)
		for i := range sig {
			if h := uint32((c.a[i]*v + c.b[i]) >> 32); h < sig[i] {
				sig[i] = h
			}
		}
	}
	return sig
}

// bandKey hashes the rows of band i of a signature to keyBits bits.
func (c *Checker) bandKey(sig []uint32, i int) uint64 {
	h := uint64(14695981039346656037) ^ uint64(i)*0x9e3779b97f4a7c15
	for _, v := range sig[i*c.cfg.Rows : (i+1)*c.cfg.Rows] {
		h ^= uint64(v)
		h *= 1099511628211
		h ^= h >> 29
	}
	return h & keyMask
}

func (c *Checker) addLocked(it item, sig []uint32) {
	if len(c.items) >= maxSlots {
		c.rebuildLocked()
	}
	s := len(c.items)
	c.items = append(c.items, it)
	c.byID[it.id] = s
	c.live++
	for i := range c.bands {
		c.bands[i].add(c.bandKey(sig, i), uint32(s))
	}
}

func (c *Checker) removeLocked(id string) bool {
	s, ok := c.byID[id]
	if !ok {
		return false
	}
	delete(c.byID, id)
	c.items[s].alive = false
	c.items[s].sh = nil
	c.live--
	return true
}

// maybeRebuildLocked reclaims dead slots once they outnumber live ones.
func (c *Checker) maybeRebuildLocked() {
	if dead := len(c.items) - c.live; dead > 1024 && dead > c.live {
		c.rebuildLocked()
	}
}

func (c *Checker) rebuildLocked() {
	old := c.items
	c.items = make([]item, 0, c.live)
	c.byID = make(map[string]int, c.live)
	c.live = 0
	c.bands = make([]band, c.cfg.Bands)
	for _, it := range old {
		if it.alive {
			c.addLocked(it, c.signature(it.sh))
		}
	}
}

// candidatesLocked returns the distinct slots sharing a band with sig.
func (c *Checker) candidatesLocked(sig []uint32) []uint32 {
	var out []uint32
	for i := range c.bands {
		out = c.bands[i].lookup(c.bandKey(sig, i), out)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// A band entry packs a keyBits-bit band hash above a slotBits-bit slot.
const (
	slotBits = 24
	keyBits  = 64 - slotBits
	keyMask  = 1<<keyBits - 1
	maxSlots = 1 << slotBits
)

// band is one LSH band: a sorted array of packed entries plus a short
// unsorted tail of recent additions, merged in when it grows past about
// the square root of the array (8 bytes per item per band, no per-key
// allocation).
type band struct {
	sorted []uint64
	tail   []uint64
}

func (b *band) add(key uint64, slot uint32) {
	b.tail = append(b.tail, key<<slotBits|uint64(slot))
	if n := len(b.tail); n >= 256 && n*n >= len(b.sorted) {
		b.merge()
	}
}

func (b *band) merge() {
	slices.Sort(b.tail)
	merged := make([]uint64, 0, len(b.sorted)+len(b.tail))
	i, j := 0, 0
	for i < len(b.sorted) && j < len(b.tail) {
		if b.sorted[i] <= b.tail[j] {
			merged = append(merged, b.sorted[i])
			i++
		} else {
			merged = append(merged, b.tail[j])
			j++
		}
	}
	merged = append(merged, b.sorted[i:]...)
	merged = append(merged, b.tail[j:]...)
	b.sorted, b.tail = merged, b.tail[:0]
}

func (b *band) lookup(key uint64, out []uint32) []uint32 {
	lo := key << slotBits
	i := sort.Search(len(b.sorted), func(i int) bool { return b.sorted[i] >= lo })
	for ; i < len(b.sorted) && b.sorted[i]>>slotBits == key; i++ {
		out = append(out, uint32(b.sorted[i]&(maxSlots-1)))
	}
	for _, v := range b.tail {
		if v>>slotBits == key {
			out = append(out, uint32(v&(maxSlots-1)))
		}
	}
	return out
}
