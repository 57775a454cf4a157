package pipeline

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"text/template"

	"fano/modules/prompts"
)

// SchemaMarker introduces the JSON schema appended to an llm step's
// prompt; the simulator reads the schema after it to answer in shape.
const SchemaMarker = "Answer with one JSON object matching this JSON schema:\n"

// parseTemplate parses a step's prompt with the functions every prompt of
// fano has (modules/prompts: clip, inc) and json.
func parseTemplate(name, text string) (*template.Template, error) {
	return template.New(name).Option("missingkey=error").Funcs(prompts.Funcs).Funcs(template.FuncMap{
		"json": func(v any) (string, error) {
			b, err := json.Marshal(v)
			return string(b), err
		},
	}).Parse(text)
}

var reTemplateErr = regexp.MustCompile(`^template: [^:]*:(\d+):(?:\d+:)? ?(.*)$`)

// templateErrLine splits a text/template error into its line (1-based,
// within the template) and message.
func templateErrLine(err error) (int, string) {
	m := reTemplateErr.FindStringSubmatch(err.Error())
	if m == nil {
		return 0, err.Error()
	}
	var n int
	fmt.Sscan(m[1], &n)
	return n, m[2]
}

type stepRef struct {
	name string
	line int // 0-based line within the text
}

var reStepRef = regexp.MustCompile(`\bsteps\.([A-Za-z][A-Za-z0-9_]*)`)

// stepRefs lists the steps a template or expression reads.
func stepRefs(text string) []stepRef {
	var out []stepRef
	for i, line := range strings.Split(text, "\n") {
		for _, m := range reStepRef.FindAllStringSubmatch(line, -1) {
			out = append(out, stepRef{name: m[1], line: i})
		}
	}
	return out
}

var schemaTypes = map[string]bool{"object": true, "array": true, "string": true, "number": true, "integer": true, "boolean": true, "null": true}

