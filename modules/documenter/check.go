package documenter

import (
	"fmt"
	"regexp"
	"strings"

	"fano/modules"
	"fano/modules/clean"
	"fano/modules/dedup"
)

// Finding kinds of CheckDocument (`fano doc check`, part of `fano verify`).
const (
	FindingRepeatedSentence = "repeated_sentence" // a sentence standing in two sections
	FindingRepeatedTitle    = "repeated_title"
	FindingFiller           = "filler"        // chat filler in a section
	FindingBrokenAnchor     = "broken_anchor" // a link to #x where no section or anchor x is
	FindingEmptySection     = "empty_section"
)

// FindingKinds lists every kind, in report order.
var FindingKinds = []string{FindingRepeatedSentence, FindingRepeatedTitle, FindingFiller, FindingBrokenAnchor, FindingEmptySection}

// Finding is one flaw of the document a reader would notice.
type Finding struct {
	Kind    string `json:"kind"`
	Section string `json:"section"` // the section it is in ("" = the document as a whole)
	Detail  string `json:"detail"`
}

var (
	anchorLink = regexp.MustCompile(`\]\(#([^)\s]+)\)`)
	anchorDef  = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
)

// CheckDocument reads a document as a reader would: a sentence that
// stands in an earlier section again (the same similarity as the
// documenter's own check, cfg), two sections with one title, chat filler,
// links to anchors that do not exist (in the sections and in markdown,
// the rendered DOCUMENT.md, if given) and sections without text. The
// findings come in document order.
func CheckDocument(doc DocumentFile, markdown string, cleaner *clean.Cleaner, cfg dedup.Config) []Finding {
	if cleaner == nil {
		cleaner = clean.Default()
	}
	var out []Finding
	anchors := map[string]bool{}
	for _, s := range doc.Sections {
		anchors[s.Anchor] = true
		anchors[s.ID] = true
	}
	for _, m := range anchorDef.FindAllStringSubmatch(markdown, -1) {
		anchors[m[1]] = true
	}
	titles := map[string]string{}
	index := dedup.NewPassages(cfg)
	for _, s := range doc.Sections {
		key := dedup.Normalize(s.Title)
		if first, ok := titles[key]; ok {
			out = append(out, Finding{Kind: FindingRepeatedTitle, Section: s.ID, Detail: fmt.Sprintf("title %q is also the title of section %s", oneLine(s.Title), first)})
		} else {
			titles[key] = s.ID
		}
		if strings.TrimSpace(s.Markdown) == "" {
			out = append(out, Finding{Kind: FindingEmptySection, Section: s.ID, Detail: fmt.Sprintf("section %q has no text", oneLine(s.Title))})
		}
		for _, ov := range index.Overlaps(s.Markdown) {
			out = append(out, Finding{Kind: FindingRepeatedSentence, Section: s.ID,
				Detail: fmt.Sprintf("%q repeats section %s: %q (similarity %.2f)", clip(160, ov.Sentence), ov.Owner, clip(160, ov.Stored), ov.Score)})
		}
		index.Set(s.ID, s.Markdown)
		for _, r := range cleaner.Find(s.Markdown) {
			out = append(out, Finding{Kind: FindingFiller, Section: s.ID, Detail: fmt.Sprintf("%s %q", r.Kind, r.Sentence)})
		}
		for _, m := range anchorLink.FindAllStringSubmatch(s.Markdown, -1) {
			if !anchors[m[1]] {
				out = append(out, Finding{Kind: FindingBrokenAnchor, Section: s.ID, Detail: "link to #" + m[1] + ", which is no section or anchor"})
			}
		}
	}
	for _, m := range anchorLink.FindAllStringSubmatch(markdown, -1) {
		if !anchors[m[1]] {
			out = append(out, Finding{Kind: FindingBrokenAnchor, Detail: "DOCUMENT.md links to #" + m[1] + ", which is no section or anchor"})
		}
	}
	return out
}

// DocumentProblems is CheckDocument on the module's own document, as
// problems for `fano verify` (kind "document_<finding>", id the section).
func (m *Module) DocumentProblems() []modules.Problem {
	var out []modules.Problem
	for _, f := range CheckDocument(m.Document(), m.DocumentMarkdown(), m.cleaner, m.checker.Config()) {
		id := f.Section
		if id == "" {
			id = DocumentMD
		}
		out = append(out, modules.Problem{Kind: "document_" + f.Kind, ID: id, Detail: f.Detail})
	}
	return out
}
