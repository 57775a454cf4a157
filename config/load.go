package config

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

//go:embed examples/demo.yaml
var demoYAML []byte

//go:embed examples/full.yaml
var fullYAML []byte

// DemoName is the file name used in messages about the built-in config.
const DemoName = "built-in demo.yaml"

// DemoYAML returns the text of the built-in demo config (examples/demo.yaml).
func DemoYAML() []byte { return slices.Clone(demoYAML) }

// FullYAML returns the text of examples/full.yaml, which shows every field.
func FullYAML() []byte { return slices.Clone(fullYAML) }

// Default returns the built-in demo config: simulated backends only, so
// fano runs offline with no config file.
func Default() *Config {
	c, err := Parse(demoYAML, DemoName)
	if err != nil {
		panic("config: built-in demo config is invalid: " + err.Error())
	}
	return c
}

// Load reads, strictly decodes, fills defaults and validates a config
// file. Every problem is reported at once as Errors.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	return Parse(data, path)
}

// Parse is Load on bytes; name is used in messages.
func Parse(data []byte, name string) (*Config, error) {
	src := newSource(name)
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, Errors{src.syntaxError(err)}
	}
	src.index(&root)

	c := New()
	c.src = src
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			return nil, src.typeErrors(te)
		}
		return nil, Errors{src.syntaxError(err)}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, Errors{{File: name, Line: extra.Line, Msg: "a config file holds one YAML document; remove the extra '---' document"}}
	}
	if err := c.decodeBackends(); err != nil {
		return nil, err
	}
	c.fillDerived()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// decodeBackends decodes each backend again onto the defaults of its type,
// so fields the file leaves out keep their defaults. (Map values are
// decoded from zero by yaml.v3; strictness was checked by the first pass.)
func (c *Config) decodeBackends() error {
	e, ok := c.src.entries["backends"]
	if !ok || e.val.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(e.val.Content); i += 2 {
		name, node := e.val.Content[i].Value, e.val.Content[i+1]
		if node.ShortTag() == "!!null" {
			c.Backends[name] = nil // reported by Validate
			continue
		}
		typ := ""
		if b := c.Backends[name]; b != nil {
			typ = b.Type
		}
		b := NewBackend(typ)
		if err := node.Decode(b); err != nil {
			var te *yaml.TypeError
			if errors.As(err, &te) {
				return c.src.typeErrors(te)
			}
			return Errors{c.src.fieldError("backends."+name, err.Error())}
		}
		c.Backends[name] = b
	}
	return nil
}

// fillDerived fills defaults that depend on other settings or on whether
// the file mentions a field at all.
func (c *Config) fillDerived() {
	for name, b := range c.Backends {
		if b == nil {
			continue
		}
		def := NewBackend(b.Type)
		switch b.Type {
		case TypeBrowser:
			if b.Browser == nil {
				b.Browser = def.Browser
			}
			if b.Browser.Profile == "" {
				b.Browser.Profile = name
			}
		case TypeAPI:
			if b.API == nil {
				b.API = def.API
			}
		case TypeSim:
			if b.Sim == nil {
				b.Sim = def.Sim
			}
			if b.Sim.Style == "" {
				b.Sim.Style = "api"
				if slices.Contains(SimStyles, name) {
					b.Sim.Style = name
				}
			}
			if b.Sim.HourlyLimit == 0 && b.HourlyLimit > 0 {
				b.Sim.HourlyLimit = b.HourlyLimit
			}
			if b.Sim.DeepModeDailyLimit == 0 && b.DeepModeDailyLimit > 0 {
				b.Sim.DeepModeDailyLimit = b.DeepModeDailyLimit
			}
		}
	}
	enabled := c.EnabledBackends()
	if !c.present("explorer.review_panel_size") && len(enabled) > 0 {
		c.Explorer.ReviewPanelSize = min(c.Explorer.ReviewPanelSize, len(enabled))
	}
	if !c.present("explorer.consensus.min_bless") && c.Explorer.ReviewPanelSize > 0 {
		c.Explorer.Consensus.MinBless = min(c.Explorer.Consensus.MinBless, c.Explorer.ReviewPanelSize)
	}
	if !c.present("orchestrator.consultation.llm") && len(enabled) > 0 &&
		!slices.Contains(enabled, c.Orchestrator.Consultation.LLM) {
		c.Orchestrator.Consultation.LLM = enabled[0]
	}
}

// present reports whether the loaded file sets path.
func (c *Config) present(path string) bool {
	if c.src == nil {
		return false
	}
	_, ok := c.src.entries[path]
	return ok
}

// source remembers where a config came from and the line of each field.
type source struct {
	file    string
	entries map[string]entry // YAML path -> its nodes
	keys    map[int][]loc    // key nodes by line
	vals    map[int][]loc    // value nodes by line
}

type entry struct {
	key *yaml.Node // nil for sequence items and the root
	val *yaml.Node
}

type loc struct {
	path string
	node *yaml.Node
}

func newSource(file string) *source {
	return &source{
		file:    file,
		entries: map[string]entry{},
		keys:    map[int][]loc{},
		vals:    map[int][]loc{},
	}
}

