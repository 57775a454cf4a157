package explorer

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"fano/modules"
	"fano/modules/dedup"
)

// Answers that carry data (extraction, review, dedup confirmation) are
// checked in two phases: the schema (JSON of the
// right shape and types), then the rules (non-empty, length bounds, known
// values). A failure is a *modules.ValidationError carrying the raw
// answer; the executor retries the request and, after its retries, fails
// the task with every raw answer kept in the task's conversation.

func schemaErr(taskID, raw, format string, a ...any) *modules.ValidationError {
	return &modules.ValidationError{TaskID: taskID, Phase: "schema", Msg: fmt.Sprintf(format, a...), Raw: raw}
}

func rulesErr(taskID, raw, format string, a ...any) *modules.ValidationError {
	return &modules.ValidationError{TaskID: taskID, Phase: "rules", Msg: fmt.Sprintf(format, a...), Raw: raw}
}

// extractJSON finds the JSON value in an answer: the content of a ```json
// (or ```) fence if there is one, else the text from the first '[' or '{'
// to the last matching bracket.
func extractJSON(answer string) (string, bool) {
	s := answer
	if i := strings.Index(s, "```"); i >= 0 {
		rest := s[i+3:]
		if nl := strings.IndexByte(rest, '\n'); nl >= 0 {
			rest = rest[nl+1:] // drop the fence's language tag
		}
		if j := strings.Index(rest, "```"); j >= 0 {
			s = rest[:j]
		} else {
			s = rest
		}
	}
	s = strings.TrimSpace(s)
	start := strings.IndexAny(s, "[{")
	if start < 0 {
		return "", false
	}
	closer := byte(']')
	if s[start] == '{' {
		closer = '}'
	}
	end := strings.LastIndexByte(s, closer)
	if end < start {
		return "", false
	}
	return s[start : end+1], true
}

// decodeJSON decodes the JSON value of an answer into v (phase 1).
func decodeJSON(taskID, answer string, v any) *modules.ValidationError {
	js, ok := extractJSON(answer)
	if !ok {
		return schemaErr(taskID, answer, "no JSON value in the answer")
	}
	if err := json.Unmarshal([]byte(js), v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return schemaErr(taskID, answer, "not valid JSON (at byte %d: %v)", se.Offset, err)
		}
		return schemaErr(taskID, answer, "not valid JSON: %v", err)
	}
	return nil
}

// candidate is an extracted insight that passed both phases.
type candidate struct {
	Text       string
	Tags       []string
	Confidence float64
}

// cleanText collapses whitespace.
func cleanText(s string) string { return strings.Join(strings.Fields(s), " ") }

