package pipeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"fano/modules"
	"fano/pb"
)

// What a pipeline shows: its output files, summary, failures, panel
// report, and the checks of verify and repair.

// Exports: the output files are rewritten at the end of a run (and by
// export/repair), not after every answer: rewriting a 20,000-line file
// per answer would cost more than the answers.
func (m *Module) Exports(e *pb.ModuleEvent) []string {
	switch e.Type {
	case "run_finished", "revalidated", "retry_failed", "output_invalidated":
		return m.ExportPaths()
	}
	return nil
}

func (m *Module) ExportPaths() []string { return []string{FailuresFile, ResultsFile, SummaryFile} }

func (m *Module) Export(path string) ([]byte, error) {
	switch path {
	case ResultsFile:
		return m.resultsJSONL()
	case FailuresFile:
		return m.failuresJSONL()
	case SummaryFile:
		b, err := json.MarshalIndent(m.Summary(), "", "  ")
		return append(b, '\n'), err
	}
	return nil, fmt.Errorf("pipeline: no output file %q", path)
}

// Result is one finished item's line in results.jsonl.
type Result struct {
	Key    string         `json:"key"`
	Status string         `json:"status"` // done | failed | open (steps done so far)
	Steps  map[string]any `json:"steps"`
	// Failed names the failed pairs' stage by step and model (timeout,
	// request, schema, rules, ...).
	Failed map[string]map[string]string `json:"failed,omitempty"`
	Cost   float64                      `json:"cost_usd"`
}

// failedStages is Result.Failed of an item (nil: none failed).
func (m *Module) failedStages(it *Item) map[string]map[string]string {
	var out map[string]map[string]string
	for _, s := range m.def.order {
		for _, model := range s.models {
			if p := m.pairFor(s, it, model); p != nil && p.Status() == StatusFailed {
				if out == nil {
					out = map[string]map[string]string{}
				}
				if out[s.Name] == nil {
					out[s.Name] = map[string]string{}
				}
				out[s.Name][model] = p.Stage()
			}
		}
	}
	return out
}

func (m *Module) resultsJSONL() ([]byte, error) {
	return m.results(m.rawResults(), nil)
}

// rawResults: the stored outputs go out as they are, not decoded and
// encoded again (the same bytes: they were encoded by encoding/json),
// unless an expression step computes a value from them.
func (m *Module) rawResults() bool {
	return !slices.ContainsFunc(m.def.order, func(s *Step) bool { return s.expr != nil })
}

// ExportTo writes an output file to w as Export returns it; results.jsonl
// goes out item by item, through a small buffer, not built whole.
func (m *Module) ExportTo(path string, w io.Writer) error {
	if path == ResultsFile {
		_, err := m.results(m.rawResults(), w)
		return err
	}
	b, err := m.Export(path)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// streamChunk is how much of the results ExportTo holds before writing.
const streamChunk = 64 << 10

// results renders results.jsonl: to w when it is set (and returns nil),
// else whole.
func (m *Module) results(raw bool, w io.Writer) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	var scratch []byte
	var layout []resultKey
	if raw {
		layout = m.resultLayout()
		if w == nil {
			buf.Grow(m.finished * 96)
		}
	}
	for i, it := range m.items {
		if w != nil && buf.Len() >= streamChunk {
			if _, err := w.Write(buf.Bytes()); err != nil {
				return nil, err
			}
			buf.Reset()
		}
		st := m.itemSt[i]
		if st == itemOpen && !m.anyStepDone(it) {
			continue // nothing to show yet; an open item shows its steps done so far
		}
		if raw {
			// What enc.Encode of the item's Result writes, without
			// building its maps of steps: for a 20,000-item run this is
			// most of the end of the run.
			var err error
			if scratch, err = m.appendRawResult(&buf, scratch, layout, it, st); err != nil {
				return nil, fmt.Errorf("item %s: %w", it.Key, err)
			}
			continue
		}
		vals, err := m.stepValuesBefore(it, nil, false)
		if err != nil {
			return nil, err
		}
		for _, s := range m.def.order {
			if s.parent != "" {
				delete(vals, s.Name) // listed under its group only
			}
		}
		r := Result{Key: it.Key, Status: st.String(), Steps: vals, Failed: m.failedStages(it)}
		for _, s := range m.def.order {
			for _, model := range s.models {
				if p := m.pairFor(s, it, model); p != nil {
					r.Cost += p.Cost
				}
			}
		}
		r.Cost = roundUSD(r.Cost)
		if err := enc.Encode(r); err != nil {
			return nil, err
		}
	}
	if w != nil {
		_, err := w.Write(buf.Bytes())
		return nil, err
	}
	return buf.Bytes(), nil
}

