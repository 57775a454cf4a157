// Package clean strips chat filler from LLM answers that become document
// text: conversational openers ("Great question!"), closers ("Want me to
// turn this into a proof sketch?") and stray sentences about the
// conversation rather than the mathematics. The patterns live in a plain
// text file (filler.txt, embedded; a file of that name in an override
// directory replaces it), so a new service's style is a line to add, not
// code to change.
//
// Only whole sentences are removed, and only short ones (at most
// MaxFillerRunes): a pattern never cuts into a sentence that carries
// content.
package clean

import (
	"bufio"
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode/utf8"
)

// FileName is the pattern file's name, embedded and in override directories.
const FileName = "filler.txt"

// MaxFillerRunes bounds the length of a sentence a pattern may remove.
const MaxFillerRunes = 200

//go:embed filler.txt
var defaultPatterns []byte

// Pattern kinds.
const (
	KindOpener = "opener"
	KindCloser = "closer"
	KindFiller = "filler"
)

// Cleaner removes filler sentences. It is immutable and safe for
// concurrent use.
type Cleaner struct {
	source                   string
	openers, closers, filler []*regexp.Regexp
}

// Removal is one sentence a Cleaner took out, with the pattern kind that
// matched it.
type Removal struct {
	Kind     string
	Sentence string
}

// Parse reads a pattern file; name is used in errors, which give the line.
func Parse(name string, data []byte) (*Cleaner, error) {
	c := &Cleaner{source: name}
	sc := bufio.NewScanner(bytes.NewReader(data))
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		kind, expr, ok := strings.Cut(s, " ")
		expr = strings.TrimSpace(expr)
		if !ok || expr == "" {
			return nil, fmt.Errorf("%s:%d: want \"<opener|closer|filler> <regexp>\", got %q", name, line, s)
		}
		re, err := regexp.Compile(`(?i)^(?:` + expr + `)$`)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: pattern %q: %w", name, line, expr, err)
		}
		switch kind {
		case KindOpener:
			c.openers = append(c.openers, re)
		case KindCloser:
			c.closers = append(c.closers, re)
		case KindFiller:
			c.filler = append(c.filler, re)
		default:
			return nil, fmt.Errorf("%s:%d: unknown kind %q (want opener, closer or filler)", name, line, kind)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

// Default is the cleaner of the embedded patterns.
func Default() *Cleaner {
	c, err := Parse("embedded "+FileName, defaultPatterns)
	if err != nil {
		panic("clean: the embedded patterns do not parse: " + err.Error())
	}
	return c
}

// Load returns the cleaner of dir/filler.txt when dir has one, else the
// embedded default. A file that does not parse is an error naming it
// and the line.
func Load(dir string) (*Cleaner, error) {
	if dir == "" {
		return Default(), nil
	}
	path := filepath.Join(dir, FileName)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Default(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("clean: read %s: %w", path, err)
	}
	return Parse(path, data)
}

// Source names where the patterns came from.
func (c *Cleaner) Source() string { return c.source }

func matches(res []*regexp.Regexp, sentence string) bool {
	s := strings.TrimSpace(strings.Trim(strings.TrimSpace(sentence), "*_"))
	if s == "" || utf8.RuneCountInString(s) > MaxFillerRunes {
		return false
	}
	for _, re := range res {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

// Clean returns text without its filler sentences, and what it removed.
// Markdown structure (headings, lists, paragraphs, code and math blocks)
// is kept; a paragraph left empty disappears.
func (c *Cleaner) Clean(text string) (string, []Removal) {
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	content := ContentLines(lines)
	var removed []Removal
	take := func(kind string, s string) {
		removed = append(removed, Removal{Kind: kind, Sentence: strings.TrimSpace(s)})
	}

	// Openers: leading sentences of the first content lines.
	for _, i := range content {
		mk, ss := SplitLine(lines[i])
		k := 0
		for k < len(ss) && (matches(c.openers, ss[k]) || matches(c.filler, ss[k])) {
			take(KindOpener, ss[k])
			k++
		}
		lines[i] = joinLine(mk, ss[k:])
		if k < len(ss) {
			break
		}
	}
	// Closers: trailing sentences of the last content lines.
	for j := len(content) - 1; j >= 0; j-- {
		i := content[j]
		mk, ss := SplitLine(lines[i])
		k := len(ss)
		for k > 0 && (matches(c.closers, ss[k-1]) || matches(c.filler, ss[k-1])) {
			take(KindCloser, ss[k-1])
			k--
		}
		lines[i] = joinLine(mk, ss[:k])
		if k > 0 {
			break
		}
	}
	// Filler anywhere.
	for _, i := range content {
		mk, ss := SplitLine(lines[i])
		kept := ss[:0:0]
		for _, s := range ss {
			if matches(c.filler, s) {
				take(KindFiller, s)
				continue
			}
			kept = append(kept, s)
		}
		if len(kept) != len(ss) {
			lines[i] = joinLine(mk, kept)
		}
	}
	return tidy(lines), removed
}

// Find lists the filler sentences of text without changing it (for
// `fano doc check`).
func (c *Cleaner) Find(text string) []Removal {
	_, removed := c.Clean(text)
	return removed
}

// ContentLines are the indexes of prose lines: not blank, not headings,
// not HTML, not inside fenced code or display math.
func ContentLines(lines []string) []int {
	var out []int
	fenced := false
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "```") || t == "$$" {
			fenced = !fenced
			continue
		}
		if fenced || t == "" || strings.HasPrefix(t, "#") || strings.HasPrefix(t, "<") {
			continue
		}
		out = append(out, i)
	}
	return out
}

// listMarker is a line's Markdown list or quote prefix ("- ", "1. ", "> ").
var listMarker = regexp.MustCompile(`^\s*(?:[-*+]\s+|\d+[.)]\s+|>\s*)`)

// SplitLine cuts a line into its list marker and its sentences.
func SplitLine(line string) (marker string, sentences []string) {
	marker = listMarker.FindString(line)
	return marker, SplitSentences(line[len(marker):])
}

// joinLine rebuilds a line from its marker and kept sentences; a list
// item with no sentence left disappears.
func joinLine(marker string, kept []string) string {
	if len(kept) == 0 {
		return ""
	}
	return marker + strings.Join(kept, " ")
}

// tidy joins lines, dropping blank runs and empty list items.
func tidy(lines []string) string {
	var out []string
	blank := true
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			if !blank {
				out = append(out, "")
			}
			blank = true
			continue
		}
		out = append(out, strings.TrimRight(l, " \t"))
		blank = false
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}

// SplitSentences cuts a line of prose into sentences: a sentence ends at
// '.', '!' or '?' (and any closing quote, bracket or emphasis) followed
// by a space. The
// pieces, joined by single spaces, give the line back up to spacing.
func SplitSentences(line string) []string {
	var out []string
	start := 0
	for i := 0; i < len(line); i++ {
		ch := line[i]
		if ch != '.' && ch != '!' && ch != '?' {
			continue
		}
		j := i + 1
		for j < len(line) && strings.IndexByte(`"')]*_`, line[j]) >= 0 {
			j++
		}
		if j < len(line) && line[j] != ' ' {
			continue
		}
		if s := strings.TrimSpace(line[start:j]); s != "" {
			out = append(out, s)
		}
		start, i = j, j
	}
	if s := strings.TrimSpace(line[start:]); s != "" {
		out = append(out, s)
	}
	return out
}
