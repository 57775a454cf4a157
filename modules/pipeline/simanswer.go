package pipeline

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// DefaultFanoConfig is the fano config of a pipeline that names none:
// three simulated models (sim-a, sim-b, sim-c).
//
//go:embed fano.yaml
var DefaultFanoConfig []byte

var simWords = []string{"fano", "plane", "line", "point", "order", "group", "code", "field", "design", "block"}

// SimAnswer is how the simulator answers a pipeline prompt: a JSON object
// drawn from the schema after SchemaMarker (prose when there is none).
// Drawing only from r keeps it deterministic per request.
func SimAnswer(prompt string, r *rand.Rand) string {
	i := strings.LastIndex(prompt, SchemaMarker)
	if i < 0 {
		return "A simulated answer about " + simWords[r.IntN(len(simWords))] + "."
	}
	schema, ok := parsedSchema(prompt[i+len(SchemaMarker):])
	if !ok {
		return "{}"
	}
	var buf bytes.Buffer
	buf.Grow(64)
	if err := appendSample(&buf, schema, r); err != nil {
		return "{}"
	}
	return buf.String()
}

// schemas holds the schemas SimAnswer parsed, by their text (a pipeline
// has a few; every prompt of a step ends with the same one), at most
// maxSchemas. Read-only once stored, so shared by concurrent answers
// without a lock.
var (
	schemas     sync.Map // text -> map[string]any
	schemaCount atomic.Int32
)

const maxSchemas = 64

func parsedSchema(text string) (map[string]any, bool) {
	if s, ok := schemas.Load(text); ok {
		return s.(map[string]any), true
	}
	var s map[string]any
	if err := json.Unmarshal([]byte(text), &s); err != nil {
		return nil, false
	}
	if schemaCount.Add(1) <= maxSchemas {
		schemas.Store(text, s)
	}
	return s, true
}

// appendSample writes json.Marshal(sample(s, r)), drawing the same
// numbers from r, without building the value and reflecting on it: the
// simulator answers every pipeline request so.
func appendSample(buf *bytes.Buffer, s map[string]any, r *rand.Rand) error {
	if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
		return appendValue(buf, enum[r.IntN(len(enum))])
	}
	typ, _ := s["type"].(string)
	switch typ {
	case "object", "":
		props, _ := s["properties"].(map[string]any)
		var room [8]string
		names := room[:0]
		for n := range props {
			names = append(names, n)
		}
		slices.Sort(names)
		buf.WriteByte('{')
		first := true
		for _, n := range names {
			ps, ok := props[n].(map[string]any)
			if !ok {
				continue
			}
			if !first {
				buf.WriteByte(',')
			}
			first = false
			if err := appendString(buf, n); err != nil {
				return err
			}
			buf.WriteByte(':')
			if err := appendSample(buf, ps, r); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
		return nil
	case "array":
		n := 1 + r.IntN(3)
		if m, ok := toFloat(s["minItems"]); ok && float64(n) < m {
			n = int(m)
		}
		is, _ := s["items"].(map[string]any)
		buf.WriteByte('[')
		for i := range n {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := appendSample(buf, is, r); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
		return nil
	}
	return appendValue(buf, sample(s, r)) // a scalar: no map to build
}

// sample draws a value that matches s.
func sample(s map[string]any, r *rand.Rand) any {
	if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
		return enum[r.IntN(len(enum))]
	}
	lo, hasLo := toFloat(s["minimum"])
	hi, hasHi := toFloat(s["maximum"])
	if !hasLo {
		lo = 0
	}
	if !hasHi {
		hi = lo + 100
	}
	typ, _ := s["type"].(string)
	switch typ {
	case "object", "":
		props, _ := s["properties"].(map[string]any)
		names := make([]string, 0, len(props))
		for n := range props {
			names = append(names, n)
		}
		sort.Strings(names)
		out := map[string]any{}
		for _, n := range names {
			if ps, ok := props[n].(map[string]any); ok {
				out[n] = sample(ps, r)
			}
		}
		return out
	case "array":
		n := 1 + r.IntN(3)
		if m, ok := toFloat(s["minItems"]); ok && float64(n) < m {
			n = int(m)
		}
		is, _ := s["items"].(map[string]any)
		out := make([]any, n)
		for i := range out {
			out[i] = sample(is, r)
		}
		return out
	case "integer":
		return float64(int(lo) + r.IntN(int(hi-lo)+1))
	case "number":
		return float64(int((lo+r.Float64()*(hi-lo))*100)) / 100
	case "boolean":
		return r.IntN(2) == 0
	case "null":
		return nil
	}
	n := 3 + r.IntN(8)
	if m, ok := toFloat(s["minLength"]); ok && float64(n) < m {
		n = int(m)
	}
	words := make([]string, 0, n)
	for len(strings.Join(words, " ")) < n {
		words = append(words, simWords[r.IntN(len(simWords))])
	}
	out := strings.Join(words, " ")
	if m, ok := toFloat(s["maxLength"]); ok && float64(len(out)) > m {
		out = out[:int(m)]
	}
	return fmt.Sprint(out)
}
