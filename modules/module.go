// Package modules defines what a fano module is: a plain, single-threaded
// owner of domain state (explorer, documenter, researcher) that proposes
// tasks, says what a running task does next, and turns answers into events.
//
// A module works in decide/apply form: Decide* methods read
// state and return events, Apply is the only code that changes state. The
// module host persists the decided events to the WAL before applying them,
// so replaying a module's events rebuilds the same state. A module never
// imports gateway or actors, nor another module: a fact one module acts on
// reaches it as a pb.ModuleMessage (Sender, Receiver), through the hosts.
package modules

import (
	"errors"
	"fmt"
	"io"
	"time"

	"fano/pb"
)

// ActionKind says what a running task wants next.
type ActionKind int

const (
	// ActionLLMRequest sends Action.Prompt to the task's LLM.
	ActionLLMRequest ActionKind = iota + 1
	// ActionDone: the task's work is finished.
	ActionDone
	// ActionYield is an explicit safe point: the executor checks preemption.
	ActionYield
)

func (k ActionKind) String() string {
	switch k {
	case ActionLLMRequest:
		return "llm_request"
	case ActionDone:
		return "done"
	case ActionYield:
		return "yield"
	}
	return fmt.Sprintf("action(%d)", int(k))
}

// Action is the next step of a running task.
type Action struct {
	Kind     ActionKind
	Prompt   string
	Images   []string
	DeepMode bool
}

// Module is one module's domain logic. It is not safe for concurrent use:
// its host actor is its only caller.
type Module interface {
	// Name is the module's name, the first part of its task keys.
	Name() string
	// TaskTypes lists the task types the module runs; a task of another
	// type is refused at submit.
	TaskTypes() []string
	// Propose returns the tasks the module wants to run now. Task ids are
	// deterministic (module/type/subject) so proposing twice is harmless.
	Propose(now time.Time) []*pb.Task
	// NextAction says what the task does next, from its conversation so far.
	// NextAction and the Decide methods only read t: it is the executor's
	// own copy, shared with the module's host.
	NextAction(t *pb.Task) (Action, error)
	// DecideResponse turns an answer into module events. A *ValidationError
	// says the answer did not parse and the request should be retried.
	DecideResponse(t *pb.Task, answer string, now time.Time) ([]*pb.ModuleEvent, error)
	// DecideCompletion returns the events of a task's successful end.
	DecideCompletion(t *pb.Task, now time.Time) ([]*pb.ModuleEvent, error)
	// DecideFailure returns the events of a task's failure or cancellation.
	DecideFailure(t *pb.Task, reason string, now time.Time) ([]*pb.ModuleEvent, error)
	// Apply changes state; at is when the event happened.
	Apply(e *pb.ModuleEvent, at time.Time) error
	// Snapshot and Restore carry the state through checkpoints.
	Snapshot() ([]byte, error)
	Restore(data []byte) error
}

// AnswerEnder is implemented by modules that can tell, as they decide an
// answer's events, that those events end the task: NextAction on the
// state after evs is applied would say ActionDone, and DecideCompletion
// would then decide end. The host writes evs and end together and the
// task completes at once, instead of waiting for evs to be applied before
// it asks NextAction (the wait of a whole group commit per task).
//
// ends false means "not known": the task goes on as after
// DecideResponse, and NextAction decides on the applied state. So a
// module may answer ends only for the cases it is sure of. evs and err
// are exactly DecideResponse's.
type AnswerEnder interface {
	DecideResponseEnd(t *pb.Task, answer string, now time.Time) (evs []*pb.ModuleEvent, ends bool, end []*pb.ModuleEvent, err error)
}

// Usage is the token usage a backend reported with an answer (zero: not
// reported).
type Usage struct {
	PromptTokens, CompletionTokens int64
}

// UsageTaker is implemented by modules that price answers by the usage
// the backend reported: the host hands over the usage from the answer's
// event just before it asks the module to decide on that answer.
type UsageTaker interface {
	TakeUsage(taskID string, u Usage)
}

// Backlogger is implemented by modules whose waiting work raises the
// priority of their tasks (backlog pressure, docs/architecture.md, Priority).
type Backlogger interface {
	Backlog() int
}

// ValidationError says an LLM answer failed validation (the second
// phase of two-phase validation: the text parsed but broke a rule). Raw keeps the answer for inspection.
type ValidationError struct {
	TaskID string
	Phase  string // "schema" | "rules"
	Msg    string
	Raw    string
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("task %s: answer failed %s validation: %s", e.TaskID, e.Phase, e.Msg)
}

