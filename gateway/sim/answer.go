package sim

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"fano/gateway"
)

// FormatFunc writes the answer to req in the given style. r is seeded from
// the request alone, so a FormatFunc that draws only from r is
// deterministic.
type FormatFunc func(req gateway.Request, r *rand.Rand, style string) string

var formats = struct {
	sync.RWMutex
	m map[string]FormatFunc
}{m: map[string]FormatFunc{}}

// RegisterFormat sets the answer format for a task type, replacing any
// earlier one; a nil f removes it, so the task type falls back to prose.
func RegisterFormat(taskType string, f FormatFunc) {
	formats.Lock()
	defer formats.Unlock()
	if f == nil {
		delete(formats.m, taskType)
		return
	}
	formats.m[taskType] = f
}

// formatFor returns the format of taskType, or prose when none is set.
func formatFor(taskType string) FormatFunc {
	formats.RLock()
	f, ok := formats.m[taskType]
	formats.RUnlock()
	if ok {
		return f
	}
	return defaultProse
}

var defaultProse = Prose("")

func init() {
	for _, t := range []string{
		"exploration", "critique", "synthesis", "draft_section", "review_section",
		"address_comment", "generate_questions", "synthesize_findings",
	} {
		RegisterFormat(t, Prose(t))
	}
	RegisterFormat("insight_extraction", InsightExtraction)
	for _, t := range []string{"insight_review", "math_evaluation", "exposition_evaluation", "evaluate_source"} {
		RegisterFormat(t, Review)
	}
	RegisterFormat("dedup_confirm", DedupConfirm)
	RegisterFormat("echo", Echo)
}

// relevantFacts returns n facts, those sharing the most keywords with the
// prompt first; ties, including facts sharing none, are in seeded order.
func relevantFacts(prompt string, r *rand.Rand, n int) []Fact {
	text := " " + normalize(prompt) + " "
	focus := " " + normalize(statementLine(prompt)) + " "
	order := r.Perm(len(facts))
	score := make([]int, len(facts))
	for i, kws := range keywordIndex {
		for _, k := range kws {
			if strings.Contains(text, k) {
				score[i]++
			}
			if strings.Contains(focus, k) {
				score[i] += 100 // the subject of the request outweighs its context
			}
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return score[order[a]] > score[order[b]] })
	n = min(n, len(facts))
	out := make([]Fact, n)
	for i := range n {
		out[i] = facts[order[i]]
	}
	return out
}

// statementLine is the text after a line's "Statement:" (how fano's
// prompts name their subject), "" if the prompt has none: a model
// answers about the subject, not about the context around it.
func statementLine(prompt string) string {
	for _, line := range strings.Split(prompt, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "Statement:"); ok {
			return rest
		}
	}
	return ""
}

// framings open the first paragraph per task type; %s is the topic.
var framings = map[string][]string{
	"":                    {"Here is what is known about %s.", "The question comes down to %s."},
	"exploration":         {"Let me explore this through %s.", "A good way into this is %s.", "Exploring the question, the natural starting point is %s."},
	"critique":            {"The argument is mostly sound, but it should be checked against what is known about %s.", "My main concern with the claim involves %s."},
	"synthesis":           {"Several threads come together around %s.", "Putting the pieces together, the common thread is %s."},
	"draft_section":       {"This section introduces %s.", "We now turn to %s."},
	"review_section":      {"The section reads well overall; my main comments concern %s.", "The section is clear, though its treatment of %s could be tightened."},
	"address_comment":     {"Thank you for the comment. I have revised the passage on %s accordingly.", "Good point; the text on %s now addresses it."},
	"generate_questions":  {"The material on %s suggests several open questions.", "Here are questions worth pursuing, starting from %s."},
	"synthesize_findings": {"The findings so far give a consistent picture of %s.", "Across the findings, the central theme is %s."},
}