// resultKey is one key of a result's steps, in the order encoding/json
// writes a map's keys: an llm step, or a group with its llm steps.
type resultKey struct {
	name  string
	step  *Step   // an llm step (nil for a group)
	group []*Step // a group's llm steps, by name
}

// resultLayout lists the keys stepValues can give a result, a group's
// steps under the group only (without
// expression steps), sorted by name.
func (m *Module) resultLayout() []resultKey {
	var keys []resultKey
	groups := map[string]int{}
	for _, s := range m.def.order {
		if s.LLM == nil {
			continue
		}
		if s.parent == "" {
			keys = append(keys, resultKey{name: s.Name, step: s})
			continue
		}
		g, ok := groups[s.parent]
		if !ok {
			g = len(keys)
			groups[s.parent] = g
			keys = append(keys, resultKey{name: s.parent})
		}
		keys[g].group = append(keys[g].group, s)
	}
	slices.SortFunc(keys, func(a, b resultKey) int { return strings.Compare(a.name, b.name) })
	for _, k := range keys {
		slices.SortFunc(k.group, func(a, b *Step) int { return strings.Compare(a.Name, b.Name) })
	}
	return keys
}

// stepDone reports whether every model of an llm step has an OK output
// for the item (stepValues puts only those in).
// anyStepDone: one of it's llm steps has every model's answer.
func (m *Module) anyStepDone(it *Item) bool {
	for _, s := range m.def.order {
		if s.LLM != nil && m.stepDone(s, it) {
			return true
		}
	}
	return false
}

func (m *Module) stepDone(s *Step, it *Item) bool {
	for _, model := range s.models {
		if p := m.pairFor(s, it, model); p == nil || p.Status() != StatusOK {
			return false
		}
	}
	return true
}

// appendStepOutput writes an llm step's stored output (one model) or its
// outputs by model, as appendValue writes stepValues' raw values.
func (m *Module) appendStepOutput(buf *bytes.Buffer, s *Step, it *Item) error {
	if len(s.models) == 1 {
		return json.Compact(buf, m.pairFor(s, it, s.models[0]).Output.raw())
	}
	models := slices.Clone(s.models)
	slices.Sort(models)
	buf.WriteByte('{')
	for i, model := range models {
		if i > 0 {
			buf.WriteByte(',')
		}
		if err := appendString(buf, model); err != nil {
			return err
		}
		buf.WriteByte(':')
		if err := json.Compact(buf, m.pairFor(s, it, model).Output.raw()); err != nil {
			return err
		}
	}
	buf.WriteByte('}')
	return nil
}

