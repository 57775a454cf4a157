package actors

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"fano/pb"
)

// storageGate pauses running tasks in memory while WAL writes fail: an
// executor waits at its next safe point (before a model call) without
// writing anything, and the tasks show as PAUSED for the reason; when
// writes go through again the gate opens and they go on where they
// were. Nothing of it is state: the WAL still says RUNNING, so a restart
// meanwhile pauses them through recovery as after any stop.
type storageGate struct {
	mu    sync.Mutex
	open  chan struct{} // closed while writes go through
	err   error         // the fault while shut
	since time.Time
	// parked counts the runs waiting at the gate; moved is closed and
	// replaced when it changes (tests wait on it).
	parked int
	moved  chan struct{}
}

func newStorageGate() *storageGate {
	g := &storageGate{open: make(chan struct{}), moved: make(chan struct{})}
	close(g.open)
	return g
}

// park and unpark count a run in or out of the gate.
func (g *storageGate) park(delta int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.parked += delta
	close(g.moved)
	g.moved = make(chan struct{})
}

// waiting returns how many runs wait at the gate and a channel closed at
// the next change.
func (g *storageGate) waiting() (int, <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.parked, g.moved
}

// shut holds every executor at its next safe point.
func (g *storageGate) shut(err error, since time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.err, g.since = err, since
	select {
	case <-g.open:
		g.open = make(chan struct{})
	default:
	}
}

// reopen lets the held executors go on.
func (g *storageGate) reopen() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.err = nil
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

// wait returns at once while the gate is open; while it is shut it waits
// until it opens (nil) or ctx ends (ctx's cause).
func (g *storageGate) wait(ctx context.Context) error {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	select {
	case <-open:
		return nil
	default:
	}
	g.park(1)
	defer g.park(-1)
	select {
	case <-open:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// fault is the fault the gate is shut for (nil when open).
func (g *storageGate) fault() (error, time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err, g.since
}

// PauseStorage is the pause reason shown for tasks held by a WAL fault.
const PauseStorage = "storage"

// shown is t as people see it: a running task held by the gate is
// PAUSED for the storage fault. t itself is not changed.
func (g *storageGate) shown(t *pb.Task) *pb.Task {
	if t.GetState() != pb.TaskState_TASK_STATE_RUNNING {
		return t
	}
	err, since := g.fault()
	if err == nil {
		return t
	}
	c := proto.Clone(t).(*pb.Task)
	c.State = pb.TaskState_TASK_STATE_PAUSED
	c.PauseReason = PauseStorage
	c.Error = fmt.Sprintf("WAL writes fail since %s (%v): paused in memory, resumes by itself when the disk accepts writes", since.UTC().Format(time.RFC3339), err)
	return c
}
