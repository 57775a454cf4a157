package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"fano/actors/allocator"
	"fano/actors/scheduler"
	"fano/gateway"
	"fano/modules"
	"fano/pb"
)

// Every message between actors is a pb type (pb/actors.proto); this file
// turns Go values and errors into those messages and back, and waits for
// replies through protoactor's futures.

var errStopping = errors.New("fano is stopping")

// asker is how code outside an actor's Receive (the facade's calls, an
// actor's continuation) asks an actor and waits for its reply, through
// protoactor's futures. It tracks every future still open so that a stop
// fails them all (see failPending): no caller waits for an actor that is
// gone. Safe for concurrent use from any goroutine; made at Start, once
// the actor system exists.
type asker struct {
	root *actor.RootContext
	dead <-chan struct{} // closed when the system has stopped
	// pending holds the futures of requests still waiting for a reply.
	pending sync.Map
	// futures counts the futures ask made: each is a process-registry
	// insert and a goroutine wake-up, so a task's run makes none (its
	// executor's replies come to its own PID).
	futures atomic.Int64
}

// request sends msg to pid and waits for the reply the actor gives with
// ctx.Respond. ctx's deadline, if any, is the future's timeout; a stop of
// the system fails every future still waiting (see failPending), so no
// caller waits for an actor that is gone.
func request[R proto.Message](a *asker, ctx context.Context, pid *actor.PID, msg proto.Message) (R, error) {
	return await[R](a, a.ask(ctx, pid, msg), pid, msg)
}

// ask sends msg to pid as a request; await waits for its reply.
func (a *asker) ask(ctx context.Context, pid *actor.PID, msg proto.Message) actor.Future {
	timeout := time.Duration(-1) // no timer: the reply or the stop ends the wait
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(dl), time.Millisecond)
	}
	f := a.root.RequestFuture(pid, msg, timeout)
	a.futures.Add(1)
	a.pending.Store(f.PID(), struct{}{})
	select {
	case <-a.dead:
		a.root.Send(f.PID(), &actor.DeadLetterResponse{})
	default:
	}
	return f
}

func await[R proto.Message](a *asker, f actor.Future, pid *actor.PID, msg proto.Message) (R, error) {
	var zero R
	res, err := f.Result()
	a.pending.Delete(f.PID())
	switch {
	case errors.Is(err, actor.ErrDeadLetter):
		return zero, errStopping
	case errors.Is(err, actor.ErrTimeout):
		return zero, fmt.Errorf("%T to %s: no reply: %w", msg, pid.Id, context.DeadlineExceeded)
	case err != nil:
		return zero, err
	}
	r, ok := res.(R)
	if !ok {
		return zero, fmt.Errorf("%T to %s: unexpected reply %T", msg, pid.Id, res)
	}
	return r, nil
}

// failPending ends the wait of every request still open: their actors
// have stopped and would drop the messages in their mailboxes.
func (a *asker) failPending() {
	a.pending.Range(func(k, _ any) bool {
		a.root.Send(k.(*actor.PID), &actor.DeadLetterResponse{})
		return true
	})
}

// requestDone is request for the replies that only say whether it worked.
func (a *asker) requestDone(pid *actor.PID, msg proto.Message) error {
	r, err := request[*pb.Done](a, context.Background(), pid, msg)
	if err != nil {
		return err
	}
	return errorFromWire(r.GetError())
}

// respond answers the sender of the message being handled, if it asked.
func respond(ctx actor.Context, reply proto.Message) {
	if ctx.Sender() != nil {
		ctx.Respond(reply)
	}
}

// respondLater answers sender (captured while its request was handled)
// from a continuation that runs later.
func (a *asker) respondLater(sender *actor.PID, reply proto.Message) {
	if sender != nil {
		a.root.Send(sender, reply)
	}
}

func doneOf(err error) *pb.Done { return &pb.Done{Error: errorToWire(err)} }

// errorToWire keeps an error's text and what callers match on with
// errors.As / errors.Is.
func errorToWire(err error) *pb.ActorError {
	if err == nil {
		return nil
	}
	w := &pb.ActorError{Message: err.Error()}
	var nf *scheduler.NotFoundError
	var nq *allocator.NoQuotaError
	var ve *modules.ValidationError
	switch {
	case errors.As(err, &nf):
		w.Code, w.TaskId = "not_found", nf.TaskID
	case errors.Is(err, scheduler.ErrFinished):
		w.Code = "finished"
	case errors.Is(err, allocator.ErrUnknownBackend):
		w.Code = "unknown_backend"
	case errors.As(err, &nq):
		w.Code, w.Backend, w.Deep, w.Until, w.Reason = "no_quota", nq.Backend, nq.Deep, nanos(nq.Until), nq.Reason
	case errors.As(err, &ve):
		w.Code, w.TaskId, w.Phase, w.Detail, w.Raw = "validation", ve.TaskID, ve.Phase, ve.Msg, ve.Raw
	}
	return w
}

// wireError is an error that crossed an actor boundary: its text as it
// was, unwrapping to what callers match on.
type wireError struct {
	msg   string
	match error
}

func (e *wireError) Error() string { return e.msg }
func (e *wireError) Unwrap() error { return e.match }