// appendRawResult writes a finished item's Result as encoding/json's
// Encoder would, from the stored outputs, with layout's keys.
func (m *Module) appendRawResult(buf *bytes.Buffer, scratch []byte, layout []resultKey, it *Item, st itemState) ([]byte, error) {
	buf.WriteString(`{"key":`)
	if err := appendString(buf, it.Key); err != nil {
		return scratch, err
	}
	buf.WriteString(`,"status":`)
	if err := appendString(buf, st.String()); err != nil {
		return scratch, err
	}
	buf.WriteString(`,"steps":{`)
	first := true
	key := func(name string) error {
		if !first {
			buf.WriteByte(',')
		}
		first = false
		if err := appendString(buf, name); err != nil {
			return err
		}
		buf.WriteByte(':')
		return nil
	}
	for _, k := range layout {
		if k.step != nil {
			if !m.stepDone(k.step, it) {
				continue
			}
			if err := key(k.name); err != nil {
				return scratch, err
			}
			if err := m.appendStepOutput(buf, k.step, it); err != nil {
				return scratch, err
			}
			continue
		}
		inner := false
		for _, s := range k.group {
			if !m.stepDone(s, it) {
				continue
			}
			if !inner {
				if err := key(k.name); err != nil {
					return scratch, err
				}
				buf.WriteByte('{')
			} else {
				buf.WriteByte(',')
			}
			inner = true
			if err := appendString(buf, s.Name); err != nil {
				return scratch, err
			}
			buf.WriteByte(':')
			if err := m.appendStepOutput(buf, s, it); err != nil {
				return scratch, err
			}
		}
		if inner {
			buf.WriteByte('}')
		}
	}
	buf.WriteByte('}')
	if st != itemDone {
		if failed := m.failedStages(it); failed != nil {
			b, err := json.Marshal(failed)
			if err != nil {
				return scratch, err
			}
			buf.WriteString(`,"failed":`)
			buf.Write(b)
		}
	}
	buf.WriteString(`,"cost_usd":`)
	cost := 0.0
	for _, s := range m.def.order {
		for _, model := range s.models {
			if p := m.pairFor(s, it, model); p != nil {
				cost += p.Cost
			}
		}
	}
	scratch = appendFloat(scratch[:0], roundUSD(cost))
	buf.Write(scratch)
	buf.WriteString("}\n")
	return scratch, nil
}

