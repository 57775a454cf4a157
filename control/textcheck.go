package control

import (
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits on operator text (seeds, comments): enough for a paragraph of
// guidance, small enough that a paste accident stays visible.
const (
	MaxSeedRunes    = 2000
	MaxCommentRunes = 8000
)

// CheckText accepts operator text: valid UTF-8, not blank, at most max
// characters, and no control characters other than newline and tab (a
// NUL or an escape sequence would end up in prompts, logs and the
// document). The error names the field and the first bad character.
func CheckText(field, s string, max int) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("field %q is not valid UTF-8", field)
	}
	if strings.TrimSpace(s) == "" {
		return fmt.Errorf("field %q is required", field)
	}
	if n := utf8.RuneCountInString(s); n > max {
		return fmt.Errorf("field %q has %d characters, at most %d", field, n, max)
	}
	for i, r := range s {
		if r == '\n' || r == '\t' {
			continue
		}
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return fmt.Errorf("field %q has control character %U at byte %d: only text, newlines and tabs are accepted", field, r, i)
		}
	}
	return nil
}

// recentTexts remembers operator texts for a window, so the same text
// sent twice within it (a double click, a retried request) counts once.
type recentTexts struct {
	window time.Duration
	mu     sync.Mutex
	seenAt map[string]time.Time
}

func newRecentTexts(window time.Duration) *recentTexts {
	return &recentTexts{window: window, seenAt: map[string]time.Time{}}
}

// seen reports whether key was remembered within the window before now.
func (r *recentTexts) seen(key string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.seenAt[key]
	return ok && now.Sub(at) < r.window
}

// remember records key at now (and forgets what left the window).
func (r *recentTexts) remember(key string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, at := range r.seenAt {
		if now.Sub(at) >= r.window {
			delete(r.seenAt, k)
		}
	}
	r.seenAt[key] = now
}

// commentKey is a comment's identity for duplicates: its section and its
// text with runs of white space folded.
func commentKey(section, text string) string {
	return section + "\x00" + strings.Join(strings.Fields(text), " ")
}
