package pipeline

import "time"

// StepProgress is one llm step and model of a run: its pairs answered
// (done), failed and pending, and while the run goes on its rate (pairs
// finished a second since the run started) and time left at that rate.
type StepProgress struct {
	Step       string  `json:"step"`
	Model      string  `json:"model"`
	Done       int     `json:"done"`
	Failed     int     `json:"failed"`
	Pending    int     `json:"pending"`
	Skipped    int     `json:"skipped,omitempty"` // items whose when: skipped it
	RatePerSec float64 `json:"rate_per_s"`
	// ETASeconds is the time left at the rate (-1: not known yet).
	ETASeconds float64 `json:"eta_s"`
}

// StepCounts counts the pairs of every llm step and model, in pipeline
// order (a step after those it needs, a group's steps in the group's
// place), models as the step lists them. It walks every pair.
func (m *Module) StepCounts() []StepProgress {
	var out []StepProgress
	for _, st := range m.def.order {
		if st.LLM == nil {
			continue
		}
		for _, model := range st.models {
			c := StepProgress{Step: st.Name, Model: model, ETASeconds: -1}
			for _, it := range m.items {
				switch _, where := m.standing(st, it, model); where {
				case pairSkipped:
					c.Skipped++
				case pairOK:
					c.Done++
				case pairFailed:
					c.Failed++
				default:
					c.Pending++
				}
			}
			out = append(out, c)
		}
	}
	return out
}

// StepOrder lists the llm steps in pipeline order.
func (m *Module) StepOrder() []string {
	var out []string
	for _, st := range m.def.order {
		if st.LLM != nil {
			out = append(out, st.Name)
		}
	}
	return out
}

// RateMeter gives step counts their rate and time left: the pairs each
// step and model finished since the meter's first look, over the time
// since then.
type RateMeter struct {
	start time.Time
	first map[[2]string]int
}

// Observe fills in the rate and ETA of counts taken at now.
func (r *RateMeter) Observe(now time.Time, counts []StepProgress) []StepProgress {
	if r.first == nil {
		r.start, r.first = now, map[[2]string]int{}
		for _, c := range counts {
			r.first[[2]string{c.Step, c.Model}] = c.Done + c.Failed
		}
	}
	el := now.Sub(r.start).Seconds()
	for i := range counts {
		c := &counts[i]
		c.ETASeconds = -1
		if el <= 0 {
			continue
		}
		c.RatePerSec = float64(c.Done+c.Failed-r.first[[2]string{c.Step, c.Model}]) / el
		switch {
		case c.Pending == 0:
			c.ETASeconds = 0
		case c.RatePerSec > 0:
			c.ETASeconds = float64(c.Pending) / c.RatePerSec
		}
	}
	return counts
}

// Where a pair of one step, item and model stands.
const (
	pairPending = iota
	pairSkipped // the step's when: skipped it for this item
	pairOK
	pairFailed
)

// standing is the pair of step st, item it and model (nil when none was
// asked yet) and where it stands: what StepCounts and Summary count.
func (m *Module) standing(st *Step, it *Item, model string) (*pair, int) {
	p := m.pairFor(st, it, model)
	switch {
	case p == nil && m.skips(st, it):
		return nil, pairSkipped
	case p != nil && p.Status() == StatusOK:
		return p, pairOK
	case p != nil && p.Status() == StatusFailed:
		return p, pairFailed
	}
	return p, pairPending
}
