package dedup

import (
	"sort"
	"strconv"
	"strings"
	"sync"

	"fano/modules/clean"
)

// Passages indexes the text of documents (a document's sections) at the
// level of sentences, so a draft can be checked passage by passage
// against everything already written: a sentence that already stands in
// some section is found even when the statements the sections came from
// differ. It is a Checker of its own (the shared checker holds
// statements; mixing sentences in would change what the explorer sees as
// a duplicate), with one item per sentence, id "<owner>#<n>".
//
// Safe for concurrent use.
type Passages struct {
	c      *Checker
	mu     sync.Mutex
	owners map[string]int // owner -> number of sentences stored
}

// MinPassageWords: a sentence with fewer content words than this is not
// indexed nor checked ("It follows." says nothing that could repeat).
const MinPassageWords = 4

// passageExactBelow: a passage index smaller than this compares every
// stored sentence (perfect recall; cheap at this size).
const passageExactBelow = 512

// KindPassage is the kind of a Passages item.
const KindPassage = "passage"

// Overlap is a passage of a text that already stands elsewhere.
type Overlap struct {
	Sentence string  // the sentence of the checked text
	Owner    string  // where the similar sentence stands (a section id)
	Stored   string  // that sentence
	Score    float64 // their similarity
}

// NewPassages returns an empty index; a sentence is a repeat at cfg's
// Threshold.
func NewPassages(cfg Config) *Passages {
	cfg = cfg.withDefaults()
	cfg.BorderlineLow = cfg.Threshold
	// Sentences are many and short: the index pays off early (a whole
	// document is checked sentence by sentence).
	cfg.ExactBelow = min(cfg.ExactBelow, passageExactBelow)
	return &Passages{c: New(cfg), owners: map[string]int{}}
}

// Set replaces the sentences of owner by those of text.
func (p *Passages) Set(owner, text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.removeLocked(owner)
	n := 0
	for _, s := range Sentences(text) {
		if contentWords(s) < MinPassageWords {
			continue
		}
		p.c.Add(owner+"#"+strconv.Itoa(n), s, KindPassage)
		n++
	}
	p.owners[owner] = n
}

// Remove forgets owner's sentences.
func (p *Passages) Remove(owner string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.removeLocked(owner)
}

func (p *Passages) removeLocked(owner string) {
	for i := range p.owners[owner] {
		p.c.Remove(owner + "#" + strconv.Itoa(i))
	}
	delete(p.owners, owner)
}

// Load replaces the whole index: texts by owner.
func (p *Passages) Load(texts map[string]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var items []Item
	owners := map[string]int{}
	keys := make([]string, 0, len(texts))
	for k := range texts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, owner := range keys {
		n := 0
		for _, s := range Sentences(texts[owner]) {
			if contentWords(s) < MinPassageWords {
				continue
			}
			items = append(items, Item{ID: owner + "#" + strconv.Itoa(n), Text: s})
			n++
		}
		owners[owner] = n
	}
	p.c.Load(KindPassage, items)
	p.owners = owners
}

// Len is the number of sentences indexed.
func (p *Passages) Len() int { return p.c.Len() }

// Overlaps returns the sentences of text that already stand in another
// owner's text (not one of skipOwners), each with the most similar one,
// in text order.
func (p *Passages) Overlaps(text string, skipOwners ...string) []Overlap {
	return p.overlaps(text, false, skipOwners)
}

// OverlapsExhaustive is Overlaps comparing every stored sentence: the
// brute-force baseline of the benchmark.
func (p *Passages) OverlapsExhaustive(text string, skipOwners ...string) []Overlap {
	return p.overlaps(text, true, skipOwners)
}

func (p *Passages) overlaps(text string, exhaustive bool, skipOwners []string) []Overlap {
	var out []Overlap
	for _, s := range Sentences(text) {
		if contentWords(s) < MinPassageWords {
			continue
		}
		if mt, ok := p.best(s, exhaustive, skipOwners); ok {
			out = append(out, mt)
		}
	}
	return out
}

// Find is the stored sentence (not one of skipOwners') that sentence
// repeats, if any.
func (p *Passages) Find(sentence string, skipOwners ...string) (Overlap, bool) {
	if contentWords(sentence) < MinPassageWords {
		return Overlap{}, false
	}
	return p.best(sentence, false, skipOwners)
}

// Indexed says whether a sentence is long enough to be indexed and checked.
func Indexed(sentence string) bool { return contentWords(sentence) >= MinPassageWords }

// best is the most similar stored sentence at or above the threshold
// whose owner is not skipped.
func (p *Passages) best(sentence string, exhaustive bool, skipOwners []string) (Overlap, bool) {
	skip := []CheckOption{func(o *checkOpts) { o.containment = true }}
	if len(skipOwners) > 0 {
		p.mu.Lock()
		var ids []string
		for _, o := range skipOwners {
			for i := range p.owners[o] {
				ids = append(ids, o+"#"+strconv.Itoa(i))
			}
		}
		p.mu.Unlock()
		skip = append(skip, SkipIDs(ids...))
	}
	var m Match
	if exhaustive {
		m = p.c.Exhaustive(sentence, skip...)
	} else {
		m = p.c.Match(sentence, skip...)
	}
	if !m.Duplicate {
		return Overlap{}, false
	}
	owner, _, _ := strings.Cut(m.ID, "#")
	return Overlap{Sentence: sentence, Owner: owner, Stored: m.Text, Score: m.Score}, true
}

// contentWords counts the words that carry content (see Shingles).
func contentWords(s string) int { return len(tokens(Normalize(s))) }

// Sentences returns the prose sentences of a Markdown text: headings,
// HTML lines, fenced code and display math are skipped; list markers and
// emphasis markers around a whole line are dropped.
func Sentences(markdown string) []string {
	var out []string
	lines := strings.Split(markdown, "\n")
	for _, i := range clean.ContentLines(lines) {
		t := strings.TrimSpace(listPrefix(strings.TrimSpace(lines[i])))
		out = append(out, clean.SplitSentences(t)...)
	}
	return out
}

// listPrefix drops a Markdown list or quote marker.
func listPrefix(t string) string {
	switch {
	case strings.HasPrefix(t, "- "), strings.HasPrefix(t, "* "), strings.HasPrefix(t, "+ "), strings.HasPrefix(t, "> "):
		return t[2:]
	}
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i > 0 && i+1 < len(t) && (t[i] == '.' || t[i] == ')') && t[i+1] == ' ' {
		return t[i+2:]
	}
	return t
}
