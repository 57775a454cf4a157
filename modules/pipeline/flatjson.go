package pipeline

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// Most items and answers are one flat JSON object of plain strings,
// numbers and booleans ({"id": "c1", "claim": "..."}, {"verdict": true}).
// flatObject decodes such an object without encoding/json's reflection
// and its second pass over the text; anything else (nesting, escapes,
// control characters, invalid UTF-8, text after the object) it leaves to
// encoding/json, which decides what it means. Where it decodes, the
// result is what json.Unmarshal into a map[string]any gives.
func flatObject[T string | []byte](s T) (map[string]any, bool) {
	i := skipSpace(s, 0)
	if i >= len(s) || s[i] != '{' {
		return nil, false
	}
	m := make(map[string]any, 4)
	i = skipSpace(s, i+1)
	if i < len(s) && s[i] == '}' {
		return m, skipSpace(s, i+1) == len(s)
	}
	for {
		if i >= len(s) || s[i] != '"' {
			return nil, false
		}
		end, ok := plainString(s, i+1)
		if !ok {
			return nil, false
		}
		key := string(s[i+1 : end])
		i = skipSpace(s, end+1)
		if i >= len(s) || s[i] != ':' {
			return nil, false
		}
		i = skipSpace(s, i+1)
		if i >= len(s) {
			return nil, false
		}
		switch c := s[i]; {
		case c == '"':
			end, ok := plainString(s, i+1)
			if !ok {
				return nil, false
			}
			m[key] = string(s[i+1 : end])
			i = end + 1
		case c == 't' && hasWord(s, i, "true"):
			m[key] = true
			i += 4
		case c == 'f' && hasWord(s, i, "false"):
			m[key] = false
			i += 5
		case c == 'n' && hasWord(s, i, "null"):
			m[key] = nil
			i += 4
		case c == '-' || (c >= '0' && c <= '9'):
			end, ok := numberEnd(s, i)
			if !ok {
				return nil, false
			}
			f, err := strconv.ParseFloat(string(s[i:end]), 64)
			if err != nil {
				return nil, false
			}
			m[key] = f
			i = end
		default:
			return nil, false
		}
		i = skipSpace(s, i)
		if i >= len(s) {
			return nil, false
		}
		if s[i] == '}' {
			return m, skipSpace(s, i+1) == len(s)
		}
		if s[i] != ',' {
			return nil, false
		}
		i = skipSpace(s, i+1)
	}
}

func skipSpace[T string | []byte](s T, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// plainString finds the closing quote of a string starting at i that
// has no escapes, no control characters and only valid UTF-8.
func plainString[T string | []byte](s T, i int) (int, bool) {
	ascii := true
	for j := i; j < len(s); j++ {
		switch c := s[j]; {
		case c == '"':
			if !ascii && !utf8.ValidString(string(s[i:j])) {
				return 0, false
			}
			return j, true
		case c == '\\' || c < 0x20:
			return 0, false
		case c >= 0x80:
			ascii = false
		}
	}
	return 0, false
}

func hasWord[T string | []byte](s T, i int, w string) bool {
	return len(s)-i >= len(w) && string(s[i:i+len(w)]) == w
}

// numberEnd checks JSON's number grammar from i and returns its end.
func numberEnd[T string | []byte](s T, i int) (int, bool) {
	digits := func(j int) int {
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		return j
	}
	if s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		i = digits(i + 1)
	default:
		return 0, false
	}
	if i < len(s) && s[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return 0, false
		}
		i = j
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return 0, false
		}
		i = j
	}
	return i, true
}

// decodeLine is decodeObject of a line kept as text.
func decodeLine(s string) (map[string]any, error) {
	if m, ok := flatObject(s); ok {
		return m, nil
	}
	var m map[string]any
	err := json.Unmarshal([]byte(s), &m)
	return m, err
}

// decodeObject is json.Unmarshal of b into a map[string]any.
func decodeObject(b []byte) (map[string]any, error) {
	if m, ok := flatObject(b); ok {
		return m, nil
	}
	var m map[string]any
	err := json.Unmarshal(b, &m)
	return m, err
}

// flatRefs is itemRefValues of the object b decodes to, for a flat
// object (see flatObject), read without building the object: only the
// fields named are copied. ok false: not flat; decode it.
func flatRefs[T string | []byte](b T, names []string) (vals []string, text uint64, ok bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, 0, false
	}
	vals = make([]string, len(names))
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return nil, 0, skipSpace(b, i+1) == len(b)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return nil, 0, false
		}
		end, ok := plainString(b, i+1)
		if !ok {
			return nil, 0, false
		}
		key := b[i+1 : end]
		field := -1
		for j, n := range names {
			if n == string(key) {
				field = j
				break
			}
		}
		i = skipSpace(b, end+1)
		if i >= len(b) || b[i] != ':' {
			return nil, 0, false
		}
		i = skipSpace(b, i+1)
		if i >= len(b) {
			return nil, 0, false
		}
		isText, val := false, ""
		switch c := b[i]; {
		case c == '"':
			end, ok := plainString(b, i+1)
			if !ok {
				return nil, 0, false
			}
			if field >= 0 {
				isText, val = true, string(b[i+1:end])
			}
			i = end + 1
		case c == 't' && hasWord(b, i, "true"):
			i += 4
		case c == 'f' && hasWord(b, i, "false"):
			i += 5
		case c == 'n' && hasWord(b, i, "null"):
			i += 4
		case c == '-' || (c >= '0' && c <= '9'):
			end, ok := numberEnd(b, i)
			if !ok {
				return nil, 0, false
			}
			if _, err := strconv.ParseFloat(string(b[i:end]), 64); err != nil {
				return nil, 0, false
			}
			i = end
		default:
			return nil, 0, false
		}
		if field >= 0 {
			// A key given twice: the last value counts, as in the map.
			vals[field] = val
			if isText {
				text |= 1 << field
			} else {
				text &^= 1 << field
			}
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return nil, 0, false
		}
		if b[i] == '}' {
			if skipSpace(b, i+1) != len(b) {
				return nil, 0, false
			}
			if text == 0 {
				return nil, 0, true
			}
			return vals, text, true
		}
		if b[i] != ',' {
			return nil, 0, false
		}
		i = skipSpace(b, i+1)
	}
}
