package documenter

import (
	"fmt"
	"regexp"
	"strings"

	"fano/modules/clean"
	"fano/modules/dedup"
)

// Text-level care of the document: every LLM answer that becomes document
// text is cleaned of chat filler, and passages that already stand in
// another section are named (so a draft is revised) or pruned (so the
// document never says the same thing twice).

// cleanAnswer strips chat filler from an answer, logging what it removed
// at debug level.
func (m *Module) cleanAnswer(taskID, answer string) string {
	out, removed := m.cleaner.Clean(answer)
	for _, r := range removed {
		m.log.Debug().Str("event", "modules.documenter.filler_removed").Str("task", taskID).
			Str("kind", r.Kind).Str("sentence", r.Sentence).Msg("filler removed")
	}
	return out
}

// overlapsOf lists the passages of text already in the document (except
// in the sections skip), and the sentences text repeats within itself.
func (m *Module) overlapsOf(text string, skip ...string) []dedup.Overlap {
	out := m.passages.Overlaps(text, skip...)
	self := dedup.NewPassages(m.checker.Config())
	for i, s := range dedup.Sentences(text) {
		if !dedup.Indexed(s) {
			continue
		}
		if ov, ok := self.Find(s); ok {
			ov.Owner = ""
			out = append(out, ov)
			continue
		}
		self.Set(fmt.Sprint("s", i), s)
	}
	return out
}

// overlapCritique is the editor's note that asks for a revision, naming
// each repeated passage and the section where it stands.
func (m *Module) overlapCritique(ovs []dedup.Overlap) string {
	var b strings.Builder
	b.WriteString("These passages already stand elsewhere; leave them out or refer to their section instead of restating them:")
	for i, ov := range ovs {
		if i == 8 {
			fmt.Fprintf(&b, " (and %d more)", len(ovs)-i)
			break
		}
		where := "earlier in this draft"
		if sec := m.st.Sections[ov.Owner]; sec != nil {
			where = fmt.Sprintf("in section %q (#%s)", oneLine(sec.Title), sec.ID)
		}
		fmt.Fprintf(&b, " %q %s;", clip(200, ov.Sentence), where)
	}
	return strings.TrimSuffix(b.String(), ";") + "."
}

// labelLine is a line that only introduces what follows ("**Incidence:**").
var labelLine = regexp.MustCompile(`^\s*[*_]*[^.!?]{0,80}:[*_]*\s*$`)

// prune removes from text every sentence that already stands in the
// document (except in the sections skip) or earlier in text itself, and
// the paragraphs left with nothing but labels. It returns the text and
// the section the most removed sentences stood in ("" when none).
func (m *Module) prune(text string, skip ...string) (string, string) {
	self := dedup.NewPassages(m.checker.Config())
	where := map[string]int{}
	kept := 0
	var paras []string
	for _, para := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n\n") {
		// A paragraph whose passages mostly stand elsewhere goes whole:
		// what is left of it would only introduce what was removed.
		indexed, repeated := 0, 0
		for _, s := range dedup.Sentences(para) {
			if !dedup.Indexed(s) {
				continue
			}
			indexed++
			if ov, ok := m.passages.Find(s, skip...); ok {
				where[ov.Owner]++
				repeated++
			} else if _, ok := self.Find(s); ok {
				repeated++
			}
		}
		if repeated > 0 && 2*repeated >= indexed {
			continue
		}
		var lines []string
		content := false
		for _, line := range strings.Split(para, "\n") {
			t := strings.TrimSpace(line)
			if t == "" || strings.HasPrefix(t, "#") || strings.HasPrefix(t, "<") || strings.HasPrefix(t, "```") || t == "$$" {
				lines = append(lines, line)
				content = content || t != ""
				continue
			}
			marker, sentences := clean.SplitLine(line)
			var keep []string
			for _, s := range sentences {
				if _, ok := m.passages.Find(s, skip...); ok {
					continue
				}
				if _, ok := self.Find(s); ok {
					continue
				}
				if dedup.Indexed(s) {
					self.Set(fmt.Sprint("s", kept), s)
					kept++
				}
				keep = append(keep, s)
			}
			if len(keep) == 0 {
				continue
			}
			line = marker + strings.Join(keep, " ")
			if !labelLine.MatchString(line) {
				content = true
			}
			lines = append(lines, line)
		}
		if content {
			paras = append(paras, strings.Join(lines, "\n"))
		}
	}
	best := ""
	for _, id := range sortedKeys(where) {
		if where[id] > where[best] {
			best = id
		}
	}
	return strings.TrimSpace(strings.Join(paras, "\n\n")), best
}

// sameTitle finds a section titled like title ("" if none): one subject,
// one section.
func (m *Module) sameTitle(title string) string {
	key := dedup.Normalize(title)
	if key == "" {
		return ""
	}
	for _, id := range sortedKeys(m.st.Sections) {
		if dedup.Normalize(m.st.Sections[id].Title) == key {
			return id
		}
	}
	return ""
}

// tocEntry is one line of the contents a draft prompt carries.
type tocEntry struct {
	ID, Title, Summary string
}

// passageNote is a passage of another section shown to a drafter.
type passageNote struct {
	Section, Title, Text string
}

// promptBudgetChars bounds what a prompt carries of the rest of the
// document (about 1,000 tokens): contents first, then passages.
const promptBudgetChars = 4000

// contents lists the sections, most recent last, with one-line
// summaries, within budget characters; the oldest are left out first.
func (m *Module) contents(budget int) (entries []tocEntry, omitted int) {
	secs := m.Sections()
	used := 0
	for i := len(secs) - 1; i >= 0; i-- {
		s := secs[i]
		e := tocEntry{ID: s.ID, Title: oneLine(s.Title), Summary: clip(140, summary(s.Markdown))}
		n := len(e.Title) + len(e.Summary) + 8
		if used+n > budget {
			return entries, i + 1
		}
		used += n
		entries = append([]tocEntry{e}, entries...)
	}
	return entries, 0
}

// summary is a section's first sentence that says something.
func summary(markdown string) string {
	for _, s := range dedup.Sentences(markdown) {
		if dedup.Indexed(s) && !strings.HasPrefix(s, "This section") && !strings.HasPrefix(s, "We now turn") {
			return s
		}
	}
	return ""
}

// nearPassages are the passages of other sections that overlap the
// statement or the previous draft: what a drafter must not repeat.
func (m *Module) nearPassages(o *Opportunity, budget int) []passageNote {
	var ovs []dedup.Overlap
	if ov, ok := m.passages.Find(o.Text); ok {
		ovs = append(ovs, ov)
	}
	if o.Draft != "" {
		ovs = append(ovs, m.passages.Overlaps(o.Draft)...)
	}
	var out []passageNote
	seen := map[string]bool{}
	used := 0
	for _, ov := range ovs {
		sec := m.st.Sections[ov.Owner]
		if sec == nil || seen[ov.Stored] || ov.Owner == o.Target {
			continue
		}
		if used += len(ov.Stored) + len(sec.Title); used > budget {
			break
		}
		seen[ov.Stored] = true
		out = append(out, passageNote{Section: sec.ID, Title: oneLine(sec.Title), Text: ov.Stored})
	}
	return out
}
