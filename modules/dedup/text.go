package dedup

import (
	"slices"
	"strings"
	"unicode"
)

// numberWords map spelled-out numbers to digits, so "seven points" and
// "7 points" shingle alike.
var numberWords = map[string]string{
	"zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5",
	"six": "6", "seven": "7", "eight": "8", "nine": "9", "ten": "10",
	"eleven": "11", "twelve": "12", "thirteen": "13", "fourteen": "14",
	"fifteen": "15", "sixteen": "16", "seventeen": "17", "eighteen": "18",
	"nineteen": "19", "twenty": "20",
}

// synonyms fold a few words that statements use interchangeably.
var synonyms = map[string]string{
	"each": "every", "precisely": "exactly", "contains": "contain", "containing": "contain",
	"lies": "lie", "lying": "lie", "passes": "pass", "passing": "pass", "through": "on",
}

// stopwords carry no content. Negations ("no", "not") are kept on purpose:
// "has a blocking set" and "has no blocking set" must not look alike.
var stopwords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an the of and or is are be been being to in on at by for
		with as that this these those it its which from there their then than so such
		has have had was were will would can could may might do does did also
		we us our you your i me my he she they them his her one's into onto over under
		very just only both either neither whose who whom what when where while`) {
		m[w] = true
	}
	return m
}()

// Normalize lower-cases text, keeps runs of letters and digits as words
// separated by single spaces, and spells numbers as digits. Two statements
// that differ only in case, punctuation, spacing or "seven" versus "7"
// normalize to the same string.
func Normalize(text string) string {
	var b strings.Builder
	b.Grow(len(text))
	word := make([]rune, 0, 32)
	flush := func() {
		if len(word) == 0 {
			return
		}
		w := string(word)
		if d, ok := numberWords[w]; ok {
			w = d
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
		word = word[:0]
	}
	for _, r := range text {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			word = append(word, unicode.ToLower(r))
			continue
		}
		flush()
	}
	flush()
	return b.String()
}

// stem strips the common English plural endings.
func stem(w string) string {
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		return w[:len(w)-3] + "y"
	case len(w) > 3 && strings.HasSuffix(w, "s") &&
		!strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		return w[:len(w)-1]
	}
	return w
}

// tokens returns the content words of a normalized text.
func tokens(norm string) []string {
	var out []string
	for _, w := range strings.Fields(norm) {
		if s, ok := synonyms[w]; ok {
			w = s
		}
		if stopwords[w] {
			continue
		}
		out = append(out, stem(w))
	}
	return out
}

// Shingles returns the sorted, distinct hashed shingles of text: its
// content words (unigrams) and each pair of adjacent content words
// (bigrams). Unigrams make rephrasings alike, bigrams keep word order
// from being ignored altogether.
func Shingles(text string) []uint32 {
	toks := tokens(Normalize(text))
	out := make([]uint32, 0, 2*len(toks))
	for i, t := range toks {
		out = append(out, hash32(t))
		if i > 0 {
			out = append(out, hash32(toks[i-1]+"\x00"+t))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// hash32 is 64-bit FNV-1a folded to 32 bits.
func hash32(s string) uint32 {
	v := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		v ^= uint64(s[i])
		v *= 1099511628211
	}
	return uint32(v) ^ uint32(v>>32)
}

// jaccard is |a ∩ b| / |a ∪ b| of two sorted sets.
func jaccard(a, b []uint32) float64 {
	if len(a) == 0 || len(b) == 0 {
		return 0
	}
	i, j, inter := 0, 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] == b[j]:
			inter++
			i++
			j++
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return float64(inter) / float64(len(a)+len(b)-inter)
}

// Similarity is the exact Jaccard similarity of the shingle sets of a and
// b, in [0,1]. Two texts with no content words are alike (1) only when
// they normalize to the same string.
func Similarity(a, b string) float64 {
	sa, sb := Shingles(a), Shingles(b)
	if len(sa) == 0 && len(sb) == 0 {
		if Normalize(a) == Normalize(b) {
			return 1
		}
		return 0
	}
	return jaccard(sa, sb)
}

// containmentScore is |a ∩ b| / min(|a|, |b|) less 0.2, so that a pair
// where 80 % of the smaller set lies in the larger scores 0.6, the
// default duplicate threshold; 0 when the smaller set is too small for
// containment to mean anything.
func containmentScore(a, b []uint32) float64 {
	small := min(len(a), len(b))
	if small < 2*MinPassageWords-1 {
		return 0
	}
	i, j, inter := 0, 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] == b[j]:
			inter++
			i++
			j++
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return float64(inter)/float64(small) - 0.2
}
