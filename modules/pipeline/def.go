// Package pipeline runs a user's per-item LLM pipeline on fano's core: a
// YAML definition names an items source and steps (llm, expression,
// group) with dependencies; every (item, step, model) pair is one fano
// task whose result is a WAL event, so a run survives SIGKILL, resumes
// where it stopped and never processes a finished pair twice.
//
// The module is plain logic: definition loading and validation (def.go),
// item sources (items.go), expressions (expr.go), prompt templates and
// answer validation (validate.go), and the decide/apply state machine
// (module.go, with when.go, stop.go, commands.go, snapshot.go), progress and
// exports (progress.go, output.go, csv.go), step hashes (stephash.go) and
// the run directory (rundir.go). app builds it from a run directory;
// cmd/fano runs it.
package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"text/template"

	"gopkg.in/yaml.v3"
)

// Definition is a parsed pipeline file.
type Definition struct {
	Name string `yaml:"name"`
	Seed int64  `yaml:"seed"`
	// Config is the fano config (backends) to run on, relative to this
	// file; empty: three simulated models (DefaultFanoConfig).
	Config  string              `yaml:"config"`
	Items   ItemsSpec           `yaml:"items"`
	Models  []string            `yaml:"models"`  // default models of llm steps
	Classes map[string][]string `yaml:"classes"` // model class (cheap, expensive) -> models
	Prices  map[string]Price    `yaml:"prices"`  // model -> USD per million tokens
	Limits  Limits              `yaml:"limits"`
	Steps   []*Step             `yaml:"steps"`

	// Derived by Load.
	File   string  `yaml:"-"`
	Dir    string  `yaml:"-"` // relative item paths start here
	Source []byte  `yaml:"-"`
	order  []*Step // every runnable step (groups flattened), dependencies first
	byName map[string]*Step
	// aliases: the names of repeated steps (steps.<name> is the latest round)
	aliases map[string]bool
	// itemRefs: the item fields simple prompts put in (prompt.go).
	itemRefs []string
}

// Price is what a model costs, in USD per million tokens.
type Price struct {
	Input  float64 `yaml:"input"`
	Output float64 `yaml:"output"`
}

// Limits stop a run at a limit, never after it.
type Limits struct {
	// MaxCost in USD over the whole run directory (all runs together).
	MaxCost float64 `yaml:"max_cost"`
	// DailyRequests bounds the LLM requests of one UTC day.
	DailyRequests int `yaml:"daily_requests"`
	// MaxPrepared is the prepared-buffer watermark: steps of
	// the cheap class run ahead of the expensive ones by at most this
	// many items, so a day's budget is not spent on preparation alone.
	MaxPrepared int `yaml:"max_prepared"`
	// MaxOutputTokens is the answer size reserved against max_cost before
	// a request leaves (default 1000).
	MaxOutputTokens int `yaml:"max_output_tokens"`
	// MaxItems: only the first this many items of the source (0: all);
	// `run --max-items` overrides it. A later run with more goes on.
	MaxItems int `yaml:"max_items"`
}

// ItemsSpec says where the items come from: exactly one of Source,
// Permutations, Cross.
type ItemsSpec struct {
	// Source is a .jsonl or .csv file or a directory of files.
	Source       string              `yaml:"source"`
	Key          string              `yaml:"key"` // field holding the item's unique key
	Permutations *PermutationsSpec   `yaml:"permutations"`
	Cross        map[string][]string `yaml:"cross"`
	Limit        int                 `yaml:"limit"` // first n items only
}

// PermutationsSpec generates every ordered arrangement of Size of Of.
type PermutationsSpec struct {
	Of   []string `yaml:"of"`
	Size int      `yaml:"size"`
}