func joinPath(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func (s *source) index(root *yaml.Node) {
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	if n.Kind != 0 {
		s.vals[n.Line] = append(s.vals[n.Line], loc{"", n})
	}
	s.walk("", n)
}

func (s *source) walk(path string, n *yaml.Node) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := joinPath(path, k.Value)
			if _, dup := s.entries[p]; !dup {
				s.entries[p] = entry{key: k, val: v}
			}
			s.keys[k.Line] = append(s.keys[k.Line], loc{p, k})
			s.vals[v.Line] = append(s.vals[v.Line], loc{p, v})
			s.walk(p, v)
		}
	case yaml.SequenceNode:
		for i, v := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			s.entries[p] = entry{val: v}
			s.vals[v.Line] = append(s.vals[v.Line], loc{p, v})
			s.walk(p, v)
		}
	}
}

// line returns the line of path, or of its nearest ancestor in the file,
// or 0.
func (s *source) line(path string) int {
	if s == nil {
		return 0
	}
	for {
		if e, ok := s.entries[path]; ok {
			if e.key != nil {
				return e.key.Line
			}
			return e.val.Line
		}
		i := strings.LastIndexAny(path, ".[")
		if i <= 0 {
			return 0
		}
		path = path[:i]
	}
}

func (s *source) fieldError(path, msg string) *FieldError {
	return &FieldError{File: s.file, Path: path, Line: s.line(path), Msg: msg}
}

var (
	reLine    = regexp.MustCompile(`(?s)^(?:yaml: )?line (\d+): (.*)$`)
	reUnknown = regexp.MustCompile(`^field (.+) not found in type (\S+)$`)
	reType    = regexp.MustCompile("(?s)^cannot unmarshal (\\S+?)(?: `.*`)? into (.+)$")
	reDup     = regexp.MustCompile(`^mapping key "(.*)" already defined at line (\d+)$`)
)

func (s *source) syntaxError(err error) *FieldError {
	msg := err.Error()
	fe := &FieldError{File: s.file}
	if m := reLine.FindStringSubmatch(msg); m != nil {
		fe.Line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	fe.Msg = "invalid YAML: " + strings.TrimPrefix(msg, "yaml: ")
	return fe
}

// typeErrors turns yaml.v3's "line N: ..." messages into FieldErrors that
// name the field. Values are never echoed: they could be secrets.
func (s *source) typeErrors(te *yaml.TypeError) Errors {
	var errs Errors
	for _, raw := range te.Errors {
		fe := &FieldError{File: s.file, Msg: raw}
		m := reLine.FindStringSubmatch(raw)
		if m == nil {
			errs = append(errs, fe)
			continue
		}
		fe.Line, _ = strconv.Atoi(m[1])
		rest := m[2]
		fe.Msg = rest
		if u := reUnknown.FindStringSubmatch(rest); u != nil {
			fe.Path = s.findKey(fe.Line, u[1])
			fe.Msg = fmt.Sprintf("unknown field %q", u[1])
			if msg := specKeyMessage(fe.Path); msg != "" {
				fe.Msg = msg
			} else if known := knownFields(u[2]); len(known) > 0 {
				fe.Msg += " (known fields: " + strings.Join(known, ", ") + ")"
			}
		} else if t := reType.FindStringSubmatch(rest); t != nil {
			fe.Path = s.findValue(fe.Line, t[1])
			fe.Msg = fmt.Sprintf("must be %s, not %s", describeGoType(t[2]), describeTag(t[1]))
			if fe.Path == "" {
				fe.Msg = "the config must be a YAML mapping of settings (key: value), not " + describeTag(t[1])
			}
		} else if d := reDup.FindStringSubmatch(rest); d != nil {
			fe.Path = s.findKey(fe.Line, d[1])
			fe.Msg = fmt.Sprintf("duplicate key %q (first set at line %s)", d[1], d[2])
		}
		errs = append(errs, fe)
	}
	return errs
}

func (s *source) findKey(line int, name string) string {
	for _, l := range s.keys[line] {
		if l.node.Value == name {
			return l.path
		}
	}
	return ""
}

func (s *source) findValue(line int, tag string) string {
	for _, l := range s.vals[line] {
		if l.node.ShortTag() == tag {
			return l.path
		}
	}
	if ls := s.vals[line]; len(ls) > 0 {
		return ls[0].path
	}
	return ""
}

func describeTag(tag string) string {
	switch tag {
	case "!!str":
		return "a string"
	case "!!int":
		return "an integer"
	case "!!float":
		return "a number with a fraction"
	case "!!bool":
		return "true/false"
	case "!!map":
		return "a mapping"
	case "!!seq":
		return "a list"
	case "!!null":
		return "empty"
	case "!!timestamp":
		return "a timestamp"
	}
	return "a value tagged " + tag
}

func describeGoType(t string) string {
	switch {
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "an integer"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case t == "bool":
		return "true or false"
	case t == "string":
		return "a string"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["), strings.HasPrefix(t, "config."), strings.HasPrefix(t, "*config."):
		return "a mapping"
	}
	return t
}

// knownFields lists the YAML keys of the config struct type named like
// yaml.v3 names it ("config.Backend").
func knownFields(typeName string) []string {
	var found []string
	seen := map[reflect.Type]bool{}
	var visit func(t reflect.Type)
	visit = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		var names []string
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if tag != "" && tag != "-" {
				names = append(names, tag)
			}
			visit(f.Type)
		}
		if t.String() == typeName {
			found = names
		}
	}
	visit(reflect.TypeFor[Config]())
	return found
}
