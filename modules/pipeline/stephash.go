package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"fano/pb"
)

// StepHashes is a hash per llm step of what its answers depend on: its
// prompt, schema, rules and models. A step whose hash differs between
// the definition a run directory kept and the one given again was
// changed: its stored answers were given to another question.
func (d *Definition) StepHashes() map[string]string {
	out := map[string]string{}
	for _, s := range d.order {
		if s.LLM == nil {
			continue
		}
		b, err := json.Marshal(struct {
			Prompt string         `json:"prompt"`
			Schema map[string]any `json:"schema"`
			Rules  []string       `json:"rules"`
			Models []string       `json:"models"`
		}{s.LLM.Prompt, s.LLM.Schema, s.LLM.Rules, s.models})
		if err != nil {
			b = []byte(fmt.Sprint(s.LLM.Prompt, s.LLM.Schema, s.LLM.Rules, s.models)) // not JSON-encodable: still a stable text
		}
		sum := sha256.Sum256(b)
		out[s.Name] = hex.EncodeToString(sum[:12])
	}
	return out
}

// ChangedSteps lists the llm steps of d whose hash differs from old's
// (a step old did not have is new work, not a change), and the steps of
// d that need one of them, each in pipeline order.
func ChangedSteps(old, d *Definition) (changed, affected []string) {
	was, now := old.StepHashes(), d.StepHashes()
	var ch []*Step
	for _, s := range d.order {
		if h, ok := was[s.Name]; ok && h != now[s.Name] {
			ch = append(ch, s)
			changed = append(changed, s.Name)
		}
	}
	if len(ch) == 0 {
		return nil, nil
	}
	for _, s := range d.order {
		if s.LLM == nil || slices.Contains(changed, s.Name) {
			continue
		}
		for _, c := range ch {
			if d.dependsOn(s, c) {
				affected = append(affected, s.Name)
				break
			}
		}
	}
	return changed, affected
}

// DecideRerunSteps gives every answered or failed pair of the steps, and
// of the items (by key), a new generation: the run asks them again.
func (m *Module) DecideRerunSteps(steps, items []string) ([]*pb.ModuleEvent, error) {
	want := map[string]bool{}
	for _, s := range steps {
		if st := m.def.Step(s); st == nil || st.LLM == nil {
			return nil, fmt.Errorf("pipeline %s: no llm step %q", m.def.Name, s)
		}
		want[s] = true
	}
	wantItem := make(map[string]bool, len(items))
	for _, k := range items {
		wantItem[k] = true
	}
	var keys []string
	m.eachPair(func(id pairID, p *pair) {
		if (want[id.step] || wantItem[id.item]) && p.status != statusNone {
			keys = append(keys, id.key())
		}
	})
	if len(keys) == 0 {
		return nil, nil
	}
	sort.Strings(keys)
	data, err := encodeRetry(keys)
	if err != nil {
		return nil, fmt.Errorf("pipeline: encode rerun: %w", err)
	}
	return []*pb.ModuleEvent{{Type: "rerun", Data: data}}, nil
}

// applyRerun starts the pairs over, their cost kept (it was spent).
func (m *Module) applyRerun(e *pb.ModuleEvent, changed func(pairID)) error {
	keys, err := decodeRetry(e.Data)
	if err != nil {
		return fmt.Errorf("pipeline: rerun: %w", err)
	}
	for _, k := range keys {
		if p := m.pairAt(k); p != nil && p.status != statusNone {
			p.status, p.Output, p.Attempts, p.notes = statusNone, "", 0, nil
			delete(m.vals, p)
			p.Gen++
			changed(pairIDOf(k))
		}
	}
	m.priced = pricedTask{}
	m.low, m.scan, m.open, m.stopped = 0, 0, 0, ""
	return nil
}
