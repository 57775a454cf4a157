package main

import "fmt"

// exitError is an error with its own exit status; an empty message
// prints nothing. `fano pipeline run` ends with its stop's code
// (pipeline.Exit*, listed in docs/pipelines.md); any other error is 1.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }
func (e *exitError) ExitCode() int { return e.code }

// exitUsage is the status of an unknown command or a bad flag value.
const exitUsage = 2

func usageErrorf(format string, args ...any) error {
	return &exitError{code: exitUsage, msg: fmt.Sprintf(format, args...)}
}
