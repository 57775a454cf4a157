package actors

import (
	"fano/gateway/refusal"

	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"fano/actors/allocator"
	"fano/actors/scheduler"
	"fano/gateway"
	"fano/modules"
	"fano/pb"
)

// Options is everything the actor system needs; cmd/fano builds it from
// the config, tests build it directly.
type Options struct {
	Log    Store
	Clock  clockwork.Clock
	Logger zerolog.Logger

	Scheduler scheduler.Config
	Allocator allocator.Config
	Backends  []gateway.Backend
	Modules   []modules.Module
	// Unbuilt names the modules the registry knows but could not build,
	// with why: recovery refuses a WAL with unfinished tasks of one of
	// them (rather than park those tasks for good).
	Unbuilt map[string]string

	TickInterval       time.Duration // scheduler tick (spec: 100 ms)
	CheckpointInterval time.Duration // 0: only at shutdown
	CompactThreshold   int64         // bytes of WAL file above which to compact; 0: never
	MaxRunning         int           // executors at once
	MaxRequests        func(taskType string) int
	RequestTimeout     time.Duration   // per LLM call
	RetryBackoff       []time.Duration // consecutive transient failures: 60/300/900 s, then the last again
	// ValidationRetries (config max_task_retries) is how many answers of
	// one task that failed validation (or were refusals) are retried; the
	// next one fails the task. 0 = len(RetryBackoff); negative = none.
	ValidationRetries int
	// CredentialsRecheck is how long a backend that refused its
	// credentials is parked before it is tried again (default 5 min).
	CredentialsRecheck time.Duration
	// Refusals tells answers that are no answer (a refusal, nothing);
	// nil: the built-in patterns.
	Refusals        *refusal.Matcher
	ShutdownTimeout time.Duration // how long executors get to pause at shutdown
	// FinishedRetention: finished tasks leave memory this long after they
	// finished, archived in the WAL file first (0 = keep them in memory).
	FinishedRetention time.Duration
	// MaxFinishedInMemory: when more finished tasks than this are in
	// memory, the oldest leave it (archived first, as after their
	// retention) until this many are left; 0 = no bound. A run of a
	// million tasks then keeps a hash of each finished id, not the task.
	MaxFinishedInMemory int

	// OutputDir is <data-dir>/output, where modules' files go ("" = none).
	OutputDir string

	// Observe, if set, sees every event after it is applied, in the
	// applying actor's goroutine: it must not block.
	Observe func(owner string, e *pb.Event)
	// DispatchOnTick starts tasks on the scheduler's tick only, never on
	// the messages that free a slot or add work (fano simulate): those
	// reach the scheduler from many goroutines in an order the OS picks,
	// and what a dispatch started depended on it. It costs a task up to
	// one tick interval of waiting.
	DispatchOnTick bool
	// Dry makes recovery report without writing (fano recover --dry-run).
	Dry bool
	// HoldWork starts the system with new work held back (SetAccepting
	// false): the run found the disk below its minimum before starting,
	// and the health check that sees space again lets work start.
	HoldWork bool
	// Storage, if set, reports the WAL's write faults (the same watch fed
	// by wal.Options.OnWriteFault/OnWriteRecovered): while writes fail no
	// new work starts, and it starts again by itself when they succeed.
	Storage *StorageWatch
}

func (o *Options) defaults() {
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	if o.TickInterval <= 0 {
		o.TickInterval = 100 * time.Millisecond
	}
	if o.MaxRunning <= 0 {
		o.MaxRunning = 64
	}
	if o.MaxRequests == nil {
		o.MaxRequests = func(string) int { return 10 }
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = time.Hour
	}
	if o.Refusals == nil {
		o.Refusals = refusal.Default()
	}
	if o.CredentialsRecheck <= 0 {
		o.CredentialsRecheck = credentialsRecheck
	}
	if len(o.RetryBackoff) == 0 {
		o.RetryBackoff = []time.Duration{60 * time.Second, 300 * time.Second, 900 * time.Second}
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = 1500 * time.Millisecond
	}
}

// Owner names of the WAL.
const (
	ownerScheduler = "scheduler"
	ownerAllocator = "allocator"
)

func moduleOwner(name string) string { return "module/" + name }
