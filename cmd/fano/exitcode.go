package main

import "fmt"

// exitError is an error with its own exit status (see docs/pipelines.md,
// "Exit codes"); an empty message prints nothing.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }
func (e *exitError) ExitCode() int { return e.code }

// Exit codes of `fano pipeline` (documented in docs/pipelines.md).
const (
	exitOK          = 0 // every item done
	exitFailure     = 1 // an error: bad input, a start refused
	exitUsage       = 2 // an unknown command or flag
	exitItemsFailed = 3 // the run ended with failed items
	exitCostCap     = 4 // the cost cap stopped the run with work left
	exitBudget      = 5 // only the daily request budget holds work back (--no-wait)
	exitStopped     = 6 // stopped before the end (a signal, a stop request)
	exitWorkLeft    = 7 // nothing more could run, and work is left
)

func usageErrorf(format string, args ...any) error {
	return &exitError{code: exitUsage, msg: fmt.Sprintf(format, args...)}
}
