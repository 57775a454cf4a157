// Package testctx holds contexts for tests.
package testctx

import (
	"context"
	"sync"
)

// Deadline is a context whose deadline passes when Pass is called: a
// deadline that does not depend on how fast the machine is. Safe for
// concurrent use.
type Deadline struct {
	context.Context // Background: no values, no deadline of its own
	done            chan struct{}
	once            sync.Once
}

// NewDeadline returns a Deadline that has not passed.
func NewDeadline() *Deadline {
	return &Deadline{Context: context.Background(), done: make(chan struct{})}
}

func (d *Deadline) Done() <-chan struct{} { return d.done }

func (d *Deadline) Err() error {
	select {
	case <-d.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// Pass makes the deadline pass (again: nothing more).
func (d *Deadline) Pass() { d.once.Do(func() { close(d.done) }) }
