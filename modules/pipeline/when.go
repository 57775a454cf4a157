package pipeline

// A step's when: is decided per item once the steps it needs are done,
// from their results: it is derived from durable facts, so a restart
// decides it the same way and nothing about it is written.

// skips says whether s is skipped for it: it has a when: that is false
// now that the steps it needs are done. Not ready yet: not decided (false).
// A when: that does not evaluate to a boolean runs the step.
func (m *Module) skips(s *Step, it *Item) bool {
	if s.when == nil || !m.ready(s, it) {
		return false
	}
	i := m.posOf(it)
	if i < 0 {
		return false
	}
	if v, ok := m.skipped[i][s]; ok {
		return v
	}
	fields, err := it.fields()
	if err != nil {
		return false // not decided: its prompt says why (renderTemplate)
	}
	skip := false
	if vals, err := m.stepValuesBefore(it, s, true); err == nil {
		v, err := s.when.eval(exprEnv(fields, it.Key, vals, nil, seededRand(m.def.Seed, it.Key, s.Name+"/when")))
		if b, isBool := v.(bool); err == nil && isBool {
			skip = !b
		}
	}
	if m.skipped == nil {
		m.skipped = map[int]map[*Step]bool{}
	}
	if m.skipped[i] == nil {
		m.skipped[i] = map[*Step]bool{}
	}
	m.skipped[i][s] = skip
	return skip
}

// forgetSkips drops item i's when: decisions: a result they read changed.
func (m *Module) forgetSkips(i int) { delete(m.skipped, i) }
