package pipeline

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"fano/modules"
	"fano/pb"
)

// The pipeline's own commands (retry failed pairs, revalidate, rerun
// changed steps, finish a run): decided from the state, as events.

// DecideRetryFailed gives the failed pairs (of one step, or all) a new
// generation, so the next run asks them again and only them.
func (m *Module) DecideRetryFailed(step string) ([]*pb.ModuleEvent, error) {
	if step != "" && m.def.Step(step) == nil {
		return nil, fmt.Errorf("pipeline %s: no step %q", m.def.Name, step)
	}
	var keys []string
	m.eachPair(func(id pairID, p *pair) {
		if p.status == statusFailed && (step == "" || id.step == step) {
			keys = append(keys, id.key())
		}
	})
	if len(keys) == 0 {
		return nil, nil
	}
	sort.Strings(keys)
	data, err := encodeRetry(keys)
	if err != nil {
		return nil, fmt.Errorf("pipeline: encode retry_failed: %w", err)
	}
	return []*pb.ModuleEvent{{Type: "retry_failed", Data: data}}, nil
}

// Revalidation is what revalidate found.
type Revalidation struct {
	Checked  int      `json:"checked"`
	Promoted []string `json:"promoted"` // "step/item/model"
}

// DecideRevalidate re-checks the raw answers of failed pairs against the
// current definition's schema and rules, with no LLM call; those that
// pass now become results.
func (m *Module) DecideRevalidate() ([]*pb.ModuleEvent, Revalidation, error) {
	var rv Revalidation
	var evs []*pb.ModuleEvent
	keys := make([]string, 0)
	m.eachPair(func(id pairID, p *pair) {
		if p.status == statusFailed && p.Raw() != "" {
			keys = append(keys, id.key())
		}
	})
	sort.Strings(keys)
	for _, k := range keys {
		p := m.pairAt(k)
		stepName, itemKey, model := splitPairKey(k)
		s := m.def.Step(stepName)
		i, ok := m.itemIndex(itemKey)
		if s == nil || s.LLM == nil || !ok {
			continue
		}
		rv.Checked++
		vals, err := m.stepValues(m.items[i])
		if err != nil {
			return nil, rv, err
		}
		out, _, verr := m.def.ValidateAnswer(s, m.items[i], vals, p.Raw())
		if verr != nil {
			continue
		}
		b, err := json.Marshal(out)
		if err != nil {
			return nil, rv, err
		}
		e, err := pairEvent("revalidated", "", answerEvent{pair: pairIDOf(k), Gen: int(p.Gen), Output: b})
		if err != nil {
			return nil, rv, err
		}
		evs = append(evs, e...)
		rv.Promoted = append(rv.Promoted, stepName+"/"+itemKey+"/"+model)
	}
	return evs, rv, nil
}

// DecideCommand takes the pipeline's own commands (modules.Commander):
// retry_failed, finish_run and revalidate.
func (m *Module) DecideCommand(cmd *pb.ModuleCommand, now time.Time) ([]*pb.ModuleEvent, *pb.CommandResult, error) {
	switch c := cmd.GetCommand().(type) {
	case *pb.ModuleCommand_RetryFailed:
		evs, err := m.DecideRetryFailed(c.RetryFailed.GetStep())
		return evs, nil, err
	case *pb.ModuleCommand_FinishRun:
		m.now = now
		evs, err := m.DecideRunFinished(c.FinishRun.GetReason(), now)
		return evs, nil, err
	case *pb.ModuleCommand_RerunSteps:
		evs, err := m.DecideRerunSteps(c.RerunSteps.GetSteps(), c.RerunSteps.GetItems())
		return evs, nil, err
	case *pb.ModuleCommand_Revalidate:
		evs, rv, err := m.DecideRevalidate()
		if err != nil {
			return nil, nil, err
		}
		return evs, &pb.CommandResult{Revalidation: &pb.Revalidation{Checked: int32(rv.Checked), Promoted: rv.Promoted}}, nil
	}
	return nil, nil, modules.ErrUnsupportedCommand
}