// Prose returns the Markdown prose format (2–5 paragraphs) framed for
// taskType ("" = generic). Deep-mode requests get longer answers.
func Prose(taskType string) FormatFunc {
	frames := framings[taskType]
	if frames == nil {
		frames = framings[""]
	}
	return func(req gateway.Request, r *rand.Rand, style string) string {
		v := voiceFor(style)
		paras := 2 + r.IntN(4)
		if req.DeepMode {
			paras = 4 + r.IntN(2)
		}
		fs := relevantFacts(req.Prompt, r, paras+2)
		var out []string
		if taskType == "draft_section" {
			out = append(out, "## "+capitalize(fs[0].Topic))
		}

		first := fmt.Sprintf(pick(r, frames), v.emphasis(fs[0].Topic)) + " " + fs[0].Claim + " " + fs[0].Detail
		if o := pick(r, v.openers); o != "" {
			first = o + " " + first
		}
		out = append(out, first)

		if taskType == "generate_questions" {
			var qs []string
			for i, f := range fs[:paras] {
				qs = append(qs, fmt.Sprintf("%d. %s", i+1, f.Question))
			}
			out = append(out, strings.Join(qs, "\n"))
			if c := pick(r, v.closers); c != "" && paras > 2 {
				out = append(out, c)
			}
			return strings.Join(out, "\n\n") + "\n"
		}

		body := paras - 1
		closing := paras >= 3
		if closing {
			body--
		}
		for i := 1; i <= body; i++ {
			f := fs[i]
			p := lowerStart(pick(r, v.transitions), f.Claim) + " " + lowerStart(pick(r, v.hedges), f.Detail)
			if strings.EqualFold(style, "chatgpt") && r.IntN(3) == 0 {
				p = fmt.Sprintf("%s\n- %s\n- %s", v.emphasis(capitalize(f.Topic)+":"), f.Claim, f.Detail)
			}
			out = append(out, p)
		}
		if closing {
			f := fs[body+1]
			p := closingLine(taskType, f)
			if c := pick(r, v.closers); c != "" {
				p += " " + c
			}
			out = append(out, p)
		}
		return strings.Join(out, "\n\n") + "\n"
	}
}

// closingLine ends prose with a sentence fitting the task type.
func closingLine(taskType string, f Fact) string {
	switch taskType {
	case "critique", "review_section":
		return "A point to verify before accepting the text: " + f.Claim
	case "synthesis", "synthesize_findings":
		return "Taken together, these results sit alongside one more: " + f.Claim + " A natural next question: " + f.Question
	case "address_comment":
		return "For completeness the revision also recalls that " + lowerFirst(f.Claim)
	default:
		return "A question this leaves open: " + f.Question
	}
}

// Insight is one item of the insight_extraction format.
type Insight struct {
	Text       string   `json:"text"`
	Tags       []string `json:"tags"`
	Confidence float64  `json:"confidence"`
}

// InsightExtraction answers with a JSON array of 2–4 insights, each a fact
// restated atomically; chat styles often put it in a ```json fence.
func InsightExtraction(req gateway.Request, r *rand.Rand, style string) string {
	fs := relevantFacts(req.Prompt, r, 2+r.IntN(3))
	items := make([]Insight, len(fs))
	for i, f := range fs {
		items[i] = Insight{
			Text:       f.Claim,
			Tags:       f.Tags,
			Confidence: float64(60+r.IntN(39)) / 100,
		}
	}
	return jsonAnswer(items, r, style)
}

// Verdict is the insight_review / evaluation format.
type Verdict struct {
	Verdict   string `json:"verdict"` // "bless" | "revise" | "reject"
	Rationale string `json:"rationale"`
	Revision  string `json:"revision,omitempty"`
}

