package actors

import (
	"time"

	"context"

	"fano/gateway"
	"fano/modules"
	"fano/pb"
)

// Internal actor messages. Domain messages are the pb types (TaskSubmit,
// TaskComplete, ...); these small structs carry what protobuf cannot: a
// context or a reply channel between actors of one process.

type tick struct{ now int64 }

// taskEvents asks the scheduler, the only writer of task events, to
// persist and apply events an executor decided for its task.
type taskEvents struct {
	taskID string
	events []*pb.Event
	reply  chan taskEventsReply
}

type taskEventsReply struct {
	seqs []uint64
	err  error
}

// freeSlots is the allocator's view of who can take work, pushed to the
// scheduler on every change.
type freeSlots struct {
	slots map[string]int // backend -> free request slots (with quota)
	quota map[string]quotaView
}

type quotaView struct{ normal, deep bool }

type allocate struct{ task *pb.Task }

type allocated struct {
	taskID string
	llm    string // "" = nothing could be allocated
}

type release struct{ backend string }

type useQuota struct {
	backend, taskID string
	deep            bool
	reply           chan error
}

type rateLimited struct {
	backend, taskID string
	err             *gateway.RateLimitedError
	reply           chan time.Time // when the backend may be used again; nil: no reply
}

// backendCondition records a fault of the backend itself (credentials,
// login, open circuit) or clears it (state "ready").
type backendCondition struct {
	backend, state, reason string
	until                  time.Time
	// sent: when the request that met the fault left (zero: not from a
	// request). A fault of a request sent before the backend's last
	// re-check is ignored: it says nothing of the key used now.
	sent  time.Time
	reply chan error // nil: no reply
}

// releaseQuota gives back the quota use of a request that never left.
type releaseQuota struct {
	backend, taskID string
	deep            bool
	reply           chan error
}

// rateLearned records the rate a backend's provider told.
type rateLearned struct {
	backend string
	limit   int
	window  time.Duration
}

type preemptQuery struct {
	taskID, llm string
	reply       chan string // id of the task that should run instead, or ""
}

type cancelTask struct {
	id, reason string
	reply      chan error
}

// cancelRun tells an executor to stop its task at once.
type cancelRun struct{ reason string }

type startExecutor struct {
	task *pb.Task
}

type executorDone struct {
	taskID, llm string
	result      *pb.TaskResult
}

// query runs fn inside the actor, on its state, and closes done.
type query struct {
	fn   func(state any)
	done chan struct{}
}

type checkpointNow struct{ reply chan error }

type shutdownNow struct{ reply chan struct{} }

type nextAction struct {
	task  *pb.Task
	reply chan actionReply
}

type actionReply struct {
	action modules.Action
	err    error
}

type moduleAnswer struct {
	task   *pb.Task
	answer string
	reply  chan error
}

type moduleEnd struct {
	task   *pb.Task
	failed bool
	reason string
	reply  chan error
}

type moduleCommand struct {
	decide func(m modules.Module) ([]*pb.ModuleEvent, error)
	reply  chan error
}

type gatewayCall struct {
	ctx   context.Context
	req   gateway.Request
	reply chan gatewayResult
}

type gatewayResult struct {
	resp gateway.Response
	err  error
}