// appendValue writes v as json.Marshal would: a stored output
// (json.RawMessage) compacted, a map by its sorted keys, and the values
// JSON decodes to; anything else through json.Marshal.
func appendValue(buf *bytes.Buffer, v any) error {
	switch v := v.(type) {
	case json.RawMessage:
		return json.Compact(buf, v)
	case nil:
		buf.WriteString("null")
		return nil
	case bool:
		buf.WriteString(strconv.FormatBool(v))
		return nil
	case float64:
		if math.IsInf(v, 0) || math.IsNaN(v) {
			break // encoding/json's error
		}
		var scratch [32]byte
		buf.Write(appendFloat(scratch[:0], v))
		return nil
	case []any:
		if v == nil {
			buf.WriteString("null")
			return nil
		}
		buf.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := appendValue(buf, x); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
		return nil
	case map[string]any:
		if v == nil {
			buf.WriteString("null")
			return nil
		}
		var room [8]string
		keys := room[:0]
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := appendJSON(buf, k); err != nil {
				return err
			}
			buf.WriteByte(':')
			if err := appendValue(buf, v[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
		return nil
	}
	return appendJSON(buf, v)
}

// encodeValue encodes a value decoded from JSON (maps, slices, strings,
// numbers, booleans, null) as json.Marshal does, the same bytes, without
// its reflection: every valid answer's output is encoded so.
func encodeValue(v any) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(64)
	if err := appendValue(&buf, v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func appendJSON(buf *bytes.Buffer, v any) error {
	if s, ok := v.(string); ok {
		return appendString(buf, s)
	}
	b, err := json.Marshal(v)
	buf.Write(b)
	return err
}

// appendString writes s as a JSON string, as encoding/json does.
func appendString(buf *bytes.Buffer, s string) error {
	if ascii(s) {
		appendASCII(buf, s)
		return nil
	}
	b, err := json.Marshal(s)
	buf.Write(b)
	return err
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// appendASCII quotes an ASCII string as encoding/json does: quote and
// backslash escaped, \b \f \n \r \t by name, other control characters
// and the HTML characters < > & as \u00XX.
func appendASCII(buf *bytes.Buffer, s string) {
	buf.WriteByte('"')
	appendASCIIBody(buf, s)
	buf.WriteByte('"')
}

// appendASCIIBody is appendASCII without the quotes.
func appendASCIIBody(buf *bytes.Buffer, s string) {
	const hex = "0123456789abcdef"
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
			continue
		}
		buf.WriteString(s[start:i])
		start = i + 1
		switch c {
		case '"', '\\':
			buf.WriteByte('\\')
			buf.WriteByte(c)
		case '\b':
			buf.WriteString(`\b`)
		case '\f':
			buf.WriteString(`\f`)
		case '\n':
			buf.WriteString(`\n`)
		case '\r':
			buf.WriteString(`\r`)
		case '\t':
			buf.WriteString(`\t`)
		default:
			buf.WriteString(`\u00`)
			buf.WriteByte(hex[c>>4])
			buf.WriteByte(hex[c&0xf])
		}
	}
	buf.WriteString(s[start:])
}

// appendFloat formats a float64 as encoding/json does: the shortest
// representation, in exponent form below 1e-6 and from 1e21 on, with a
// one-digit negative exponent written without its leading zero.
func appendFloat(b []byte, f float64) []byte {
	abs, format := math.Abs(f), byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if n := len(b); format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		b[n-2] = b[n-1]
		b = b[:n-1]
	}
	return b
}

// roundUSD drops float noise below a millionth of a cent.
func roundUSD(x float64) float64 { return math.Round(x*1e8) / 1e8 }

// Failure is one failed pair's line in failures.jsonl.
type Failure struct {
	Key      string `json:"key"`
	Step     string `json:"step"`
	Model    string `json:"model"`
	Stage    string `json:"stage"` // parse | schema | rules | request | timeout
	Error    string `json:"error"`
	Raw      string `json:"raw,omitempty"`
	Attempts int    `json:"attempts"`
}

// Failures lists the failed pairs in item and step order.
func (m *Module) Failures() []Failure {
	var out []Failure
	for i, it := range m.items {
		if m.itemSt[i] == itemDone {
			continue // done: none of its pairs failed
		}
		for _, s := range m.def.order {
			for _, model := range s.models {
				if p := m.pairFor(s, it, model); p != nil && p.Status() == StatusFailed {
					out = append(out, Failure{Key: it.Key, Step: s.Name, Model: model, Stage: p.Stage(), Error: p.Error(), Raw: p.Raw(), Attempts: int(p.Attempts)})
				}
			}
		}
	}
	return out
}

func (m *Module) failuresJSONL() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, f := range m.Failures() {
		if err := enc.Encode(f); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// Counts of one step and model.
type Counts struct {
	OK int `json:"ok"`
	// Skipped: items whose when: skipped the step.
	Skipped int `json:"skipped,omitempty"`
	Failed  int `json:"failed"`
	Pending int `json:"pending"`
	// Invalid: answers that failed validation in the pairs' current
	// round (each asked again while attempts remain); the tokens and cost
	// of the step's requests to the model.
	Invalid int     `json:"invalid"`
	Tokens  int64   `json:"tokens"`
	CostUSD float64 `json:"cost_usd"`
}

// Summary is the state of a run.
type Summary struct {
	Pipeline    string                       `json:"pipeline"`
	Items       int                          `json:"items"`
	ItemsDone   int                          `json:"items_done"`
	ItemsFailed int                          `json:"items_failed"`
	Steps       map[string]map[string]Counts `json:"steps"` // step -> model -> counts
	CostUSD     float64                      `json:"cost_usd"`
	MaxCostUSD  float64                      `json:"max_cost_usd,omitempty"`
	Requests    int                          `json:"requests"`
	Stopped     string                       `json:"stopped,omitempty"`
	// Waiting: the day's request budget is spent and work is left; it
	// goes on at WaitingUntil (RFC 3339, UTC).
	Waiting      string `json:"waiting,omitempty"`
	WaitingUntil string `json:"waiting_until,omitempty"`
	// StepOrder lists Steps' keys in pipeline order.
	StepOrder []string `json:"step_order"`
	// Stop is how the latest run ended: reason, exit code, detail.
	Stop *Stop `json:"stop,omitempty"`
}

// Summary counts items and pairs.
func (m *Module) Summary() Summary {
	s := Summary{Pipeline: m.def.Name, Items: len(m.items), Steps: map[string]map[string]Counts{},
		CostUSD: roundUSD(m.spent), MaxCostUSD: m.def.Limits.MaxCost, Stopped: m.StopReason(), Stop: m.st.LastStop, StepOrder: m.StepOrder()}
	for _, n := range m.st.Requests {
		s.Requests += n
	}
	if why, until, ok := m.Waiting(); ok {
		s.Waiting, s.WaitingUntil = why, until.Format(time.RFC3339)
	}
	for _, st := range m.def.order {
		if st.LLM == nil {
			continue
		}
		byModel := map[string]Counts{}
		for _, model := range st.models {
			var c Counts
			for _, it := range m.items {
				p, where := m.standing(st, it, model)
				switch where {
				case pairSkipped:
					c.Skipped++
				case pairOK:
					c.OK++
				case pairFailed:
					c.Failed++
				default:
					c.Pending++
				}
				if p != nil {
					c.Tokens += p.Tokens
					c.CostUSD += p.Cost
					c.Invalid += int(p.Attempts)
				}
			}
			c.CostUSD = roundUSD(c.CostUSD)
			byModel[model] = c
		}
		s.Steps[st.Name] = byModel
	}
	for _, st := range m.itemSt {
		switch st {
		case itemDone:
			s.ItemsDone++
		case itemFailed:
			s.ItemsFailed++
		}
	}
	return s
}

// Progress is the cheap part of Summary, for a progress bar.
func (m *Module) Progress() (finished, total int) {
	return m.finished, len(m.items)
}

// Verify checks the state: results for items no longer in the source,
// and stored outputs that no longer pass the step's validation.
func (m *Module) Verify() []modules.Problem {
	var out []modules.Problem
	for _, k := range m.pairKeys() {
		p := m.pairAt(k)
		step, item, model := splitPairKey(k)
		id := step + "/" + item + "/" + model
		s := m.def.Step(step)
		i, ok := m.itemIndex(item)
		if s == nil || s.LLM == nil || !ok {
			out = append(out, modules.Problem{Kind: "orphan_result", ID: id, Detail: "a stored result whose step or item is no longer in the pipeline"})
			continue
		}
		if p.Status() != StatusOK {
			continue
		}
		vals, err := m.stepValues(m.items[i])
		if err != nil {
			out = append(out, modules.Problem{Kind: "invalid_output", ID: id, Detail: err.Error()})
			continue
		}
		if _, stage, err := m.def.ValidateAnswer(s, m.items[i], vals, string(p.Output)); err != nil {
			out = append(out, modules.Problem{Kind: "invalid_output", ID: id, Detail: stage + ": " + err.Error()})
		}
	}
	return out
}

// DecideRepair: an invalid stored output is marked failed (with the
// output as its raw answer), so `run --retry-failed` asks again; orphans
// are left alone (a later definition may bring the item back).
func (m *Module) DecideRepair(p modules.Problem, now time.Time) ([]*pb.ModuleEvent, error) {
	if p.Kind != "invalid_output" {
		return nil, nil
	}
	parts := strings.SplitN(p.ID, "/", 2)
	if len(parts) != 2 {
		return nil, fmt.Errorf("pipeline: repair %s: bad id", p.ID)
	}
	var key string
	m.eachPair(func(id pairID, _ *pair) {
		if id.step+"/"+id.item+"/"+id.model == p.ID {
			key = id.key()
		}
	})
	pr := m.pairAt(key)
	if pr == nil || pr.Status() != StatusOK {
		return nil, nil
	}
	return pairEvent("output_invalidated", "", answerEvent{pair: pairIDOf(key), Gen: int(pr.Gen), Stage: "verify", Error: p.Detail, Raw: string(pr.Output)})
}

// PanelReport is what the control panel shows of a pipeline.
type PanelReport struct {
	Kind    string  `json:"kind"` // "pipeline"
	Summary Summary `json:"summary"`
	// Steps: each llm step and model in pipeline order, with its rate
	// since the panel's first look and the time left at it.
	Steps    []StepProgress `json:"steps"`
	Failures []Failure      `json:"failures"` // the first few, raw answers cut short
	Total    int            `json:"failures_total"`
}

// Report is the panel's view: progress per step and model (in pipeline
// order, with rate and time left), and failures. The rate is over the
// module's clock (the time of the latest event), from the first Report.
func (m *Module) Report() any {
	fs := m.Failures()
	r := PanelReport{Kind: "pipeline", Summary: m.Summary(), Total: len(fs), Failures: []Failure{},
		Steps: m.panelRate.Observe(m.now, m.StepCounts())}
	for i, f := range fs {
		if i == 20 {
			break
		}
		if len(f.Raw) > 300 {
			f.Raw = f.Raw[:300] + "…"
		}
		r.Failures = append(r.Failures, f)
	}
	return r
}
