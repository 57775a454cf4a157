// Package refusal tells an answer that is no answer — a refusal, an
// apology, an error message the site printed as the reply, or nothing —
// from content. Such answers are a bad-answer fault: never saved, the
// request goes to another backend.
package refusal

import (
	_ "embed"
	"fmt"
	"os"
	"regexp"
	"strings"
	"unicode/utf8"
)

//go:embed default_patterns.txt
var defaultPatterns string

// MaxRefusalBytes: a longer answer is content even if it opens with an
// apology ("Sorry, I can't give a proof, but here is a sketch: ...").
const MaxRefusalBytes = 400

// Matcher holds the refusal patterns. Safe for concurrent use.
type Matcher struct {
	patterns []*regexp.Regexp
}

// Default returns the built-in patterns.
func Default() *Matcher {
	m, err := parse("default", defaultPatterns)
	if err != nil {
		panic(err) // the embedded file is tested
	}
	return m
}

// Load reads patterns from path ("" = the built-in ones). An error names
// the file and line.
func Load(path string) (*Matcher, error) {
	if path == "" {
		return Default(), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("refusal patterns: %w", err)
	}
	return parse(path, string(data))
}

func parse(name, text string) (*Matcher, error) {
	m := &Matcher{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		re, err := regexp.Compile("(?i)" + line)
		if err != nil {
			return nil, fmt.Errorf("refusal patterns %s:%d: %w", name, i+1, err)
		}
		m.patterns = append(m.patterns, re)
	}
	return m, nil
}

// Bad says whether answer is no answer, and why.
func (m *Matcher) Bad(answer string) (string, bool) {
	text := strings.TrimSpace(answer)
	if text == "" {
		return "empty answer", true
	}
	if m == nil || len(text) > MaxRefusalBytes {
		return "", false
	}
	for _, re := range m.patterns {
		if re.MatchString(text) {
			return fmt.Sprintf("refusal %q", clip(text)), true
		}
	}
	return "", false
}

// clip shortens s to about 80 bytes, at a character boundary.
func clip(s string) string {
	if len(s) <= 80 {
		return s
	}
	n := 80
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