// Review answers with a JSON verdict: bless about 75 % of the time,
// revise about 17 %, reject about 8 %.
func Review(req gateway.Request, r *rand.Rand, style string) string {
	f := relevantFacts(req.Prompt, r, 1)[0]
	var v Verdict
	switch x := r.IntN(100); {
	case x < 75:
		v = Verdict{Verdict: "bless", Rationale: "The statement is correct and consistent with a known result: " + f.Claim}
	case x < 92:
		v = Verdict{
			Verdict:   "revise",
			Rationale: "The idea is right but the statement is imprecise; it should say exactly what is known about " + f.Topic + ".",
			Revision:  f.Claim,
		}
	default:
		v = Verdict{Verdict: "reject", Rationale: "The claim is not supported and conflicts with what is known about " + f.Topic + ": " + f.Claim}
	}
	return jsonAnswer(v, r, style)
}

// pairRE matches an index pair written as [i, j] or (i, j).
var pairRE = regexp.MustCompile(`[\[(]\s*(\d+)\s*,\s*(\d+)\s*[\])]`)

// DedupConfirm answers {"duplicates": [[i,j],...]}, confirming most of the
// index pairs it finds in the prompt (written [i,j] or (i,j)); with none
// found the list is empty.
func DedupConfirm(req gateway.Request, r *rand.Rand, style string) string {
	out := struct {
		Duplicates [][2]int `json:"duplicates"`
	}{Duplicates: [][2]int{}}
	seen := map[[2]int]bool{}
	for _, m := range pairRE.FindAllStringSubmatch(req.Prompt, -1) {
		i, err1 := strconv.Atoi(m[1])
		j, err2 := strconv.Atoi(m[2])
		p := [2]int{i, j}
		if err1 != nil || err2 != nil || i == j || seen[p] {
			continue
		}
		seen[p] = true
		if r.IntN(100) < 80 {
			out.Duplicates = append(out.Duplicates, p)
		}
	}
	return jsonAnswer(out, r, style)
}

// Echo answers with the prompt unchanged.
func Echo(req gateway.Request, _ *rand.Rand, _ string) string { return req.Prompt }

// jsonAnswer marshals v, fenced as chat UIs do with the style's odds.
func jsonAnswer(v any, r *rand.Rand, style string) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(fmt.Sprintf("sim: marshal answer: %v", err)) // only fixed types reach here
	}
	if r.Float64() < voiceFor(style).fenceJSON {
		return "```json\n" + string(b) + "\n```\n"
	}
	return string(b)
}

// offFormat are replies a chat UI gives instead of the asked-for format.
var offFormat = []string{
	"I'm sorry, something went wrong while generating the response. Broadly speaking, the Fano plane has 7 points and",
	"Here is a summary in prose rather than JSON: the statement concerns finite projective planes and seems",
	"Network error. There was an error generating a response",
}

// malform damages an answer: mostly cut off part way, sometimes replaced
// by a reply that ignores the format.
func malform(content string, r *rand.Rand) string {
	if r.IntN(10) < 3 || len(content) < 8 {
		return pick(r, offFormat)
	}
	cut := len(content) * (35 + r.IntN(40)) / 100
	for cut > 0 && !utf8.RuneStart(content[cut]) {
		cut--
	}
	return content[:cut]
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	r, n := utf8.DecodeRuneInString(s)
	return strings.ToUpper(string(r)) + s[n:]
}

// lowerFirst lower-cases the first letter unless the first word looks like
// a name or symbol (has another capital, a digit or punctuation).
func lowerFirst(s string) string {
	word, _, _ := strings.Cut(s, " ")
	if word == "" || word == "I" || strings.ContainsFunc(word[1:], func(r rune) bool {
		return !(r >= 'a' && r <= 'z')
	}) {
		return s
	}
	return strings.ToLower(word[:1]) + s[1:]
}

// lowerStart joins a lead-in phrase and a sentence, lower-casing the
// sentence's first letter when the lead-in ends mid-sentence.
func lowerStart(lead, s string) string {
	if lead == "" || strings.HasSuffix(lead, ": ") {
		return lead + s
	}
	return lead + lowerFirst(s)
}
