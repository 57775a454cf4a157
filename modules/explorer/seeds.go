package explorer

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"fano/pb"
)

//go:embed seeds.yaml
var defaultSeedsYAML []byte

// DefaultSeeds are the built-in seed questions (the demo's, about finite
// projective planes); testdata/seeds.yaml holds the same list.
func DefaultSeeds() []SeedSpec {
	s, err := ParseSeeds("built-in seeds.yaml", defaultSeedsYAML)
	if err != nil {
		panic(err) // the embedded file is checked by the tests
	}
	return s
}

// MaxSeedChars bounds a seed question.
const MaxSeedChars = 2000

// ErrSeedExists: the question is already a seed (same normalized text).
var ErrSeedExists = errors.New("seed already exists")

type seedsFile struct {
	Seeds []SeedSpec `yaml:"seeds"`
}

// LoadSeeds reads a seeds file:
//
//	seeds:
//	  - text: "Why is there no projective plane of order 6?"
//	    priority: 2
//
// An unknown field, an empty text or a priority out of range is an error
// naming the file and the line.
func LoadSeeds(path string) ([]SeedSpec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("seeds file: %w", err)
	}
	return ParseSeeds(path, data)
}

// ParseSeeds parses the seeds file format; name is used in errors.
func ParseSeeds(name string, data []byte) ([]SeedSpec, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: empty seeds file", name)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var f seedsFile
	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	if err := strict.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	// Line numbers of each seed, for errors.
	var lines []int
	if len(doc.Content) > 0 {
		root := doc.Content[0]
		for i := 0; i+1 < len(root.Content); i += 2 {
			if root.Content[i].Value == "seeds" {
				for _, n := range root.Content[i+1].Content {
					lines = append(lines, n.Line)
				}
			}
		}
	}
	if len(f.Seeds) == 0 {
		return nil, fmt.Errorf("%s: no seeds (expected a list under \"seeds:\")", name)
	}
	for i, s := range f.Seeds {
		if _, err := checkSeed(s.Text, s.Priority); err != nil {
			line := 0
			if i < len(lines) {
				line = lines[i]
			}
			return nil, fmt.Errorf("%s:%d: seeds[%d]: %w", name, line, i, err)
		}
	}
	return f.Seeds, nil
}

// checkSeed validates a seed and gives it its id.
func checkSeed(text string, priority int) (Seed, error) {
	text = strings.TrimSpace(text)
	switch {
	case text == "":
		return Seed{}, errors.New("seed text is empty")
	case utf8.RuneCountInString(text) > MaxSeedChars:
		return Seed{}, fmt.Errorf("seed text is %d characters long; the limit is %d", utf8.RuneCountInString(text), MaxSeedChars)
	case priority < 0 || priority > MaxSeedPriority:
		return Seed{}, fmt.Errorf("seed priority %d is out of range 0..%d", priority, MaxSeedPriority)
	}
	return Seed{ID: seedID(text), Text: text, Priority: priority}, nil
}

// lookupSeed finds a seed of the config or the state.
func (m *Module) lookupSeed(id string) (Seed, bool) {
	if s, ok := m.st.Seeds[id]; ok {
		return *s, true
	}
	for _, s := range m.seeds {
		if s.ID == id {
			return s, true
		}
	}
	return Seed{}, false
}

// DecideAddSeed decides the event that adds a seed question
// (modules.SeedTaker: `fano seed add`, POST /api/seeds). An empty or too
// long text, a priority out of 0..MaxSeedPriority, or a question that is
// already a seed (ErrSeedExists) is an error and nothing is decided.
func (m *Module) DecideAddSeed(text string, priority int, now time.Time) ([]*pb.ModuleEvent, error) {
	s, err := checkSeed(text, priority)
	if err != nil {
		return nil, fmt.Errorf("explorer: %w", err)
	}
	if _, ok := m.lookupSeed(s.ID); ok {
		return nil, fmt.Errorf("explorer: %w: %s", ErrSeedExists, s.ID)
	}
	return []*pb.ModuleEvent{event(evSeedAdded, "", seedAddedData{ID: s.ID, Text: s.Text, Priority: s.Priority})}, nil
}

// SeedView is a seed and how far its thread has come.
type SeedView struct {
	Seed
	Status string `json:"status"` // waiting | <thread status> | failed
	Thread string `json:"thread,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Seeds lists every seed (config and added), in exploration order:
// higher priority first, then config order, then the order added.
func (m *Module) Seeds() []SeedView {
	var all []Seed
	all = append(all, m.seeds...)
	for _, s := range m.st.Seeds {
		all = append(all, *s)
	}
	sortSeeds(all)
	out := make([]SeedView, 0, len(all))
	for _, s := range all {
		v := SeedView{Seed: s, Status: "waiting"}
		if th, ok := m.st.Threads[threadID(s.ID)]; ok {
			v.Status, v.Thread, v.Error = th.Status, th.ID, th.Error
		} else if why, failed := m.st.FailedSeeds[s.ID]; failed {
			v.Status, v.Error = ThreadFailed, why
		}
		out = append(out, v)
	}
	return out
}

func sortSeeds(s []Seed) {
	sort.Slice(s, func(a, b int) bool {
		if s[a].Priority != s[b].Priority {
			return s[a].Priority > s[b].Priority
		}
		if s[a].Order != s[b].Order {
			return s[a].Order < s[b].Order
		}
		return s[a].ID < s[b].ID
	})
}
