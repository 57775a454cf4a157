package pipeline

import (
	"fmt"
	"strings"
	"text/template"
	"text/template/parse"
)

// Most prompts are text with the item's fields, its key and the model
// put in ({{.item.claim}}, {{.key}}, {{.model}}). Such a prompt is
// filled from parts, without text/template's reflection, the data map
// it needs and the item's fields decoded for it: a third of a simple
// pipeline's own work per item. Any other template runs as a template.

type partKind uint8

const (
	partText partKind = iota
	partKey
	partModel
	partItemField
	partStepField
)

// promptPart is one piece of a simple prompt.
type promptPart struct {
	kind  partKind
	text  string // partText: the text; partItemField, partStepField: the field's name
	field int    // partItemField: its place in Definition.itemRefs
	step  string // partStepField: the llm step whose output has the field
}

// simpleParts splits a parsed prompt into parts, or returns ok false if
// it does anything but put text, .key, .model, .item.<field> and
// .steps.<step>.<field> in.
func simpleParts(t *template.Template) ([]promptPart, bool) {
	if t == nil || t.Tree == nil || t.Tree.Root == nil || len(t.Templates()) > 1 {
		return nil, false
	}
	var parts []promptPart
	for _, n := range t.Tree.Root.Nodes {
		switch n := n.(type) {
		case *parse.TextNode:
			parts = append(parts, promptPart{kind: partText, text: string(n.Text)})
		case *parse.ActionNode:
			if len(n.Pipe.Decl) > 0 || len(n.Pipe.Cmds) != 1 || len(n.Pipe.Cmds[0].Args) != 1 {
				return nil, false
			}
			f, ok := n.Pipe.Cmds[0].Args[0].(*parse.FieldNode)
			if !ok {
				return nil, false
			}
			switch {
			case len(f.Ident) == 1 && f.Ident[0] == "key":
				parts = append(parts, promptPart{kind: partKey})
			case len(f.Ident) == 1 && f.Ident[0] == "model":
				parts = append(parts, promptPart{kind: partModel})
			case len(f.Ident) == 2 && f.Ident[0] == "item":
				parts = append(parts, promptPart{kind: partItemField, text: f.Ident[1]})
			case len(f.Ident) == 3 && f.Ident[0] == "steps":
				parts = append(parts, promptPart{kind: partStepField, step: f.Ident[1], text: f.Ident[2]})
			default:
				return nil, false
			}
		default:
			return nil, false
		}
	}
	return parts, true
}

// compilePrompts finds the llm steps whose prompts are simple and the
// item fields they put in (itemRefs, which items read from a JSONL file
// keep as text).
func (d *Definition) compilePrompts() {
	at := map[string]int{}
	for _, s := range d.order {
		if s.LLM == nil {
			continue
		}
		parts, ok := simpleParts(s.tmpl)
		if !ok {
			continue
		}
		for i, p := range parts {
			if p.kind == partStepField {
				// Only an llm step of one model has its output there
				// (several: model -> output; a group: step -> output).
				if dep := d.byName[p.step]; dep == nil || dep.LLM == nil || len(dep.models) != 1 {
					ok = false
					break
				}
			}
			if p.kind != partItemField {
				continue
			}
			j, seen := at[p.text]
			if !seen {
				j = len(d.itemRefs)
				at[p.text] = j
				d.itemRefs = append(d.itemRefs, p.text)
			}
			parts[i].field = j
		}
		if ok {
			s.parts = parts
		}
	}
}

// itemRefValues is the text of each of refs in fields and the set of
// those that are strings (bit i: refs[i]); a template prints a string as
// it is, anything else, or a missing field, goes through the template.
// nil when none is a string, or refs are too many for the set.
func itemRefValues(fields map[string]any, refs []string) ([]string, uint64) {
	if len(refs) == 0 || len(refs) > 64 {
		return nil, 0
	}
	vals := make([]string, len(refs))
	var text uint64
	for i, name := range refs {
		if s, ok := fields[name].(string); ok {
			vals[i] = s
			text |= 1 << i
		}
	}
	if text == 0 {
		return nil, 0
	}
	return vals, text
}

// renderParts fills a simple prompt; ok false if a field it puts in is
// not a string, or not there (then the template fills it, printing or
// refusing the value). stepField reads a field of an llm step's output.
func (d *Definition) renderParts(buf *strings.Builder, s *Step, it *Item, model string, stepField func(step, field string) (string, bool)) bool {
	for _, p := range s.parts {
		ok := true
		switch p.kind {
		case partItemField:
			_, ok = it.refValue(d, p)
		case partStepField:
			_, ok = stepField(p.step, p.text)
		}
		if !ok {
			return false
		}
	}
	for _, p := range s.parts {
		switch p.kind {
		case partText:
			buf.WriteString(p.text)
		case partKey:
			buf.WriteString(it.Key)
		case partModel:
			buf.WriteString(model)
		case partItemField:
			v, _ := it.refValue(d, p)
			buf.WriteString(v)
		case partStepField:
			v, _ := stepField(p.step, p.text)
			buf.WriteString(v)
		}
	}
	return true
}

// noStepFields: no step output is at hand (RenderPrompt's callers give
// the values instead).
func noStepFields(string, string) (string, bool) { return "", false }

// refValue is an item field a simple prompt puts in: kept from the
// JSONL line when it was read, else from the fields.
func (it *Item) refValue(d *Definition, p promptPart) (string, bool) {
	if r := it.refsFor(d); r != nil && r.refs != nil {
		return r.refs[p.field], r.refText&(1<<p.field) != 0
	}
	f, err := it.fields()
	if err != nil {
		return "", false // the template reads the fields again and says why
	}
	s, ok := f[p.text].(string)
	return s, ok
}

// renderTemplate fills an llm step's prompt with text/template.
func (d *Definition) renderTemplate(buf *strings.Builder, s *Step, it *Item, steps map[string]any, model string) error {
	fields, err := it.fields()
	if err != nil {
		return fmt.Errorf("step %s: %w", s.Name, err)
	}
	data := map[string]any{"item": fields, "key": it.Key, "steps": steps, "model": model}
	if err := s.tmpl.Execute(buf, data); err != nil {
		return fmt.Errorf("step %s, item %s: prompt: %w", s.Name, it.Key, err)
	}
	return nil
}