// parseInsights checks an extraction answer. Phase 1: a JSON array (or an
// object with an "insights" array) of objects with a string "text",
// optional string array "tags" and optional number "confidence" in [0,1].
// Phase 2: items whose text is empty, outside [minC, maxC] characters or
// repeated are dropped (listed with their reason) rather than costing a
// new request for the rest; the answer fails only when no item is left,
// or when it has more than maxN items.
func parseInsights(taskID, answer string, minC, maxC, maxN int) ([]candidate, []Dropped, *modules.ValidationError) {
	var raw json.RawMessage
	if err := decodeJSON(taskID, answer, &raw); err != nil {
		return nil, nil, err
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		var obj struct {
			Insights []json.RawMessage `json:"insights"`
		}
		if err2 := json.Unmarshal(raw, &obj); err2 != nil || obj.Insights == nil {
			return nil, nil, schemaErr(taskID, answer, "expected a JSON array of insights")
		}
		items = obj.Insights
	}
	type item struct {
		Text       *string  `json:"text"`
		Tags       []string `json:"tags"`
		Confidence *float64 `json:"confidence"`
	}
	parsed := make([]item, len(items))
	for i, r := range items {
		if err := json.Unmarshal(r, &parsed[i]); err != nil {
			return nil, nil, schemaErr(taskID, answer, "insight %d: %v", i+1, err)
		}
		if parsed[i].Text == nil {
			return nil, nil, schemaErr(taskID, answer, "insight %d: \"text\" is missing", i+1)
		}
		if c := parsed[i].Confidence; c != nil && (*c < 0 || *c > 1) {
			return nil, nil, schemaErr(taskID, answer, "insight %d: \"confidence\" %g is not in [0,1]", i+1, *c)
		}
	}

	// Phase 2: rules.
	if len(parsed) == 0 {
		return nil, nil, rulesErr(taskID, answer, "the list of insights is empty")
	}
	if len(parsed) > maxN {
		return nil, nil, rulesErr(taskID, answer, "%d insights; at most %d are asked for", len(parsed), maxN)
	}
	var out []candidate
	var dropped []Dropped
	seen := map[string]bool{}
	for i, it := range parsed {
		text := cleanText(*it.Text)
		n := utf8.RuneCountInString(text)
		var reason string
		switch {
		case text == "":
			reason = "empty text"
		case n < minC:
			reason = fmt.Sprintf("%d characters, fewer than %d", n, minC)
		case n > maxC:
			reason = fmt.Sprintf("%d characters, more than %d", n, maxC)
		case seen[dedup.Normalize(text)]:
			reason = "repeats an earlier insight of the answer"
		}
		if reason != "" {
			dropped = append(dropped, Dropped{Text: text, Reason: fmt.Sprintf("insight %d: %s", i+1, reason)})
			continue
		}
		seen[dedup.Normalize(text)] = true
		c := candidate{Text: text, Confidence: 0.5}
		if it.Confidence != nil {
			c.Confidence = *it.Confidence
		}
		for _, tag := range it.Tags {
			if tag = strings.TrimSpace(tag); tag != "" {
				c.Tags = append(c.Tags, tag)
			}
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		reasons := make([]string, len(dropped))
		for i, d := range dropped {
			reasons[i] = d.Reason
		}
		return nil, dropped, rulesErr(taskID, answer, "no usable insight: %s", strings.Join(reasons, "; "))
	}
	return out, dropped, nil
}

type verdict struct {
	Verdict, Rationale, Revision string
}

// parseVerdict checks a review answer. Phase 1: a JSON object with string
// "verdict" and "rationale" and an optional string "revision". Phase 2:
// the verdict is bless, revise or reject; the rationale is not empty; a
// revise carries a revision of [minC, maxC] characters.
func parseVerdict(taskID, answer string, minC, maxC int) (verdict, *modules.ValidationError) {
	var v struct {
		Verdict   *string `json:"verdict"`
		Rationale *string `json:"rationale"`
		Revision  *string `json:"revision"`
	}
	if err := decodeJSON(taskID, answer, &v); err != nil {
		return verdict{}, err
	}
	if v.Verdict == nil {
		return verdict{}, schemaErr(taskID, answer, "\"verdict\" is missing")
	}
	if v.Rationale == nil {
		return verdict{}, schemaErr(taskID, answer, "\"rationale\" is missing")
	}
	out := verdict{Verdict: strings.ToLower(strings.TrimSpace(*v.Verdict)), Rationale: cleanText(*v.Rationale)}
	if v.Revision != nil {
		out.Revision = cleanText(*v.Revision)
	}
	switch out.Verdict {
	case VerdictBless, VerdictReject:
		out.Revision = ""
	case VerdictRevise:
		n := utf8.RuneCountInString(out.Revision)
		if out.Revision == "" {
			return verdict{}, rulesErr(taskID, answer, "verdict revise without a revision")
		}
		if n < minC || n > maxC {
			return verdict{}, rulesErr(taskID, answer, "the revision has %d characters; it must have %d to %d", n, minC, maxC)
		}
	default:
		return verdict{}, rulesErr(taskID, answer, "verdict %q is not bless, revise or reject", out.Verdict)
	}
	if out.Rationale == "" {
		return verdict{}, rulesErr(taskID, answer, "the rationale is empty")
	}
	return out, nil
}

// parseDuplicates checks a dedup confirmation of n pairs, numbered (1,2),
// (3,4), ...: phase 1 a JSON object {"duplicates": [[a,b], ...]} of
// integer pairs; phase 2 keeps the pairs that name a listed pair (in
// either order) and ignores others (a stray pair decides nothing). It
// returns the confirmed pair indexes (0-based).
func parseDuplicates(taskID, answer string, n int) (map[int]bool, *modules.ValidationError) {
	var v struct {
		Duplicates *[][]int `json:"duplicates"`
	}
	if err := decodeJSON(taskID, answer, &v); err != nil {
		return nil, err
	}
	if v.Duplicates == nil {
		return nil, schemaErr(taskID, answer, "\"duplicates\" is missing")
	}
	out := map[int]bool{}
	for i, p := range *v.Duplicates {
		if len(p) != 2 {
			return nil, schemaErr(taskID, answer, "duplicates[%d] is not a pair of numbers", i)
		}
		a, b := min(p[0], p[1]), max(p[0], p[1])
		if a%2 == 1 && b == a+1 && (a+1)/2 <= n {
			out[(a-1)/2] = true
		}
	}
	return out, nil
}
