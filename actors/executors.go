package actors

import (
	"sync"
	"sync/atomic"
)

// liveExecutors counts the executors at work: the scheduler actor adds
// one as it starts an executor, the executor takes it away as it ends
// (ended). It wakes whoever waits for an executor to end: WaitIdle
// through finishSignal, Stop through done. Safe from any goroutine.
type liveExecutors struct {
	atomic.Int64

	// running holds every executor whose loop has not ended: the
	// orchestrator stops them as it stops (see each).
	runningMu sync.Mutex
	running   map[*executor]struct{}

	mu sync.Mutex
	// finished is closed each time an executor ends, and made again
	// only when someone waits (nil: nobody does): no channel a task.
	finished chan struct{}
	done     chan struct{} // a signal per finished executor (non-blocking)
}

func newLiveExecutors() *liveExecutors {
	return &liveExecutors{done: make(chan struct{}, 1)}
}

func (x *liveExecutors) started(e *executor) {
	x.runningMu.Lock()
	defer x.runningMu.Unlock()
	if x.running == nil {
		x.running = map[*executor]struct{}{}
	}
	x.running[e] = struct{}{}
}

func (x *liveExecutors) stopped(e *executor) {
	x.runningMu.Lock()
	defer x.runningMu.Unlock()
	delete(x.running, e)
}

// each calls fn for every executor whose loop has not ended, on a list
// taken first: fn may take long or start and stop executors.
func (x *liveExecutors) each(fn func(*executor)) {
	x.runningMu.Lock()
	list := make([]*executor, 0, len(x.running))
	for e := range x.running {
		list = append(list, e)
	}
	x.runningMu.Unlock()
	for _, e := range list {
		fn(e)
	}
}

// finishSignal is closed when the next executor ends, or the next
// task's end is applied (an executor ends before its task's completion is
// durable: see executor.complete).
func (x *liveExecutors) finishSignal() chan struct{} {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.finished == nil {
		x.finished = make(chan struct{})
	}
	return x.finished
}

// ended counts an executor out and wakes WaitIdle and Stop.
func (x *liveExecutors) ended() {
	x.Add(-1)
	x.taskEnded()
	select {
	case x.done <- struct{}{}:
	default:
	}
}

// taskEnded wakes WaitIdle: the scheduler calls it as it applies the end
// of a task.
func (x *liveExecutors) taskEnded() {
	x.mu.Lock()
	if x.finished != nil {
		close(x.finished)
		x.finished = nil
	}
	x.mu.Unlock()
}
