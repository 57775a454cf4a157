package browser

import (
	"fmt"
	"regexp"
	"strings"
)

// checkIssue12Fields checks the completion, stall and answer-reading
// fields, and parses every selector of the profile, so that a typo like
// `.prose[[[` is named (file, line, field) by `fano config validate`
// instead of matching nothing during a run. errf builds an error at a
// field path of the profile.
func checkIssue12Fields(p *Profile, errf func(field, format string, args ...any) error) []error {
	var errs []error
	sels := profileSelectors(p)
	for field, l := range controlSelectors(p) {
		sels[field] = l
	}
	if !p.Complete.Empty() {
		sels["complete"] = p.Complete
	}
	if !p.ConversationGone.Empty() {
		sels["conversation_gone"] = p.ConversationGone
	}
	for _, field := range sortedKeys(sels) {
		for _, sel := range sels[field] {
			if err := parseSelector(sel); err != nil {
				errs = append(errs, errf(field, "%q is not a valid CSS selector: %v", sel, err))
			}
		}
	}
	if p.MaxStallSeconds < 0 {
		errs = append(errs, errf("max_stall_seconds", "must not be negative; is %d", p.MaxStallSeconds))
	}
	if p.MaxAnswerSeconds < 0 {
		errs = append(errs, errf("max_answer_seconds", "must not be negative; is %d", p.MaxAnswerSeconds))
	}
	if _, _, err := answerReader(p.AnswerText); err != nil {
		errs = append(errs, errf("answer_text", "%v", err))
	}
	return errs
}

// answerReader splits answer_text into how ("innerText", "textContent",
// "attribute", "copy") and its argument (the attribute's name, the copy
// button's selector).
func answerReader(s string) (how, arg string, err error) {
	switch {
	case s == "" || s == "innerText":
		return "innerText", "", nil
	case s == "textContent":
		return "textContent", "", nil
	case strings.HasPrefix(s, "attribute:") && reAttrName.MatchString(strings.TrimPrefix(s, "attribute:")):
		return "attribute", strings.TrimPrefix(s, "attribute:"), nil
	case strings.HasPrefix(s, "copy:"):
		sel := strings.TrimSpace(strings.TrimPrefix(s, "copy:"))
		if err := parseSelector(sel); err != nil {
			return "", "", fmt.Errorf("%q: the copy button %q is not a valid CSS selector: %v", s, sel, err)
		}
		return "copy", sel, nil
	}
	return "", "", fmt.Errorf("%q must be innerText, textContent, attribute:<name> or copy:<copy button selector>", s)
}

var (
	reAttrName = regexp.MustCompile(`^[A-Za-z_][-\w:.]*$`)
	// reAttrSel is the inside of an attribute selector: [name], [name=v],
	// [name~="v" i] ...
	reAttrSel = regexp.MustCompile(`^\s*(?:[-\w*]*\|)?-?[A-Za-z_\\][-\w\\]*\s*(?:[~|^$*]?=\s*(?:-?[A-Za-z_\\][-\w\\]*|"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')\s*(?:[iIsS]\s*)?)?$`)
)

// parseSelector checks the syntax of a selector list the way a browser's
// querySelectorAll would reject it: brackets and quotes balanced, attribute
// selectors well formed, no empty selector in a list, no dangling
// combinator, and a name after every '.', '#' and ':'. It does not know
// every pseudo-class; the start-up check in the browser catches the rest.
func parseSelector(sel string) error {
	var stack []byte // open '(' and '['
	var attr strings.Builder
	compound := false // the current complex selector has a compound
	combinator := false
	for i := 0; i < len(sel); i++ {
		c := sel[i]
		inAttr := len(stack) > 0 && stack[len(stack)-1] == '['
		if c == '\\' {
			if i+1 >= len(sel) {
				return fmt.Errorf("ends with a backslash")
			}
			if inAttr {
				attr.WriteString(sel[i : i+2])
			}
			i++
			compound, combinator = true, false
			continue
		}
		if c == '"' || c == '\'' {
			j := i + 1
			for j < len(sel) && sel[j] != c {
				if sel[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(sel) {
				return fmt.Errorf("unclosed quote at offset %d", i)
			}
			if inAttr {
				attr.WriteString(sel[i : j+1])
			} else if len(stack) == 0 {
				return fmt.Errorf("unexpected string at offset %d", i)
			}
			i = j
			continue
		}
		if inAttr {
			switch c {
			case ']':
				if !reAttrSel.MatchString(attr.String()) {
					return fmt.Errorf("bad attribute selector [%s] at offset %d", attr.String(), i)
				}
				attr.Reset()
				stack = stack[:len(stack)-1]
				compound, combinator = true, false
			case '[':
				return fmt.Errorf("'[' inside an attribute selector at offset %d", i)
			default:
				attr.WriteByte(c)
			}
			continue
		}
		switch c {
		case '[':
			stack = append(stack, '[')
		case '(':
			stack = append(stack, '(')
			compound, combinator = false, false
		case ')':
			if len(stack) == 0 || stack[len(stack)-1] != '(' {
				return fmt.Errorf("unmatched ')' at offset %d", i)
			}
			stack = stack[:len(stack)-1]
			compound, combinator = true, false
		case ']':
			return fmt.Errorf("unmatched ']' at offset %d", i)
		case ',':
			if len(stack) == 0 && (!compound || combinator) {
				return fmt.Errorf("empty selector before ',' at offset %d", i)
			}
			compound, combinator = false, false
		case '>', '+', '~':
			if len(stack) == 0 && (!compound || combinator) {
				return fmt.Errorf("combinator %q at offset %d has no selector before it", c, i)
			}
			combinator = true
		case '.', '#':
			if i+1 >= len(sel) || !isNameByte(sel[i+1]) {
				if len(stack) > 0 && stack[len(stack)-1] == '(' && c == '.' {
					continue // :nth-child(2.5) is the browser's to refuse
				}
				return fmt.Errorf("%q at offset %d is not followed by a name", c, i)
			}
			compound, combinator = true, false
		case ':':
			if i+1 >= len(sel) || !(isNameByte(sel[i+1]) || sel[i+1] == ':') {
				return fmt.Errorf("':' at offset %d is not followed by a name", i)
			}
			compound, combinator = true, false
		case ' ', '\t', '\n', '\r':
		default:
			compound, combinator = true, false
		}
	}
	switch {
	case len(stack) > 0:
		return fmt.Errorf("unclosed %q", stack[len(stack)-1])
	case combinator:
		return fmt.Errorf("ends with a combinator")
	case !compound:
		return fmt.Errorf("empty selector")
	}
	return nil
}

func isNameByte(c byte) bool {
	return c == '-' || c == '_' || c == '\\' || c >= 0x80 ||
		(c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}
