package config

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// The older config layout has three keys fano's schema does not have.
// Load refuses them with a message saying why and what they become;
// Migrate converts a file that has them into fano's schema.
const (
	specQuotas        = "llm.quotas"
	specCheckpointDir = "orchestrator.state.checkpoint_dir"
	specWALDir        = "orchestrator.state.wal_dir"
)

// whyNoStateDirs is why the older layout's two state directories have no
// equivalent: one bbolt file holds both.
const whyNoStateDirs = "fano keeps its WAL and its checkpoints together in one file, <data_dir>/fano.db; set data_dir (default ./fano-data) to choose where"

// specKeyMessage is Load's message for a key of the older layout, or ""
// when path is not one.
func specKeyMessage(path string) string {
	switch path {
	case specQuotas:
		return "fano keeps each backend's quota on the backend (backends.NAME.hourly_limit, " +
			"backends.NAME.deep_mode_daily_limit), not in a quota table: `fano config migrate FILE` converts it"
	case specCheckpointDir, specWALDir:
		return whyNoStateDirs + ": `fano config migrate FILE` drops this key"
	}
	return ""
}

// quotaFields are the keys of one backend's entry in llm.quotas.
var quotaFields = []string{"hourly_limit", "deep_mode_daily_limit"}

// Change is one key Migrate converted or dropped.
type Change struct {
	Line int    // line of the key in the old file
	From string // its YAML path in the old file
	To   string // its path in the new file; "" when dropped
	Why  string
}

func (c Change) String() string {
	if c.To == "" {
		return fmt.Sprintf("line %d: dropped %s: %s", c.Line, c.From, c.Why)
	}
	s := fmt.Sprintf("line %d: %s -> %s", c.Line, c.From, c.To)
	if c.Why != "" {
		s += " (" + c.Why + ")"
	}
	return s
}

// Migration is a config file converted to fano's schema.
type Migration struct {
	YAML    []byte   // the new file; comments of the keys kept are kept
	Changes []Change // in file order; none: the file needed no change
	Config  *Config  // the new file, loaded and validated
}

// Migrate converts a config file in the older layout into fano's schema: llm.quotas becomes the quotas of backends (a backend
// the file does not define becomes a browser backend with the site profile
// of its name), and the state directories are dropped. The result must
// load: every remaining problem is returned as Errors naming the line of
// the old file (name is used in messages).
func Migrate(data []byte, name string) (*Migration, error) {
	src := newSource(name)
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, Errors{src.syntaxError(err)}
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return nil, Errors{{File: name, Line: root.Line, Msg: "the config must be a YAML mapping of settings (key: value)"}}
	}
	doc := root.Content[0]
	m := &migrator{src: src}
	m.dropStateDirs(doc)
	m.convertQuotas(doc)
	if len(m.errs) > 0 {
		return nil, m.errs
	}
	slices.SortStableFunc(m.changes, func(a, b Change) int { return a.Line - b.Line })

	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&root); err != nil {
		return nil, fmt.Errorf("migrate %s: encoding the new file: %w", name, err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("migrate %s: encoding the new file: %w", name, err)
	}
	out := buf.Bytes()
	cfg, err := Parse(out, name)
	if err != nil {
		return nil, oldLines(err, &root, name)
	}
	return &Migration{YAML: out, Changes: m.changes, Config: cfg}, nil
}

// oldLines re-points the errors found in the new file at the lines of the
// old one: the converted tree keeps the old nodes' lines, and the nodes
// Migrate made carry the line of the key they came from.
func oldLines(err error, root *yaml.Node, name string) error {
	errs, ok := err.(Errors)
	if !ok {
		return err
	}
	idx := newSource(name)
	idx.index(root)
	for _, fe := range errs {
		if fe.Path != "" {
			fe.Line = idx.line(fe.Path)
		}
	}
	return errs
}

type migrator struct {
	src     *source
	changes []Change
	errs    Errors
}

