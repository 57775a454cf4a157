package pipeline

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"fano/pb"
)

// Stop says how a run ended: a reason from a fixed set, the exit status
// `fano pipeline run` returns for it, and what a person needs to know.
// It is recorded with the run's end (run_finished), so summary.json and
// `pipeline status --json` name it after the process is gone.
type Stop struct {
	Reason   string `json:"reason"`
	ExitCode int    `json:"exit_code"`
	Detail   string `json:"detail,omitempty"`
	At       string `json:"at,omitempty"` // RFC 3339, UTC
}

// The reasons a run stops, and their exit codes (docs/pipelines.md).
const (
	StopDone        = "done"         // every item done
	StopItemsFailed = "items_failed" // every item finished, some failed
	StopCostCap     = "cost_cap"     // max_cost reached with work left
	StopDailyBudget = "daily_budget" // only the day's request budget holds work back (--no-wait)
	StopSignal      = "stopped"      // a signal or a stop request ended it early
	StopWorkLeft    = "work_left"    // nothing more could run, and work is left

	ExitDone        = 0
	ExitItemsFailed = 3
	ExitCostCap     = 4
	ExitDailyBudget = 5
	ExitStopped     = 6
	ExitWorkLeft    = 7
)

// Loop reasons the run's loop hands to FinishRun besides a signal's name.
const (
	LoopFinished    = "finished"
	LoopIdle        = "idle"
	LoopDailyBudget = "daily_budget"
)

// decideStop names the stop of a run whose loop ended for loop.
func (m *Module) decideStop(loop string, now time.Time) Stop {
	s := Stop{At: now.UTC().Format(time.RFC3339)}
	failed := m.failedItems()
	left := len(m.items) - m.finished
	switch {
	case left == 0 && failed == 0:
		s.Reason, s.ExitCode = StopDone, ExitDone
	case left == 0:
		s.Reason, s.ExitCode = StopItemsFailed, ExitItemsFailed
		s.Detail = fmt.Sprintf("%d of %d items failed; see output/failures.jsonl (fano pipeline run --retry-failed asks them again)", failed, len(m.items))
	case loop == LoopDailyBudget:
		why, until, _ := m.Waiting()
		s.Reason, s.ExitCode = StopDailyBudget, ExitDailyBudget
		s.Detail = fmt.Sprintf("%s; %d items left; the next day's budget starts at %s", why, left, until.Format(time.RFC3339))
	case loop != LoopFinished && loop != LoopIdle:
		s.Reason, s.ExitCode = StopSignal, ExitStopped
		s.Detail = fmt.Sprintf("%s; %d items left; run again to go on", loop, left)
	case m.stopped != "" || m.capNote != "":
		s.Reason, s.ExitCode = StopCostCap, ExitCostCap
		s.Detail = m.stopped
		if m.capNote != "" {
			s.Detail = m.capNote
		}
		s.Detail += fmt.Sprintf("; %d items left; raise limits.max_cost (or --max-cost) to go on", left)
	default:
		s.Reason, s.ExitCode = StopWorkLeft, ExitWorkLeft
		s.Detail = fmt.Sprintf("nothing more could run and %d items are left (see fano status: a backend may be down or out of quota)", left)
	}
	return s
}

// failedItems counts the finished items with a failed pair.
func (m *Module) failedItems() int {
	n := 0
	for _, st := range m.itemSt {
		if st == itemFailed {
			n++
		}
	}
	return n
}

// DecideRunFinished marks the end of a run and names its stop: the
// output files are written from the state, under a WAL intent and commit.
// With no loop (a maintenance command rewrote the files) no stop is
// recorded: the latest run's stays.
func (m *Module) DecideRunFinished(loop string, now time.Time) ([]*pb.ModuleEvent, error) {
	if loop == "" {
		return []*pb.ModuleEvent{{Type: "run_finished"}}, nil
	}
	s := m.decideStop(loop, now)
	data, err := proto.Marshal(&pb.PipelineStop{Reason: s.Reason, ExitCode: int32(s.ExitCode), Detail: s.Detail, At: s.At})
	if err != nil {
		return nil, err
	}
	return []*pb.ModuleEvent{{Type: "run_finished", Data: data}}, nil
}

// applyRunFinished records a run's end (older runs' events carry no stop).
func (m *Module) applyRunFinished(e *pb.ModuleEvent) error {
	m.st.Finished++
	if len(e.Data) == 0 {
		return nil
	}
	var s pb.PipelineStop
	if err := proto.Unmarshal(e.Data, &s); err != nil {
		return fmt.Errorf("pipeline: run_finished: %w", err)
	}
	m.st.LastStop = &Stop{Reason: s.Reason, ExitCode: int(s.ExitCode), Detail: s.Detail, At: s.At}
	return nil
}

// LastStop is how the latest run ended (nil: none recorded).
func (m *Module) LastStop() *Stop { return m.st.LastStop }

// noteUnaffordable keeps why max_cost could not afford a request of
// step on model: its worst case is its prompt and max_output_tokens
// answer tokens at the model's prices.
func (m *Module) noteUnaffordable(step, model string, est float64) {
	lim := m.def.Limits.MaxCost
	left := max(lim-m.spent-m.reservedCost(), 0)
	m.capNote = fmt.Sprintf("max_cost %.4f: a request of step %s on %s may cost up to %.4f (its prompt and limits.max_output_tokens %d answer tokens at %s's prices), more than the %.4f left",
		lim, step, model, est, m.def.Limits.MaxOutputTokens, model, left)
}
