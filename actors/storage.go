package actors

import (
	"sync"
	"time"
)

// StorageWatch follows the WAL's write faults (wal.Options.OnWriteFault
// and OnWriteRecovered feed it) and decides what the system does about
// them: new work stops while writes fail, a log line at most once per
// LogEvery, and work resumes when a write goes through again. It imports
// no actor code; the System subscribes to its changes.
type StorageWatch struct {
	// LogEvery is the least time between two log lines of one fault
	// (default one minute).
	LogEvery time.Duration

	mu       sync.Mutex
	fault    error
	since    time.Time
	attempts int
	lastLog  time.Time
	onChange []func(StorageChange)
}

// StorageChange is what a subscriber is told: a fault began or goes on
// (Err set; Log says whether to write a line now), or it ended.
type StorageChange struct {
	Err      error
	Since    time.Time
	Attempts int
	Down     time.Duration // on recovery: how long writes failed
	Began    bool          // the first failure of this fault
	Ended    bool
	Log      bool
}

// NewStorageWatch returns a watch logging at most once per minute.
func NewStorageWatch() *StorageWatch { return &StorageWatch{LogEvery: time.Minute} }

// Subscribe calls fn on every change, in the WAL writer's goroutine: fn
// must not block on the WAL.
func (w *StorageWatch) Subscribe(fn func(StorageChange)) {
	w.mu.Lock()
	w.onChange = append(w.onChange, fn)
	w.mu.Unlock()
}

// Failed records a failed write attempt at now.
func (w *StorageWatch) Failed(err error, attempt int, now time.Time) {
	w.mu.Lock()
	c := StorageChange{Err: err, Attempts: attempt}
	if w.fault == nil {
		w.since, c.Began = now, true
	}
	w.fault, w.attempts = err, attempt
	every := w.LogEvery
	if every <= 0 {
		every = time.Minute
	}
	if c.Began || now.Sub(w.lastLog) >= every {
		c.Log, w.lastLog = true, now
	}
	c.Since = w.since
	subs := w.onChange
	w.mu.Unlock()
	for _, fn := range subs {
		fn(c)
	}
}

// Recovered records that the retried write went through.
func (w *StorageWatch) Recovered(down time.Duration, attempts int) {
	w.mu.Lock()
	if w.fault == nil {
		w.mu.Unlock()
		return
	}
	c := StorageChange{Since: w.since, Attempts: attempts, Down: down, Ended: true, Log: true}
	w.fault, w.attempts, w.lastLog = nil, 0, time.Time{}
	subs := w.onChange
	w.mu.Unlock()
	for _, fn := range subs {
		fn(c)
	}
}

// Fault returns since when and after how many attempts writes fail, and
// the current write fault (nil when writes go through).
func (w *StorageWatch) Fault() (since time.Time, attempts int, err error) {
	if w == nil {
		return time.Time{}, 0, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.since, w.attempts, w.fault
}
