package pipeline

// RunWatch decides, tick by tick, when `fano pipeline run` is over: when
// the system has been idle for a few ticks in a row. Idle with work left
// that only the daily request budget holds back is not the end: the run
// waits for the next day's budget and goes on, unless NoWait asks it to
// exit then (non-zero, so a script sees the work is not done).
type RunWatch struct {
	NoWait bool
	idle   int // idle ticks in a row
}

// idleTicksToEnd: a run is idle for this many ticks in a row before it
// ends (a task can be between two actors at one tick).
const idleTicksToEnd = 3

// RunVerdict is what a run does after a tick.
type RunVerdict int

const (
	RunGoing      RunVerdict = iota // work is under way
	RunWaiting                      // idle, waiting for the next day's budget
	RunFinished                     // idle with nothing left it could do
	RunBudgetExit                   // idle, only the budget holds work back, and NoWait
)

// Observe takes one tick's look: is the system idle, and is the module
// waiting for the daily budget (Module.Waiting).
func (w *RunWatch) Observe(idle, waitingForBudget bool) RunVerdict {
	if !idle {
		w.idle = 0
		return RunGoing
	}
	w.idle++
	if w.idle < idleTicksToEnd {
		return RunGoing
	}
	switch {
	case !waitingForBudget:
		return RunFinished
	case w.NoWait:
		return RunBudgetExit
	default:
		return RunWaiting
	}
}