func errorFromWire(w *pb.ActorError) error {
	if w == nil {
		return nil
	}
	var match error
	switch w.Code {
	case "not_found":
		match = &scheduler.NotFoundError{TaskID: w.TaskId}
	case "finished":
		match = scheduler.ErrFinished
	case "unknown_backend":
		match = allocator.ErrUnknownBackend
	case "no_quota":
		match = &allocator.NoQuotaError{Backend: w.Backend, Deep: w.Deep, Until: timeOf(w.Until), Reason: w.Reason}
	case "validation":
		match = &modules.ValidationError{TaskID: w.TaskId, Phase: w.Phase, Msg: w.Detail, Raw: w.Raw}
	}
	return &wireError{msg: w.Message, match: match}
}

func llmResponseToWire(id uint64, backend string, r gateway.Response, err error) *pb.LLMResponse {
	w := &pb.LLMResponse{
		RequestId: id, TaskId: "", Llm: backend, Response: r.Content, ConversationUrl: r.ConversationURL,
		DurationNs: int64(r.Duration), PromptTokens: r.PromptTokens, CompletionTokens: r.CompletionTokens,
		PrimedTurns: int32(r.PrimedTurns), FromPage: r.FromPage, Incomplete: r.Incomplete, Model: r.Model,
	}
	if err != nil {
		w.Error = &pb.LLMError{Message: err.Error(), Kind: gateway.Kind(err), NotSent: neverLeft(err)}
		var rl *gateway.RateLimitedError
		if errors.As(err, &rl) {
			w.Error.Backend, w.Error.RetryAfterNs, w.Error.Until = rl.Backend, int64(rl.RetryAfter), nanos(rl.Until)
			w.Error.Cap, w.Error.Reason = rl.Cap, rl.Reason
		}
		var f *gateway.Fault
		if errors.As(err, &f) {
			c := f.Condition
			w.Error.Backend, w.Error.State, w.Error.Window = f.Backend, string(c.State), f.Window
			w.Error.Until, w.Error.Reason, w.Error.Cap = nanos(c.Until), c.Reason, c.Class() == gateway.ClassQuota
		}
	}
	return w
}

// neverLeft: err says the request was refused before it left, by the
// gateway (an open circuit) or by the API's rate limiter (a cancelled or
// timed-out wait: the limiter's ErrNotSent is gateway.ErrNotSent).
func neverLeft(err error) bool { return errors.Is(err, gateway.ErrNotSent) }

func llmResponseFromWire(w *pb.LLMResponse) (gateway.Response, error) {
	r := gateway.Response{
		Content: w.Response, ConversationURL: w.ConversationUrl, PrimedTurns: int(w.PrimedTurns),
		FromPage: w.FromPage, Incomplete: w.Incomplete, Model: w.Model, Duration: time.Duration(w.DurationNs),
		PromptTokens: w.PromptTokens, CompletionTokens: w.CompletionTokens,
	}
	return r, llmErrorFromWire(w.Error)
}

// llmError is a backend's failure as it crossed the wire: its text, its
// kind for gateway.Kind, and ErrNotSent when it never left.
type llmError struct {
	msg     string
	kind    error
	notSent bool
	rl      *gateway.RateLimitedError
}

func (e *llmError) Error() string { return e.msg }

func (e *llmError) Is(target error) bool {
	return target == e.kind || (target == gateway.ErrNotSent && e.notSent)
}

func (e *llmError) Unwrap() error {
	if e.rl != nil {
		return e.rl
	}
	return nil
}

// llmErrorKinds maps gateway.Kind's names back to what it matches.
var llmErrorKinds = map[string]error{
	string(kindCancelled):        context.Canceled,
	string(kindCredentials):      gateway.ErrCredentials,
	string(kindBadAnswer):        gateway.ErrBadAnswer,
	string(kindHung):             gateway.ErrHung,
	string(kindConversationGone): gateway.ErrConversationGone,
	string(kindTransient):        gateway.ErrTransient,
	string(kindUnavailable):      gateway.ErrUnavailable,
	string(kindPermanent):        gateway.ErrPermanent,
}

func llmErrorFromWire(w *pb.LLMError) error {
	if w == nil {
		return nil
	}
	e := &llmError{msg: w.Message, kind: llmErrorKinds[w.Kind], notSent: w.NotSent}
	if w.State != "" {
		// A fault read into its condition where it was recognised: it
		// crosses as it was, so routing reads the same condition.
		return &gateway.Fault{Backend: w.Backend, Window: w.Window, NotSent: w.NotSent, Err: e,
			Condition: gateway.Condition{State: gateway.State(w.State), Reason: w.Reason, Until: timeOf(w.Until)}}
	}
	if w.Kind == string(kindRateLimited) {
		e.rl = &gateway.RateLimitedError{Backend: w.Backend, RetryAfter: time.Duration(w.RetryAfterNs),
			Until: timeOf(w.Until), Cap: w.Cap, Reason: w.Reason, NotSent: w.NotSent}
	}
	return e
}

func actionToWire(a modules.Action, err error) *pb.NextActionReply {
	return &pb.NextActionReply{Kind: int32(a.Kind), Prompt: a.Prompt, Images: a.Images, DeepMode: a.DeepMode, Error: errorToWire(err)}
}

func actionFromWire(w *pb.NextActionReply) (modules.Action, error) {
	return modules.Action{Kind: modules.ActionKind(w.Kind), Prompt: w.Prompt, Images: w.Images, DeepMode: w.DeepMode},
		errorFromWire(w.Error)
}
