package app

import (
	"encoding/json"
	"math"
	"strconv"
	"time"
)

// appendJSON appends l as encoding/json writes it, byte for byte, without
// reflection: a line is written for every request, and json.Marshal's
// reflection was about 2 % of a zero-latency pipeline run's CPU. Strings
// and numbers it does not write the same way itself go through
// encoding/json.
func (l *traceLine) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"time":`...)
	if y := l.Time.Year(); y < 0 || y > 9999 {
		data, err := json.Marshal(l.Time) // its error: a year RFC 3339 cannot hold
		if err != nil {
			return nil, err
		}
		b = append(b, data...)
	} else {
		b = append(b, '"')
		b = l.Time.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	b = appendJSONString(append(b, `,"backend":`...), l.Backend)
	b = appendJSONString(append(b, `,"task":`...), l.Task)
	b = appendJSONString(append(b, `,"module":`...), l.Module)
	b = appendJSONString(append(b, `,"task_type":`...), l.TaskType)
	b = strconv.AppendInt(append(b, `,"turn":`...), int64(l.Turn), 10)
	if l.Deep {
		b = append(b, `,"deep":true`...)
	}
	if l.Resend {
		b = append(b, `,"resend":true`...)
	}
	b = appendJSONString(append(b, `,"outcome":`...), l.Outcome)
	b, err := appendJSONFloat(append(b, `,"duration_ms":`...), l.DurationMS)
	if err != nil {
		return nil, err
	}
	b = strconv.AppendInt(append(b, `,"prompt_bytes":`...), int64(l.PromptBytes), 10)
	b = strconv.AppendInt(append(b, `,"answer_bytes":`...), int64(l.AnswerBytes), 10)
	if l.PromptTokens != 0 {
		b = strconv.AppendInt(append(b, `,"prompt_tokens":`...), l.PromptTokens, 10)
	}
	if l.CompletionTokens != 0 {
		b = strconv.AppendInt(append(b, `,"completion_tokens":`...), l.CompletionTokens, 10)
	}
	return append(b, '}'), nil
}

// appendJSONString appends s quoted as encoding/json quotes it: printable
// ASCII other than the characters it escapes is copied; any other string
// is left to encoding/json.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			data, _ := json.Marshal(s) // a string always encodes
			return append(b, data...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendJSONFloat appends f as encoding/json writes a float64: the
// shortest decimal, exponent form below 1e-6 and from 1e21, a one-digit
// negative exponent without its leading zero.
func appendJSONFloat(b []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		_, err := json.Marshal(f) // its error: no JSON number for it
		return nil, err
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}