// Step is one step; exactly one of LLM, Expression, Group is set.
type Step struct {
	Name       string   `yaml:"name"`
	Needs      []string `yaml:"needs"`
	LLM        *LLMStep `yaml:"llm"`
	Expression string   `yaml:"expression"`
	Group      []*Step  `yaml:"group"`
	// Repeat runs its steps again while a condition holds, at most
	// Times rounds (judge -> repair -> judge); see RepeatSpec.
	Repeat *RepeatSpec `yaml:"repeat"`
	// When, if set, is an expression over item, key and steps (the steps
	// it needs) decided once those are done: false skips the step for
	// that item (no request; the steps that need it go on without it).
	When string `yaml:"when"`

	Line   int    `yaml:"-"`
	parent string // the group it belongs to
	tmpl   *template.Template
	// parts: the prompt, if it is simple text with item fields, key
	// and model put in (prompt.go); nil: it runs as a template.
	parts []promptPart
	// promptTail follows every rendered prompt: the schema the answer
	// must match, encoded once.
	promptTail string
	promptSize int // room a rendered prompt starts with: its template's length and some
	expr       *compiledExpr
	when       *compiledExpr
	base       string // a repeat's round of this body step ("" if none)
	rules      []*compiledExpr
	deps       []*Step // needsOf, computed once
	models     []string
	class      string
	pairCol    int // its first column in a module's pair table (layoutPairs)
}

// RepeatSpec is a bounded repeat: its steps run again, round after
// round, at most Times rounds, each round only while While (over item,
// key and steps) holds. The rounds are steps of their own, named
// <step>_1 .. <step>_N and listed under the repeat's name; in prompts,
// rules and While, steps.<step> is the latest round's value (or the
// step of that name before the repeat). Each round is as durable as any
// step.
type RepeatSpec struct {
	Times int     `yaml:"times"`
	While string  `yaml:"while"`
	Steps []*Step `yaml:"steps"`
}

// unroll makes a repeat's rounds: copies of its steps, round i needing
// round i-1, each with While as its when:.
func unroll(r *Step) ([]*Step, error) {
	rp := r.Repeat
	if rp.Times < 1 || rp.Times > 10 {
		return nil, fmt.Errorf("step %s: repeat.times must be 1..10", r.Name)
	}
	if strings.TrimSpace(rp.While) == "" {
		return nil, fmt.Errorf("step %s: repeat.while: give the condition to go on", r.Name)
	}
	if len(rp.Steps) == 0 {
		return nil, fmt.Errorf("step %s: repeat.steps: give the steps to repeat", r.Name)
	}
	body := map[string]bool{}
	for _, b := range rp.Steps {
		if b == nil || b.Group != nil || b.Repeat != nil || b.When != "" {
			return nil, fmt.Errorf("step %s: repeat.steps are llm or expression steps without when: (the repeat's while decides)", r.Name)
		}
		body[b.Name] = true
	}
	var out, prev []*Step
	for i := 1; i <= rp.Times; i++ {
		var round []*Step
		for _, b := range rp.Steps {
			c := *b
			c.Name, c.base, c.When = fmt.Sprintf("%s_%d", b.Name, i), b.Name, rp.While
			if b.LLM != nil {
				l := *b.LLM
				c.LLM = &l
			}
			c.Needs = nil
			for _, n := range b.Needs {
				if body[n] {
					n = fmt.Sprintf("%s_%d", n, i)
				}
				c.Needs = append(c.Needs, n)
			}
			for _, p := range prev {
				c.Needs = append(c.Needs, p.Name)
			}
			round = append(round, &c)
		}
		out = append(out, round...)
		prev = round
	}
	return out, nil
}

// LLMStep asks a model per item.
type LLMStep struct {
	Prompt string   `yaml:"prompt"`
	Models []string `yaml:"models"` // fan out over these
	Model  string   `yaml:"model"`
	Class  string   `yaml:"class"` // or a model class: cheap | expensive
	// Schema is a JSON schema (a subset: type, properties, required,
	// enum, items, minimum, maximum, minLength, maxLength) the answer
	// must match: phase one of validation.
	Schema map[string]any `yaml:"schema"`
	// Rules are expressions over `output` (and item, steps) that must
	// hold: phase two.
	Rules []string `yaml:"rules"`
	// Attempts bounds the requests per (item, model) (default 3): answers
	// that failed validation and requests past TimeoutSeconds count.
	Attempts int `yaml:"attempts"`
	// TimeoutSeconds is how long one request of this step may take
	// (0: the config's orchestrator.tasks.request_timeout_seconds). A
	// request past it is recorded as "timeout", counts as an attempt, and
	// the pair fails with stage "timeout" after the last attempt.
	TimeoutSeconds float64 `yaml:"timeout_seconds"`
}