// checkSchema checks the supported subset of JSON schema.
func checkSchema(s map[string]any, path string) error {
	for k, v := range s {
		switch k {
		case "type":
			t, ok := v.(string)
			if !ok || !schemaTypes[t] {
				return fmt.Errorf("%s.type: %v is not a JSON type (object, array, string, number, integer, boolean, null)", path, v)
			}
		case "properties":
			props, ok := v.(map[string]any)
			if !ok {
				return fmt.Errorf("%s.properties: give a mapping of field to schema", path)
			}
			for name, p := range props {
				pm, ok := p.(map[string]any)
				if !ok {
					return fmt.Errorf("%s.properties.%s: give a schema (a mapping)", path, name)
				}
				if err := checkSchema(pm, path+".properties."+name); err != nil {
					return err
				}
			}
		case "items":
			pm, ok := v.(map[string]any)
			if !ok {
				return fmt.Errorf("%s.items: give a schema (a mapping)", path)
			}
			if err := checkSchema(pm, path+".items"); err != nil {
				return err
			}
		case "required":
			xs, ok := v.([]any)
			if !ok {
				return fmt.Errorf("%s.required: give a list of field names", path)
			}
			props, _ := s["properties"].(map[string]any)
			for _, x := range xs {
				name, _ := x.(string)
				if _, ok := props[name]; !ok {
					return fmt.Errorf("%s.required: %v is not among the properties", path, x)
				}
			}
		case "enum":
			if xs, ok := v.([]any); !ok || len(xs) == 0 {
				return fmt.Errorf("%s.enum: give a non-empty list", path)
			}
		case "minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems":
			if _, ok := toFloat(v); !ok {
				return fmt.Errorf("%s.%s: give a number", path, k)
			}
		case "description", "title", "additionalProperties":
		default:
			return fmt.Errorf("%s.%s: not a supported schema keyword (type, properties, required, enum, items, minimum, maximum, minLength, maxLength, minItems, maxItems, description)", path, k)
		}
	}
	return nil
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case float64:
		return n, true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// matchSchema reports the first way v does not match schema s.
func matchSchema(s map[string]any, v any, path string) error {
	if t, ok := s["type"].(string); ok && !isType(t, v) {
		return fmt.Errorf("%s: want %s, got %s", path, t, jsonType(v))
	}
	if enum, ok := s["enum"].([]any); ok {
		found := false
		for _, e := range enum {
			if equalJSON(e, v) {
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("%s: %s is not one of %s", path, compact(v), compact(enum))
		}
	}
	if f, ok := toFloat(v); ok {
		if lo, ok := toFloat(s["minimum"]); ok && f < lo {
			return fmt.Errorf("%s: %v is below the minimum %v", path, f, lo)
		}
		if hi, ok := toFloat(s["maximum"]); ok && f > hi {
			return fmt.Errorf("%s: %v is above the maximum %v", path, f, hi)
		}
	}
	if str, ok := v.(string); ok {
		n := float64(len([]rune(str)))
		if lo, ok := toFloat(s["minLength"]); ok && n < lo {
			return fmt.Errorf("%s: %d characters, fewer than %v", path, int(n), lo)
		}
		if hi, ok := toFloat(s["maxLength"]); ok && n > hi {
			return fmt.Errorf("%s: %d characters, more than %v", path, int(n), hi)
		}
	}
	if obj, ok := v.(map[string]any); ok {
		if req, ok := s["required"].([]any); ok {
			for _, r := range req {
				name, _ := r.(string)
				if _, ok := obj[name]; !ok {
					return fmt.Errorf("%s: the field %q is missing", path, name)
				}
			}
		}
		props, _ := s["properties"].(map[string]any)
		var few [8]string // most objects have a few properties: no allocation
		keys := few[:0]
		for k := range props {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if fv, ok := obj[k]; ok {
				if err := matchSchema(props[k].(map[string]any), fv, path+"."+k); err != nil {
					return err
				}
			}
		}
	}
	if arr, ok := v.([]any); ok {
		if lo, ok := toFloat(s["minItems"]); ok && float64(len(arr)) < lo {
			return fmt.Errorf("%s: %d items, fewer than %v", path, len(arr), lo)
		}
		if hi, ok := toFloat(s["maxItems"]); ok && float64(len(arr)) > hi {
			return fmt.Errorf("%s: %d items, more than %v", path, len(arr), hi)
		}
		if is, ok := s["items"].(map[string]any); ok {
			for i, x := range arr {
				if err := matchSchema(is, x, fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func isType(t string, v any) bool {
	switch t {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "number":
		_, ok := v.(float64)
		return ok
	case "integer":
		f, ok := v.(float64)
		return ok && f == math.Trunc(f)
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "null":
		return v == nil
	}
	return false
}

func jsonType(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

func equalJSON(a, b any) bool {
	if fa, ok := toFloat(a); ok {
		fb, ok := toFloat(b)
		return ok && fa == fb
	}
	return compact(a) == compact(b)
}

func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

var reFence = regexp.MustCompile("(?s)```(?:json|JSON)?\\s*\n(.*?)\n?```")

// fenced matches a fenced block; most answers have none, and a search for
// the fence costs less than the expression.
func fenced(text string) []string {
	if !strings.Contains(text, "```") {
		return nil
	}
	return reFence.FindStringSubmatch(text)
}

// extractJSON finds the JSON value in an answer: a fenced block, else the
// text from the first { to the last }.
func extractJSON(answer string) (any, error) {
	text := strings.TrimSpace(answer)
	if m := fenced(text); m != nil {
		text = m[1]
	} else if i, j := strings.IndexByte(text, '{'), strings.LastIndexByte(text, '}'); i >= 0 && j > i {
		text = text[i : j+1]
	}
	if m, ok := flatObject(text); ok {
		return m, nil // the most common case, without reflection
	}
	var v any
	if json.Unmarshal([]byte(text), &v) == nil {
		return v, nil // the common case, without a Decoder's buffers
	}
	// A Decoder takes the first JSON value and leaves what follows it.
	v = nil
	dec := json.NewDecoder(strings.NewReader(text))
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	return v, nil
}

// Stage names where an answer failed: "parse", "schema" or "rules".
type Stage = string

// ValidateAnswer runs both phases of validation of an llm step's answer:
// the schema (with parsing), then the rules. It returns the parsed output,
// or the stage that failed and why.
func (d *Definition) ValidateAnswer(s *Step, it *Item, steps map[string]any, answer string) (any, Stage, error) {
	v, err := extractJSON(answer)
	if err != nil {
		// A step without a schema asks for prose as well: an answer that
		// holds no JSON is its text. (Refused, it would be asked again
		// until its attempts were spent, each one charged.)
		text := strings.TrimSpace(answer)
		if s.LLM.Schema != nil || text == "" {
			return nil, "parse", err
		}
		v = text
	}
	if s.LLM.Schema != nil {
		if err := matchSchema(s.LLM.Schema, v, "output"); err != nil {
			return nil, "schema", err
		}
	}
	for i, r := range s.rules {
		fields, err := it.fields()
		if err != nil {
			return nil, "rules", err
		}
		env := exprEnv(fields, it.Key, steps, v, seededRand(d.Seed, it.Key, s.Name))
		ok, err := r.eval(env)
		if err != nil {
			return nil, "rules", fmt.Errorf("rule %d (%s): %v", i+1, r.src, err)
		}
		if b, _ := ok.(bool); !b {
			return nil, "rules", fmt.Errorf("rule %d does not hold: %s", i+1, r.src)
		}
	}
	return v, "", nil
}

// RenderPrompt fills an llm step's prompt for an item and appends the
// schema the answer must match.
func (d *Definition) RenderPrompt(s *Step, it *Item, steps map[string]any, model string) (string, error) {
	var buf strings.Builder
	buf.Grow(s.promptSize + len(s.promptTail))
	stepField := noStepFields
	if steps != nil {
		stepField = func(step, field string) (string, bool) {
			out, _ := steps[step].(map[string]any)
			v, ok := out[field].(string)
			return v, ok
		}
	}
	if s.parts == nil || !d.renderParts(&buf, s, it, model, stepField) {
		if err := d.renderTemplate(&buf, s, it, steps, model); err != nil {
			return "", err
		}
	}
	buf.WriteString(s.promptTail)
	return buf.String(), nil
}
