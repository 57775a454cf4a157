package probe

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// An answer_recorded event is JSON, {"task":...,"turn":...,"text":...}.
// encoding/json's reflection was about a twentieth of fano's CPU in the
// end-to-end benchmark (one encode and one decode per answer), so the
// probe writes and reads that one shape itself; anything else it reads
// (an event written by an older version with other spacing, a string it
// would have to guess at) goes to encoding/json.

// encodeAnswer is json.Marshal(a) without reflection. Valid JSON that
// encoding/json reads back to a; < > & are not escaped as it does.
func encodeAnswer(a answerEvent) ([]byte, error) {
	if !utf8.ValidString(a.Task) || !utf8.ValidString(a.Text) {
		return json.Marshal(a) // it replaces invalid bytes: its rules
	}
	b := make([]byte, 0, len(a.Task)+len(a.Text)+40)
	b = append(b, `{"task":`...)
	b = appendString(b, a.Task)
	b = append(b, `,"turn":`...)
	b = strconv.AppendInt(b, int64(a.Turn), 10)
	b = append(b, `,"text":`...)
	b = appendString(b, a.Text)
	return append(b, '}'), nil
}

// appendString appends s (valid UTF-8) as a JSON string.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			const hex = "0123456789abcdef"
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// decodeAnswer reads what encodeAnswer and json.Marshal of an answerEvent
// write; ok is false for anything else (the caller asks encoding/json).
func decodeAnswer(data []byte) (a answerEvent, ok bool) {
	rest, ok := cutPrefix(data, `{"task":`)
	if !ok {
		return a, false
	}
	if a.Task, rest, ok = readString(rest); !ok {
		return a, false
	}
	if rest, ok = cutPrefix(rest, `,"turn":`); !ok {
		return a, false
	}
	n := 0
	for n < len(rest) && (rest[n] >= '0' && rest[n] <= '9' || n == 0 && rest[n] == '-') {
		n++
	}
	turn, err := strconv.Atoi(string(rest[:n]))
	if err != nil {
		return a, false
	}
	a.Turn = turn
	if rest, ok = cutPrefix(rest[n:], `,"text":`); !ok {
		return a, false
	}
	if a.Text, rest, ok = readString(rest); !ok {
		return a, false
	}
	if string(rest) != "}" {
		return a, false
	}
	return a, true
}

func cutPrefix(b []byte, prefix string) ([]byte, bool) {
	if len(b) < len(prefix) || string(b[:len(prefix)]) != prefix {
		return b, false
	}
	return b[len(prefix):], true
}

// readString reads a JSON string at the start of b. It declines (ok
// false) what it would have to guess at: a \u escape of a surrogate,
// invalid UTF-8, a raw control character.
func readString(b []byte) (s string, rest []byte, ok bool) {
	if len(b) == 0 || b[0] != '"' {
		return "", b, false
	}
	var out []byte // nil while nothing was unescaped
	start := 1
	for i := 1; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '"':
			var raw []byte
			if out == nil {
				raw = b[start:i]
			} else {
				raw = append(out, b[start:i]...)
			}
			if !utf8.Valid(raw) {
				return "", b, false
			}
			return string(raw), b[i+1:], true
		case c < 0x20:
			return "", b, false
		case c != '\\':
			continue
		}
		if i+1 >= len(b) {
			return "", b, false
		}
		out = append(out, b[start:i]...)
		i++
		switch b[i] {
		case '"', '\\', '/':
			out = append(out, b[i])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			if i+4 >= len(b) {
				return "", b, false
			}
			r, err := strconv.ParseUint(string(b[i+1:i+5]), 16, 32)
			if err != nil || r >= 0xd800 && r < 0xe000 {
				return "", b, false
			}
			out = utf8.AppendRune(out, rune(r))
			i += 4
		default:
			return "", b, false
		}
		start = i + 1
	}
	return "", b, false
}