func (m *migrator) fail(line int, path, format string, args ...any) {
	m.errs = append(m.errs, &FieldError{File: m.src.file, Path: path, Line: line, Msg: fmt.Sprintf(format, args...)})
}

// mapping returns the value of key in the mapping n, or nil.
func mapping(n *yaml.Node, key string) (k, v *yaml.Node) {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i], n.Content[i+1]
		}
	}
	return nil, nil
}

// remove deletes key from the mapping n.
func remove(n *yaml.Node, key string) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			n.Content = slices.Delete(n.Content, i, i+2)
			return
		}
	}
}

func scalar(value string, line int) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value, Line: line}
}

func (m *migrator) dropStateDirs(doc *yaml.Node) {
	_, orch := mapping(doc, "orchestrator")
	stateKey, state := mapping(orch, "state")
	if state == nil {
		return
	}
	for _, key := range []string{"checkpoint_dir", "wal_dir"} {
		if k, _ := mapping(state, key); k != nil {
			m.changes = append(m.changes, Change{Line: k.Line, From: "orchestrator.state." + key, Why: whyNoStateDirs})
			remove(state, key)
		}
	}
	if len(state.Content) == 0 {
		remove(orch, stateKey.Value)
	}
}

func (m *migrator) convertQuotas(doc *yaml.Node) {
	llmKey, llm := mapping(doc, "llm")
	qKey, quotas := mapping(llm, "quotas")
	if qKey == nil {
		return
	}
	if quotas.Kind != yaml.MappingNode {
		m.fail(qKey.Line, specQuotas, "must map backend names to their quotas (hourly_limit, deep_mode_daily_limit)")
		return
	}
	bKey, backends := mapping(doc, "backends")
	if bKey == nil {
		bKey = scalar("backends", qKey.Line)
		backends = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: qKey.Line}
		doc.Content = append(doc.Content, bKey, backends)
	} else if backends.Kind != yaml.MappingNode {
		m.fail(bKey.Line, "backends", "must be a mapping of backend names to their settings")
		return
	}
	for i := 0; i+1 < len(quotas.Content); i += 2 {
		nameNode, q := quotas.Content[i], quotas.Content[i+1]
		name := nameNode.Value
		from := specQuotas + "." + name
		if q.Kind != yaml.MappingNode {
			m.fail(nameNode.Line, from, "must be a mapping with hourly_limit and deep_mode_daily_limit")
			continue
		}
		_, b := mapping(backends, name)
		if b == nil {
			b = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: nameNode.Line}
			b.Content = append(b.Content, scalar("type", nameNode.Line), scalar(TypeBrowser, nameNode.Line))
			backends.Content = append(backends.Content, scalar(name, nameNode.Line), b)
			m.changes = append(m.changes, Change{Line: nameNode.Line, From: from, To: "backends." + name,
				Why: fmt.Sprintf("a new browser backend with site profile %q (built in: chatgpt, gemini, claude); change its type for an API or the simulator", name)})
		} else if b.Kind != yaml.MappingNode {
			m.fail(nameNode.Line, "backends."+name, "must be a mapping of settings")
			continue
		}
		for j := 0; j+1 < len(q.Content); j += 2 {
			fk, fv := q.Content[j], q.Content[j+1]
			path := from + "." + fk.Value
			if !slices.Contains(quotaFields, fk.Value) {
				m.fail(fk.Line, path, "unknown quota field %q (known fields: %s)", fk.Value, strings.Join(quotaFields, ", "))
				continue
			}
			to := "backends." + name + "." + fk.Value
			if k, _ := mapping(b, fk.Value); k != nil {
				m.changes = append(m.changes, Change{Line: fk.Line, From: path,
					Why: fmt.Sprintf("%s is already set (line %d) and kept", to, k.Line)})
				continue
			}
			b.Content = append(b.Content, fk, fv)
			m.changes = append(m.changes, Change{Line: fk.Line, From: path, To: to})
		}
	}
	remove(llm, qKey.Value)
	if len(llm.Content) == 0 {
		remove(doc, llmKey.Value)
	}
}