// IsValidation reports whether err is a *ValidationError.
func IsValidation(err error) bool {
	var v *ValidationError
	return errors.As(err, &v)
}

// TaskKey builds the deterministic id of a task.
func TaskKey(module, taskType, subject string) string {
	return module + "/" + taskType + "/" + subject
}

// Exporter is implemented by modules whose state implies output files
// (output/blessed/<id>.json, output/DOCUMENT.md). After applying events,
// the host asks which files changed and rewrites each atomically under a
// WAL intent and commit (temp file, fsync, rename), so a crash between
// the state change and the file never leaves them out of step: recovery
// redoes every intent without a commit.
type Exporter interface {
	// Exports lists the files (paths relative to <data-dir>/output) that
	// applying e changed.
	Exports(e *pb.ModuleEvent) []string
	// Export renders one file from the current state.
	Export(path string) ([]byte, error)
	// ExportPaths lists every file the current state implies (verify and
	// repair compare them with the disk).
	ExportPaths() []string
}

// StreamExporter is implemented by Exporters whose files can be large: the
// host has ExportTo write a file through a buffer instead of holding it
// whole (Export stays for callers that compare or need the bytes).
type StreamExporter interface {
	// ExportTo writes what Export(path) returns to w.
	ExportTo(path string, w io.Writer) error
}

// SeedTaker is implemented by modules that accept new questions (the
// explorer): `fano seed add`, POST /api/seeds, researcher findings.
type SeedTaker interface {
	DecideAddSeed(text string, priority int, now time.Time) ([]*pb.ModuleEvent, error)
}

// Commenter is implemented by the module that owns the document sections
// (the documenter): `fano comment add`, POST /api/comments. An unknown
// section or an empty comment is an error naming it.
type Commenter interface {
	DecideAddComment(sectionID, text string, now time.Time) ([]*pb.ModuleEvent, error)
}

// DocumentReader renders the living document as Markdown.
type DocumentReader interface {
	DocumentMarkdown() string
}

// Reporter is implemented by modules that show their own progress in the
// control panel (the pipeline: counts per step and model, failures). The
// report is JSON-encodable and has a "kind" field naming its shape.
type Reporter interface {
	Report() any
}

// Problem is an inconsistency a module finds in its own state.
type Problem struct {
	Kind   string `json:"kind"`   // e.g. "blessed_twice", "incorporated_twice"
	ID     string `json:"id"`     // what it concerns
	Detail string `json:"detail"` // for people
}

// Verifier is implemented by modules that can check their own state
// (fano verify) and decide the events that repair a problem (fano repair).
type Verifier interface {
	Verify() []Problem
	DecideRepair(p Problem, now time.Time) ([]*pb.ModuleEvent, error)
}

// Sender is implemented by modules whose facts other modules act on (the
// explorer's blessed insights feed the documenter). A message is derived
// from the sender's state, never kept beside it: the host sends what
// Outbox lists once the events implying it are durable, again at every
// start, and until the receiver's acknowledgment is recorded by the
// events DecideAcknowledged returns. So a crash between the sender's
// event and the receiver's loses nothing: the message is still in the
// outbox when fano starts again. A message to a module that is not
// configured is simply not sent (it stays in the outbox).
type Sender interface {
	// Outbox lists the unacknowledged messages that applying e implied,
	// or (e nil) every unacknowledged message of the state, oldest first.
	// Message ids are stable: the same fact always has the same id.
	Outbox(e *pb.ModuleEvent) []*pb.ModuleMessage
	// DecideAcknowledged returns the events recording that a message left
	// the outbox: its receiver took it, or refused it for good. An ack of
	// a message no longer in the outbox decides nothing.
	DecideAcknowledged(ack *pb.ModuleMessageAck, now time.Time) ([]*pb.ModuleEvent, error)
}

// Receiver is implemented by modules that act on other modules' facts.
type Receiver interface {
	// DecideReceive returns the events of taking msg; now is the host's
	// clock. Receipt is idempotent by msg.Id: a message taken before
	// decides nothing. An error says the message can never be taken (it
	// is logged and the sender records it as refused).
	DecideReceive(msg *pb.ModuleMessage, now time.Time) ([]*pb.ModuleEvent, error)
}