// Kind names what a step does.
func (s *Step) Kind() string {
	switch {
	case s.LLM != nil:
		return "llm"
	case s.Group != nil:
		return "group"
	default:
		return "expression"
	}
}

// ModelsOf lists the models an llm step fans out over.
func (s *Step) ModelsOf() []string { return s.models }

// Problem is one thing wrong with a pipeline file, at a line.
type Problem struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Msg  string `json:"message"`
}

func (p Problem) Error() string {
	if p.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg)
	}
	return fmt.Sprintf("%s: %s", p.File, p.Msg)
}

// Problems is every problem of a file, in line order.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}

var reName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,62}$`)

// Load reads and validates a pipeline file. Every problem is reported, each
// with the file and line it concerns, as Problems.
func Load(path string) (*Definition, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading pipeline %s: %w", path, err)
	}
	return Parse(data, path)
}

// Parse is Load on bytes; file names the definition in messages and is the
// base of relative item paths.
func Parse(data []byte, file string) (*Definition, error) {
	v := &checker{file: file}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, Problems{v.yamlProblem(err)}
	}
	d := &Definition{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(d); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			for _, msg := range te.Errors {
				v.problems = append(v.problems, v.yamlProblem(errors.New(msg)))
			}
			return nil, v.problems
		}
		return nil, Problems{v.yamlProblem(err)}
	}
	d.File, d.Dir, d.Source = file, filepath.Dir(file), data
	v.check(d, &root)
	for _, s := range d.order {
		s.deps = d.needsOf(s)
	}
	if len(v.problems) > 0 {
		sort.SliceStable(v.problems, func(i, j int) bool { return v.problems[i].Line < v.problems[j].Line })
		return nil, v.problems
	}
	d.compilePrompts()
	col := 0
	for _, s := range d.order {
		if s.LLM != nil {
			s.pairCol = col
			col += len(s.models)
		}
	}
	return d, nil
}

type checker struct {
	file     string
	problems Problems
}

var reYAMLLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

func (v *checker) yamlProblem(err error) Problem {
	msg := err.Error()
	if m := reYAMLLine.FindStringSubmatch(msg); m != nil {
		var line int
		fmt.Sscan(m[1], &line)
		return Problem{File: v.file, Line: line, Msg: m[2]}
	}
	return Problem{File: v.file, Msg: strings.TrimPrefix(msg, "yaml: ")}
}

func (v *checker) add(line int, format string, args ...any) {
	v.problems = append(v.problems, Problem{File: v.file, Line: line, Msg: fmt.Sprintf(format, args...)})
}

// node finds the value node at a path of mapping keys and sequence
// indexes (as ints); nil when absent.
func node(n *yaml.Node, path ...any) *yaml.Node {
	if n != nil && n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	for _, p := range path {
		if n == nil {
			return nil
		}
		switch k := p.(type) {
		case string:
			if n.Kind != yaml.MappingNode {
				return nil
			}
			var next *yaml.Node
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == k {
					next = n.Content[i+1]
				}
			}
			n = next
		case int:
			if n.Kind != yaml.SequenceNode || k >= len(n.Content) {
				return nil
			}
			n = n.Content[k]
		}
	}
	return n
}

func lineOf(n *yaml.Node, fallback int) int {
	if n == nil {
		return fallback
	}
	return n.Line
}

func (v *checker) check(d *Definition, root *yaml.Node) {
	if !reName.MatchString(d.Name) {
		v.add(lineOf(node(root, "name"), 1), "name %q: give the pipeline a name of letters, digits and _ (it names the run directory)", d.Name)
	}
	v.checkItems(d, root)
	for name, models := range d.Classes {
		if name != "cheap" && name != "expensive" {
			v.add(lineOf(node(root, "classes", name), 1), "classes.%s: a model class is cheap or expensive", name)
		}
		if len(models) == 0 {
			v.add(lineOf(node(root, "classes", name), 1), "classes.%s: list at least one model", name)
		}
	}
	if d.Limits.MaxCost < 0 || d.Limits.DailyRequests < 0 || d.Limits.MaxPrepared < 0 || d.Limits.MaxOutputTokens < 0 || d.Limits.MaxItems < 0 {
		v.add(lineOf(node(root, "limits"), 1), "limits: a limit is zero (none) or positive")
	}
	if d.Limits.MaxOutputTokens == 0 {
		d.Limits.MaxOutputTokens = 1000
	}
	if len(d.Steps) == 0 {
		v.add(lineOf(node(root, "steps"), 1), "steps: a pipeline needs at least one step")
	}
	d.byName = map[string]*Step{}
	d.aliases = map[string]bool{}
	var all []*Step
	var walk func(steps []*Step, path []any, parent *Step)
	walk = func(steps []*Step, path []any, parent *Step) {
		for i, s := range steps {
			if s == nil {
				v.add(lineOf(node(root, append(path, i)...), 1), "step %d is empty", i+1)
				continue
			}
			sp := append(append([]any(nil), path...), i)
			s.Line = lineOf(node(root, sp...), 1)
			if s.Repeat != nil {
				if s.LLM != nil || s.Expression != "" || s.Group != nil || s.When != "" {
					v.add(s.Line, "step %s: a repeat has only repeat: (and needs:)", s.Name)
					continue
				}
				if parent != nil {
					v.add(s.Line, "step %s: a repeat inside a group is not supported", s.Name)
					continue
				}
				rounds, err := unroll(s)
				if err != nil {
					v.add(lineOf(node(root, append(sp, "repeat")...), s.Line), "%v", err)
					continue
				}
				for _, b := range s.Repeat.Steps {
					d.aliases[b.Name] = true
				}
				s.Group = rounds
			}
			if !reName.MatchString(s.Name) {
				v.add(lineOf(node(root, append(sp, "name")...), s.Line), "step name %q: use letters, digits and _", s.Name)
			} else if _, dup := d.byName[s.Name]; dup {
				v.add(lineOf(node(root, append(sp, "name")...), s.Line), "step %s: the name is used twice", s.Name)
			} else {
				d.byName[s.Name] = s
			}
			if parent != nil {
				s.parent = parent.Name
			}
			kinds := 0
			if s.LLM != nil {
				kinds++
			}
			if s.Expression != "" {
				kinds++
			}
			if s.Group != nil {
				kinds++
			}
			if kinds != 1 {
				v.add(s.Line, "step %s: give exactly one of llm, expression, group", s.Name)
				continue
			}
			all = append(all, s)
			if s.Group != nil {
				if parent != nil {
					v.add(s.Line, "step %s: a group inside a group is not supported; list its steps in the outer group", s.Name)
				}
				if len(s.Group) == 0 {
					v.add(s.Line, "step %s: an empty group", s.Name)
				}
				walk(s.Group, append(sp, "group"), s)
			}
		}
	}
	walk(d.Steps, []any{"steps"}, nil)
	before := len(v.problems)
	// Steps of a group inherit its needs; a step needing a group needs
	// all of its steps.
	for _, s := range all {
		for j, n := range s.Needs {
			line := lineOf(node(root, append(stepPath(d, s, root), "needs", j)...), s.Line)
			dep, ok := d.byName[n]
			switch {
			case !ok:
				v.add(line, "step %s needs %q, which is not a step (steps: %s)", s.Name, n, strings.Join(names(all), ", "))
			case dep == s:
				v.add(line, "step %s needs itself", s.Name)
			case dep.parent != "" && dep.parent == s.parent && s.base == "":
				v.add(line, "step %s needs %s of the same group: steps of a group run in parallel; move %s before the group", s.Name, n, n)
			}
		}
	}
	if len(v.problems) == before {
		order, cycle := topo(d, all)
		if cycle != nil {
			v.add(cycle.Line, "step %s: its needs form a cycle", cycle.Name)
		}
		d.order = order
	}
	for _, s := range all {
		sp := stepPath(d, s, root)
		switch s.Kind() {
		case "expression":
			ce, err := compileExpr(s.Expression, d, s, false)
			if err != nil {
				v.add(lineOf(node(root, append(sp, "expression")...), s.Line), "step %s: expression: %v", s.Name, err)
			}
			s.expr = ce
		case "llm":
			v.checkLLM(d, s, root, sp)
		}
		if s.When != "" {
			if s.Group != nil {
				v.add(lineOf(node(root, append(sp, "when")...), s.Line), "step %s: when: on a group's steps, not on the group", s.Name)
				continue
			}
			ce, err := compileExpr(s.When, d, s, false)
			if err != nil {
				v.add(lineOf(node(root, append(sp, "when")...), s.Line), "step %s: when: %v", s.Name, err)
			}
			s.when = ce
		}
	}
}

// stepPath is the YAML path of a step.
func stepPath(d *Definition, s *Step, root *yaml.Node) []any {
	for i, t := range d.Steps {
		if t == s {
			return []any{"steps", i}
		}
		for j, u := range t.Group {
			if u == s {
				return []any{"steps", i, "group", j}
			}
		}
	}
	return nil
}

func (v *checker) checkLLM(d *Definition, s *Step, root *yaml.Node, sp []any) {
	l := s.LLM
	lineAt := func(field string) int {
		return lineOf(node(root, append(append([]any(nil), sp...), "llm", field)...), s.Line)
	}
	choices := 0
	if len(l.Models) > 0 {
		choices++
		s.models = l.Models
	}
	if l.Model != "" {
		choices++
		s.models = []string{l.Model}
	}
	if l.Class != "" {
		choices++
		ms, ok := d.Classes[l.Class]
		if !ok {
			v.add(lineAt("class"), "step %s: class %q is not defined under classes (cheap, expensive)", s.Name, l.Class)
		}
		s.models = ms
		s.class = l.Class
	}
	if choices > 1 {
		v.add(s.Line, "step %s: give one of model, models, class", s.Name)
	}
	if choices == 0 {
		if len(d.Models) == 0 {
			v.add(s.Line, "step %s: no model: give llm.model, llm.models, llm.class or the pipeline's models", s.Name)
		}
		s.models = d.Models
	}
	seen := map[string]bool{}
	for _, m := range s.models {
		if seen[m] {
			v.add(lineAt("models"), "step %s: model %s is listed twice", s.Name, m)
		}
		seen[m] = true
	}
	if l.Attempts == 0 {
		l.Attempts = 3
	}
	if l.Attempts < 0 || l.Attempts > 20 {
		v.add(lineAt("attempts"), "step %s: attempts must be 1..20", s.Name)
	}
	if l.TimeoutSeconds < 0 || (l.TimeoutSeconds > 0 && l.TimeoutSeconds < 0.001) || l.TimeoutSeconds > 7*24*3600 {
		v.add(lineAt("timeout_seconds"), "step %s: timeout_seconds must be from 0.001 to 604800 (a week), or 0 for the config's request timeout", s.Name)
	}
	if strings.TrimSpace(l.Prompt) == "" {
		v.add(lineAt("prompt"), "step %s: the prompt is empty", s.Name)
	} else {
		t, err := parseTemplate(s.Name, l.Prompt)
		line := lineAt("prompt")
		if node(root, append(append([]any(nil), sp...), "llm", "prompt")...) != nil {
			if pn := node(root, append(append([]any(nil), sp...), "llm", "prompt")...); pn.Style == yaml.LiteralStyle || pn.Style == yaml.FoldedStyle {
				line++ // a block scalar starts on the next line
			}
		}
		if err != nil {
			tl, msg := templateErrLine(err)
			v.add(line+max(tl-1, 0), "step %s: prompt: %s", s.Name, msg)
		} else {
			s.tmpl = t
			s.promptSize = len(l.Prompt) + 64
			for _, ref := range stepRefs(l.Prompt) {
				if err := checkRef(d, s, ref); err != nil {
					v.add(line+ref.line, "step %s: prompt: %v", s.Name, err)
				}
			}
		}
	}
	if l.Schema != nil {
		if err := checkSchema(l.Schema, "schema"); err != nil {
			v.add(lineAt("schema"), "step %s: %v", s.Name, err)
		} else if b, err := json.Marshal(l.Schema); err != nil {
			v.add(lineAt("schema"), "step %s: schema: %v", s.Name, err)
		} else {
			// Encoded once: every prompt of the step ends with it.
			s.promptTail = "\n\n" + SchemaMarker + string(b)
		}
	}
	for i, r := range l.Rules {
		ce, err := compileExpr(r, d, s, true)
		if err != nil {
			v.add(lineOf(node(root, append(append([]any(nil), sp...), "llm", "rules", i)...), s.Line), "step %s: rule %d: %v", s.Name, i+1, err)
			continue
		}
		s.rules = append(s.rules, ce)
	}
}

// checkRef: a prompt may use only the steps its step needs (directly or
// through them), else the value would not exist yet.
func checkRef(d *Definition, s *Step, ref stepRef) error {
	dep, ok := d.byName[ref.name]
	if !ok && d.aliases[ref.name] {
		return nil // a repeated step: its latest round, if any has run
	}
	if !ok {
		return fmt.Errorf("{{.steps.%s}} is not a step", ref.name)
	}
	if !d.dependsOn(s, dep) {
		return fmt.Errorf("{{.steps.%s}}: add %s to the step's needs (else it may not have run yet)", ref.name, ref.name)
	}
	return nil
}

// needsOf lists a step's direct dependencies, with a group's needs for
// its steps and a group's steps for a step needing the group.
func (d *Definition) needsOf(s *Step) []*Step {
	var out []*Step
	add := func(names []string) {
		for _, n := range names {
			dep := d.byName[n]
			if dep == nil {
				continue
			}
			if dep.Group != nil {
				out = append(out, dep.Group...)
			} else {
				out = append(out, dep)
			}
		}
	}
	add(s.Needs)
	if s.parent != "" {
		add(d.byName[s.parent].Needs)
	}
	return out
}

func (d *Definition) dependsOn(s, dep *Step) bool {
	seen := map[*Step]bool{}
	var visit func(x *Step) bool
	visit = func(x *Step) bool {
		for _, n := range d.needsOf(x) {
			if n == dep || (dep.Group != nil && n.parent == dep.Name) {
				return true
			}
			if !seen[n] {
				seen[n] = true
				if visit(n) {
					return true
				}
			}
		}
		return false
	}
	return visit(s)
}

// topo orders the runnable steps (groups left out: their steps stand for
// them) so each comes after its needs; a cycle returns a step on it.
func topo(d *Definition, all []*Step) ([]*Step, *Step) {
	state := map[*Step]int{}
	var out []*Step
	var cyc *Step
	var visit func(s *Step) bool
	visit = func(s *Step) bool {
		switch state[s] {
		case 1:
			cyc = s
			return false
		case 2:
			return true
		}
		state[s] = 1
		for _, n := range d.needsOf(s) {
			if !visit(n) {
				return false
			}
		}
		state[s] = 2
		if s.Group == nil {
			out = append(out, s)
		}
		return true
	}
	for _, s := range all {
		if s.Group != nil {
			continue
		}
		if !visit(s) {
			return nil, cyc
		}
	}
	return out, nil
}

func names(steps []*Step) []string {
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = s.Name
	}
	return out
}

// Steps lists the runnable steps (group members instead of groups), each
// after its needs.
func (d *Definition) Order() []*Step { return d.order }

// Step returns the named step.
func (d *Definition) Step(name string) *Step { return d.byName[name] }

// LLMModels lists every model any llm step uses, sorted.
func (d *Definition) LLMModels() []string {
	seen := map[string]bool{}
	for _, s := range d.order {
		for _, m := range s.models {
			seen[m] = true
		}
	}
	out := make([]string, 0, len(seen))
	for m := range seen {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// CheckModels reports the llm steps' models that are not among the
// backends, each at its step's line.
func (d *Definition) CheckModels(backends []string) error {
	known := map[string]bool{}
	for _, b := range backends {
		known[b] = true
	}
	var ps Problems
	for _, s := range d.order {
		for _, m := range s.models {
			if !known[m] {
				ps = append(ps, Problem{File: d.File, Line: s.Line, Msg: fmt.Sprintf("step %s: model %q is not an enabled backend of the fano config (backends: %s)", s.Name, m, strings.Join(backends, ", "))})
			}
		}
	}
	if len(ps) > 0 {
		return ps
	}
	return nil
}
