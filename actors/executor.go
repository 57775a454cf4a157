package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"

	"fano/actors/allocator"
	"fano/gateway"
	"fano/modules"
	"fano/pb"
)

// Why an executor's context was cancelled. A shutdown or a preemption
// pauses the task; only a person's cancel cancels it.
var (
	errShutdown  = gateway.ErrShutdown
	errPreempted = errors.New("preempted")
	errTimeout   = fmt.Errorf("request timed out: %w", context.DeadlineExceeded)
)

type cancelledByUser struct{ reason string }

func (c *cancelledByUser) Error() string { return "cancelled: " + c.reason }

// executor runs one task (the task loop, docs/architecture.md) in a goroutine bound to a context
// that shutdown, cancellation and the per-call timeout really cancel. Its
// process in the actor registry (startExecutor) turns messages into
// cancellation and hands it the replies to its requests: the loop asks
// other actors with the executor's own PID as the sender (see ask), so a
// request costs no future.
type executor struct {
	env *executorEnv
	// task is the task as the scheduler holds it: given at the start,
	// taken back after each answer or failed request (see persist). A
	// copy is never changed, only replaced: the module host reads the one
	// it is sent without cloning it.
	task   *pb.Task
	taskID string // e.task's, never changed: read from any goroutine
	runNo  uint64 // the hand-out's run number, named in the TaskComplete
	sent   int    // requests this run sent (the loop's own count)
	runCtx context.Context
	cancel context.CancelCauseFunc
	self   *actor.PID

	// replies carries each reply from Receive to the loop (nil: the actor
	// asked is gone). The loop has at most two requests open (quota and
	// request intent), so the buffer never fills.
	replies  chan proto.Message
	gone     chan struct{} // closed when the shutdown stops it (Stop): no reply will come
	goneOnce sync.Once
	// yield is set by the scheduler (PreemptReply, pushed at its ticks)
	// when a more urgent task waits for this one's backend; the loop reads
	// it at each safe point.
	yield atomic.Bool
	// answered is closed by the scheduler's first PreemptReply: until
	// then the loop does not know whether it may send (see yielding).
	answered     chan struct{}
	answeredOnce sync.Once
	ended        atomic.Bool // the run is over: messages are dropped
}

// executorEnv is what an executor may use of the system, and all it
// holds of it (never the System: the facade is out of its reach): the
// actors it talks to, the clock and limits, the storage gate, backend
// fault routing and the counters it keeps up. Made at Start before any
// executor exists; its fields never change after, and the counters are
// safe from every executor's goroutine.
type executorEnv struct {
	baseCtx  context.Context // cancelled by Stop
	root     *actor.RootContext
	registry *actor.ProcessRegistryValue // where executors are found by PID
	clock    clockwork.Clock
	logger   zerolog.Logger
	opts     *Options // read only

	schedulerPID, allocatorPID *actor.PID
	modulePIDs                 map[string]*actor.PID
	moduleHosts                map[string]*atomic.Pointer[moduleHost] // see moduleHost.nextActionNow
	gateways                   map[string]*gatewayCalls               // by backend

	calls       atomic.Uint64 // numbers LLM calls for their cancel
	offActor    *atomic.Int64 // the System's (see QueuedMessages)
	executors   *liveExecutors
	faults      *backendFaults
	storageGate *storageGate
	// quotaView is the allocator's last view of which backends can take
	// a request now (read only; nil in tests that build no system).
	quotaView *schedulerInputs
	// schedulerJournal is the live scheduler instance's journal: a
	// request's intent is queued there straight from the executor (see
	// intentAndQuota).
	schedulerJournal atomic.Pointer[journal]
	// hookBeforeIntent, when set (tests), runs on the executor's
	// goroutine just before a request's intent is queued.
	hookBeforeIntent func(taskID string)
}

// reportCall is where call outcomes reach health and metrics.
func (x *executorEnv) reportCall(backend, kind string) {
	x.logger.Debug().Str("event", "gateway."+backend+".call").Str("outcome", kind).Msg("llm call failed")
}

// newExecutor makes the executor of one run of task t; start runs it.
// An executor is not a protoactor actor but a process in the actor
// system's registry (see SendUserMessage): spawning an actor, its
// mailbox, its lifecycle messages and its stop cost about 30 allocations
// and a tenth of the CPU of a zero-latency task, for a Receive that only
// hands a reply to the loop or sets a flag. Once made, its PID (self)
// takes messages: the scheduler tells it whether to yield before its
// loop runs.
func (x *executorEnv) newExecutor(t *pb.Task, run uint64) *executor {
	e := &executor{env: x, task: t, taskID: t.Id, runNo: run,
		replies: make(chan proto.Message, 4), gone: make(chan struct{})}
	if x.opts.DispatchOnTick {
		e.answered = make(chan struct{}) // only waited for then (yielding)
	}
	e.runCtx, e.cancel = context.WithCancelCause(x.baseCtx)
	reg := x.registry
	e.self, _ = reg.Add(e, "executor"+reg.NextID()) // a new id: never taken
	x.executors.started(e)
	return e
}

// start runs the executor's loop, on a warm goroutine: its stack is
// grown already.
func (e *executor) start() {
	warmDispatcher.Go(func() {
		res := e.runSafely(e.runCtx)
		e.finish(res)
		e.ended.Store(true)
		e.env.registry.Remove(e.self)
		e.env.executors.stopped(e)
		e.cancel(errShutdown) // leaves the parent context's list of children
	})
}

// SendUserMessage takes a message to the executor (Receive), in the
// sender's goroutine. Once the run ended messages are dropped: senders
// that cached the PID still reach this process.
func (e *executor) SendUserMessage(_ *actor.PID, message any) {
	if !e.ended.Load() {
		e.Receive(actor.UnwrapEnvelopeMessage(message))
	}
}

// Receive handles one message: each case only sets a flag, cancels or
// hands a reply to the loop, and is safe from any goroutine. Messages
// from one sender are taken in the order sent, as a mailbox would.
func (e *executor) Receive(msg any) {
	switch m := msg.(type) {
	case *pb.PreemptReply:
		e.yield.Store(m.Instead != "")
		if e.answered != nil {
			e.answeredOnce.Do(func() { close(e.answered) })
		}
	case *pb.TaskEventsReply, *pb.NextActionReply, *pb.Done, *pb.LLMResponse:
		e.deliver(m.(proto.Message))
	case *actor.DeadLetterResponse:
		e.deliver(nil) // the actor asked has stopped: fano is stopping
	case *pb.CancelRun:
		switch m.Reason {
		case errShutdown.Error():
			e.cancel(errShutdown)
		case errPreempted.Error():
			e.cancel(errPreempted)
		default:
			e.cancel(&cancelledByUser{reason: m.Reason})
		}
	}
}

// SendSystemMessage: nobody watches an executor; there is nothing to take.
func (e *executor) SendSystemMessage(*actor.PID, any) {}

// Stop is the shutdown's: the loop's context is cancelled, and a reply it
// waits for will not come (the actors it asked are stopping too).
func (e *executor) Stop(*actor.PID) {
	e.cancel(errShutdown)
	e.goneOnce.Do(func() { close(e.gone) })
}

func (e *executor) deliver(m proto.Message) {
	select {
	case e.replies <- m:
	default:
		e.env.logger.Error().Str("event", "actors.executor.reply_dropped").Str("task", e.taskID).
			Str("reply", fmt.Sprintf("%T", m)).Msg("a reply nobody waits for")
	}
}

// tell sends msg to pid as a request from this executor: the reply comes
// back through Receive (see reply).
func (e *executor) tell(pid *actor.PID, msg proto.Message) {
	e.env.root.RequestWithCustomSender(pid, msg, e.self)
}

// reply waits for the next reply to one of the loop's requests.
func (e *executor) reply() (proto.Message, error) {
	select {
	case r := <-e.replies:
		if r == nil {
			return nil, errStopping
		}
		return r, nil
	case <-e.gone:
		return nil, errStopping
	}
}

// ask sends msg to pid and waits for its reply, of type R.
func ask[R proto.Message](e *executor, pid *actor.PID, msg proto.Message) (R, error) {
	var zero R
	e.tell(pid, msg)
	res, err := e.reply()
	if err != nil {
		return zero, err
	}
	r, ok := res.(R)
	if !ok {
		return zero, fmt.Errorf("task %s: %T to %s: unexpected reply %T", e.task.Id, msg, pid.Id, res)
	}
	return r, nil
}

func (e *executor) askDone(pid *actor.PID, msg proto.Message) error {
	r, err := ask[*pb.Done](e, pid, msg)
	if err != nil {
		return err
	}
	return errorFromWire(r.GetError())
}

func (e *executor) modulePID() (*actor.PID, error) {
	pid, ok := e.env.modulePIDs[e.task.Module]
	if !ok {
		return nil, fmt.Errorf("task %s: no module %q", e.task.Id, e.task.Module)
	}
	return pid, nil
}

// nextAction asks the module what the task does next: in place when it
// can (moduleHost.nextActionNow), else through its host's mailbox. If it
// is done, the module ends it in the same ask (ended): its completion
// events are queued in the WAL, or endErr says why not.
func (e *executor) nextAction() (act modules.Action, ended bool, endErr, err error) {
	var r *pb.NextActionReply
	now := false
	if h := e.env.moduleHosts[e.task.Module]; h != nil { // nil: no such module (modulePID says so)
		r, now = h.Load().nextActionNow(e.task)
	}
	if !now {
		pid, err := e.modulePID()
		if err != nil {
			return modules.Action{}, false, nil, err
		}
		if r, err = ask[*pb.NextActionReply](e, pid, &pb.NextAction{Task: e.task, EndIfDone: true}); err != nil {
			return modules.Action{}, false, nil, err
		}
	}
	act, err = actionFromWire(r)
	return act, r.Ended, errorFromWire(r.EndError), err
}

// answer writes an answer's event (ev) through the scheduler and has the
// module decide on the answer, in one ask. Nothing waits for the event's
// fsync: what the loop writes next is queued behind it, so the log never
// holds that without it (a crash leaves a prefix), and the next request
// leaves only once its own intent, queued later, is durable. The
// scheduler hands the answer to the module once the event is queued
// (TaskEvents then_module); the module answers here once its own events
// are queued behind it, with the task as it is after the answer.
// perr: the answer's event was not queued (nothing was decided). ended:
// the module knew the answer ends the task and queued its completion
// with it (endErr: it could not). err: the module could not decide.
func (e *executor) answer(ev *pb.Event, content string) (ended bool, endErr, err, perr error) {
	m := e.taskEvents([]*pb.Event{ev})
	m.ReplyWhenQueued = true
	m.ThenModule = &pb.ModuleAnswer{Answer: content, ReplyWhenQueued: true, EndIfDone: true, Response: ev.GetLlmResponseReceived()}
	e.tell(e.env.schedulerPID, m)
	r, rerr := e.reply()
	if rerr != nil {
		return false, nil, nil, rerr
	}
	switch r := r.(type) {
	case *pb.TaskEventsReply: // not handed on
		_, perr = e.persisted(m, r, nil)
		if perr == nil {
			perr = fmt.Errorf("task %s: the answer was queued but not handed to the module", e.task.Id)
		}
		return false, nil, nil, perr
	case *pb.NextActionReply:
		if r.Task != nil {
			e.task = r.Task
		}
		if err := errorFromWire(r.Error); err != nil {
			return false, nil, err, nil
		}
		return r.Ended, errorFromWire(r.EndError), nil, nil
	default:
		return false, nil, nil, fmt.Errorf("task %s: unexpected reply %T to its answer", e.task.Id, r)
	}
}

func (e *executor) moduleEnd(failed bool, reason string) error {
	pid, err := e.modulePID()
	if err != nil {
		return err
	}
	return e.askDone(pid, &pb.ModuleEnd{Task: e.task, Failed: failed, Reason: reason})
}

// send runs one call on backend: the request goes straight to the
// backend's calls (gatewayCalls.start), not through its host's mailbox.
// Once the request's deadline (Options.RequestTimeout) passes or ctx
// ends, the call is cancelled and answers as usual; cause is why
// (errTimeout, or ctx's cause), nil if neither came first. It waits on
// the reply, the deadline and ctx at once: a derived context and two
// callbacks a request were a share of fano's CPU.
//
// addressed (nil: none) carries the address a backend gives the
// request's new conversation while the answer comes: it is written to the
// WAL at once (recordAddress), so that a stop before the answer leaves
// the conversation known and its answer is read from the page.
func (e *executor) send(ctx context.Context, backend string, req gateway.Request, addressed <-chan string, reqSeq uint64) (resp gateway.Response, err, cause error) {
	calls, ok := e.env.gateways[backend]
	if !ok {
		return gateway.Response{}, gateway.Unavailable(backend, "no such backend"), nil
	}
	id := e.env.calls.Add(1)
	calls.start(id, req, e.self)
	timeout := e.env.opts.RequestTimeout
	if own := e.task.RequestTimeoutMs; own > 0 {
		timeout = time.Duration(own) * time.Millisecond
	}
	deadline := e.env.clock.NewTimer(timeout)
	defer deadline.Stop()
	expired, done := deadline.Chan(), ctx.Done()
	for {
		select {
		case res := <-e.replies:
			r, ok := res.(*pb.LLMResponse)
			if res == nil || !ok || r.RequestId != id {
				return gateway.Response{}, fmt.Errorf("%s: %w", backend, context.Canceled), cause
			}
			resp, err = llmResponseFromWire(r)
			return resp, err, cause
		case <-e.gone:
			return gateway.Response{}, fmt.Errorf("%s: %w", backend, context.Canceled), cause
		case <-expired:
			cause = errTimeout
		case <-done:
			cause = context.Cause(ctx)
		case url := <-addressed:
			addressed = nil
			e.recordAddress(backend, url, reqSeq)
			continue
		}
		expired, done = nil, nil // one cancel a call
		calls.running.cancel(id, cause)
	}
}

// addresses says whether backend gives its new conversations an address
// of their own (a chat site), to be recorded before the answer.
func (e *executor) addresses(backend string) bool {
	calls, ok := e.env.gateways[backend]
	if !ok {
		return false
	}
	a, ok := gateway.As[gateway.Addresser](calls.backend)
	return ok && a.AddressesConversations()
}

// recordAddress writes that the request of intent reqSeq started the
// task's web conversation on backend at url. Sent from the loop's
// goroutine, before the answer's event, to the scheduler, which queues it
// in the WAL; nothing waits for it: the call goes on, and a crash before
// it is durable leaves the request as it was without it (asked again in a
// new conversation).
func (e *executor) recordAddress(backend, url string, reqSeq uint64) {
	m := e.taskEvents([]*pb.Event{{Body: &pb.Event_LlmConversationAddressed{LlmConversationAddressed: &pb.LLMConversationAddressed{
		TaskId: e.task.Id, Llm: backend, Url: url, RequestSeq: reqSeq}}}})
	m.NoReply = true
	e.env.root.Send(e.env.schedulerPID, m) // no reply: the loop waits for its call's
}

// yielding reads the scheduler's answer at a safe point. With
// Options.DispatchOnTick (fano simulate) the first safe point waits for
// the scheduler's first answer (given as it hands the run out, before the
// loop runs): a task started at a tick that also says it must yield would
// otherwise send its request or yield as the goroutines happened to run.
func (e *executor) yielding(ctx context.Context) bool {
	if e.env.opts.DispatchOnTick {
		select {
		case <-e.answered:
		case <-ctx.Done(): // the loop sees the cause next
		case <-e.gone:
		}
	}
	return e.yield.Load()
}

func (e *executor) finish(res *pb.TaskResult) {
	llm := e.task.LlmAssigned
	// Between the end of the executor and the messages that tell of it
	// the system is not idle: the simulator must not move the clock there.
	e.env.offActor.Add(1)
	defer e.env.offActor.Add(-1)
	e.env.executors.ended() // first: the scheduler's next dispatch counts the free place
	// The run's slot on llm goes back through the scheduler, which hands
	// it to the next task in the same message to the allocator
	// (schedulerActor.refill).
	done := &pb.TaskComplete{TaskId: e.task.Id, Llm: llm, Result: res, Run: e.runNo}
	// From this executor: the scheduler stops watching this run, not a
	// later one of the same task.
	e.env.root.Send(e.env.schedulerPID, done) // no reply: no envelope
}

func (e *executor) now() int64 { return nanos(e.env.clock.Now()) }

// persist writes task events through the scheduler. After an answer or a
// failed request, whose task the loop reads on, it takes the task back as
// the scheduler holds it once they are applied: the scheduler is the one
// owner of task state. It waits even when ctx is cancelled: a decided
// event is written.
func (e *executor) persist(events ...*pb.Event) ([]uint64, error) {
	m := e.taskEvents(events)
	r, err := ask[*pb.TaskEventsReply](e, e.env.schedulerPID, m)
	return e.persisted(m, r, err)
}

// taskEvents stamps events with the time and says whether the loop reads
// the task back after them.
func (e *executor) taskEvents(events []*pb.Event) *pb.TaskEvents {
	at := e.now()
	m := &pb.TaskEvents{TaskId: e.task.Id, Events: events}
	for _, ev := range events {
		ev.At = at
		m.WantTask = m.WantTask || ev.GetLlmResponseReceived() != nil || ev.GetLlmRequestFailed() != nil
	}
	return m
}

// persisted takes the scheduler's reply to m.
func (e *executor) persisted(m *pb.TaskEvents, r *pb.TaskEventsReply, err error) ([]uint64, error) {
	if err != nil {
		return nil, err
	}
	if err := errorFromWire(r.GetError()); err != nil {
		return nil, err
	}
	if m.WantTask {
		if r.GetTask() == nil {
			return r.GetSeqs(), fmt.Errorf("task %s: gone from the scheduler after its events were applied", e.task.Id)
		}
		e.task = r.Task
	}
	return r.GetSeqs(), nil
}

// runSafely turns a panic in the loop (or a module it calls) into a
// failure of this task instead of the end of the process.
func (e *executor) runSafely(ctx context.Context) (res *pb.TaskResult) {
	defer func() {
		if r := recover(); r != nil {
			e.env.logger.Error().Str("event", "actors.executor.panic").Str("task", e.task.Id).Interface("panic", r).Msg("executor panicked")
			res = e.fail(fmt.Sprintf("executor panicked: %v", r))
		}
	}()
	return e.run(ctx)
}

// run is the action loop. It returns how the task ended. e.task changes
// with every write (persist): its id, type and LLM do not.
func (e *executor) run(ctx context.Context) *pb.TaskResult {
	t := e.task
	maxReq := t.MaxRequests
	if maxReq <= 0 {
		maxReq = int32(e.env.opts.MaxRequests(t.TaskType))
	}
	for {
		if cause := context.Cause(ctx); cause != nil {
			return e.stopped(cause)
		}
		if res := e.held(ctx); res != nil {
			return res
		}
		act, ended, endErr, err := e.nextAction()
		if err != nil {
			return e.fail(fmt.Sprintf("next action: %v", err))
		}
		if ended {
			// The module ended the task as it said it is done: its
			// completion is queued, whatever else happened meanwhile.
			return e.completed(endErr)
		}
		if cause := context.Cause(ctx); cause != nil {
			return e.stopped(cause) // cancelled while the module decided: nothing asked
		}
		switch act.Kind {
		case modules.ActionDone:
			return e.complete()
		case modules.ActionYield:
			if e.yielding(ctx) {
				return e.stopped(errPreempted)
			}
			continue
		case modules.ActionLLMRequest:
		default:
			return e.fail(fmt.Sprintf("unknown action %v", act.Kind))
		}
		if e.task.Conversation.GetTurnCount() >= maxReq {
			// The module wanted more, but the task's request budget is spent.
			// Answered turns count: a request cut off by a crash or failed
			// by the backend is bounded by the retry limits instead.
			return e.complete()
		}
		// Safe point: before a request, a much more urgent task may take the LLM.
		if e.yielding(ctx) {
			return e.stopped(errPreempted)
		}
		if res := e.request(ctx, act); res != nil {
			return res
		}
	}
}

// request sends one prompt and records the outcome. nil means go on.
func (e *executor) request(ctx context.Context, act modules.Action) *pb.TaskResult {
	t := e.task
	llm := t.LlmAssigned
	deep := act.DeepMode || t.RequiresDeepMode
	turn := int32(0)
	var history []gateway.Message
	var web webConversation
	if c := t.Conversation; c != nil {
		turn = c.TurnCount
		web = conversationOn(c, llm, act.Prompt)
		for _, m := range c.Messages {
			history = append(history, gateway.Message{Role: m.Role, Content: m.Content})
		}
	}
	// A backend that says it cannot serve (an open circuit, a login wall)
	// is parked before any quota is charged or request counted, and the
	// task goes to another backend.
	if c := e.env.faults.backendCondition(llm); !takesWork(c.State) {
		e.env.faults.recordOwn(e.askDone, llm, c)
		return e.failover(string(c.State), llm)
	}
	// A later request of this run on a backend the allocator says cannot
	// take one now (paced, parked since the request before) goes
	// elsewhere without writing an intent it would only close again. Not
	// the run's first: the allocator reserved that one for it, and the
	// view already counts the reservation. A backend only held for its
	// pace (its limiter queues already) still serves it when no other
	// backend could now.
	if e.sent > 0 && !deep && e.env.quotaView != nil {
		if normal, _ := e.env.quotaView.canTake(llm); !normal &&
			(!e.env.faults.pacedOnly(llm) || e.env.quotaView.otherCanTake(llm, t)) {
			return e.failover(string(kindQuota), llm)
		}
	}
	seqs, err, qerr := e.intentAndQuota(deep, &pb.Event{Body: &pb.Event_LlmRequestStarted{LlmRequestStarted: &pb.LLMRequestStarted{
		TaskId: t.Id, Llm: llm, Prompt: act.Prompt, DeepMode: deep, Turn: turn, Images: act.Images,
	}}})
	if err != nil {
		return e.pause("wal", time.Time{})
	}
	reqSeq := seqs[len(seqs)-1] // the intent is the last event written
	if qerr != nil {
		// No quota: the request never leaves; close its intent.
		if _, perr := e.persist(&pb.Event{Body: &pb.Event_LlmRequestFailed{LlmRequestFailed: &pb.LLMRequestFailed{
			TaskId: t.Id, Llm: llm, Kind: string(kindQuota), Error: qerr.Error(), RequestSeq: reqSeq, Turn: turn, NotSent: true,
		}}}); perr != nil {
			return e.pause("wal", time.Time{})
		}
		if !deep {
			// Parked since it was chosen: any other free backend will do.
			return e.failover("quota", llm)
		}
		var nq *allocator.NoQuotaError
		if errors.As(qerr, &nq) {
			return e.pause("quota", nq.Until)
		}
		return e.pause("quota", time.Time{})
	}

	// The intent is durable; if writes fail now the call waits for them
	// (its answer could not be saved). A shutdown meanwhile leaves the
	// intent open: recovery asks the request once, it was never sent.
	if err := e.env.storageGate.wait(ctx); errors.Is(err, errShutdown) {
		return e.unwritten(err)
	}
	start := e.env.clock.Now()
	e.sent++
	req := gateway.Request{
		TaskID: t.Id, Module: t.Module, TaskType: t.TaskType, Prompt: act.Prompt,
		History: history, Images: act.Images, DeepMode: deep,
		ConversationURL: web.url, KnownAnswers: web.answers, Interrupted: web.interrupted,
		IntentSeq: reqSeq,
	}
	var addressed chan string
	if web.url == "" && e.addresses(llm) {
		// A new web conversation: its address is recorded as soon as the
		// site gives it (see send), before the answer completes.
		addressed = make(chan string, 1)
		req.ConversationAddressed = func(url string) {
			select {
			case addressed <- url:
			default: // told once; a second telling changes nothing
			}
		}
	}
	resp, err, cause := e.send(ctx, llm, req, addressed, reqSeq)
	if err == nil {
		// A refusal or nothing is no answer: never saved as content.
		if why, bad := e.env.opts.Refusals.Bad(resp.Content); bad {
			err = gateway.Classified(llm, gateway.ErrBadAnswer, "task %s: %s", t.Id, why)
		}
	}
	if err == nil {
		// Not waiting for the answer's fsync: the module's events for it
		// and everything after are queued behind it (see answer).
		ended, endErr, err, perr := e.answer(&pb.Event{Body: &pb.Event_LlmResponseReceived{LlmResponseReceived: &pb.LLMResponseReceived{
			TaskId: t.Id, Llm: llm, Content: resp.Content, Turn: turn, RequestSeq: reqSeq,
			DurationNs: int64(e.env.clock.Since(start)), ConversationUrl: resp.ConversationURL,
			PromptTokens: resp.PromptTokens, CompletionTokens: resp.CompletionTokens,
			PrimedTurns: int32(resp.PrimedTurns), FromPage: resp.FromPage, Incomplete: resp.Incomplete,
		}}}, resp.Content)
		if perr != nil {
			return e.pause("wal", time.Time{})
		}
		e.env.faults.noteLearnedRate(llm)
		e.env.faults.answered(llm)
		if err != nil {
			if modules.IsValidation(err) {
				return e.retryValidation("validation: "+err.Error(), "")
			}
			return e.fail(fmt.Sprintf("process answer: %v", err))
		}
		if ended {
			// The module's completion is queued with the answer's events,
			// whatever happened meanwhile (as with NextAction.end_if_done).
			return e.completed(endErr)
		}
		return nil
	}

	// The call failed: read it once and route it by its class
	// (docs/architecture.md, Backend conditions). The task's own deadline
	// (a pipeline step's timeout) is an attempt of the task, not a fault
	// of the backend.
	ft := e.env.faults.readFault(llm, err, cause)
	if errors.Is(cause, errTimeout) && t.RequestTimeoutMs > 0 {
		ft = fault{kind: KindTimeout}
	}
	route := routeOf(ft)
	// A request our side refused before it left (an open circuit, a
	// paused limiter) is neither charged nor counted; nor is one a
	// person's condition refused (a spent credit, a login wall).
	release := ft.notSent || !route.charged
	if _, perr := e.persist(&pb.Event{Body: &pb.Event_LlmRequestFailed{LlmRequestFailed: &pb.LLMRequestFailed{
		TaskId: t.Id, Llm: llm, Kind: string(ft.kind), Error: err.Error(), RequestSeq: reqSeq, Turn: turn, NotSent: release,
	}}}); perr != nil {
		return e.pause("wal", time.Time{})
	}
	if release {
		// Nobody reads the answer: told, not asked.
		e.env.root.Send(e.env.allocatorPID, &pb.ReleaseQuota{Backend: llm, Deep: deep, TaskId: t.Id})
	}
	e.env.reportCall(llm, string(ft.kind))
	if ft.kind == KindTimeout {
		return e.timedOut(maxRequests(t, *e.env.opts))
	}
	switch route.task {
	case outcomeAgain:
		// The failure dropped this backend's conversation (scheduler
		// apply): the next turn opens a fresh one, primed with the
		// task's history.
		return nil
	case outcomeStop:
		return e.stopped(context.Cause(ctx))
	case outcomeFailover:
		e.env.faults.park(e.askDone, llm, t.Id, start, ft)
		return e.failover(string(ft.kind), llm)
	case outcomeBackoff:
		e.env.faults.park(e.askDone, llm, t.Id, start, ft)
		// A passing fault delays the backend, not the task: when another
		// backend may serve it now it goes there at once; else it backs
		// off (60/300/900 s). A call that hung past our deadline is
		// offered to another backend first; other failures from the
		// second in a row on.
		elsewhere := e.env.quotaView != nil && e.env.quotaView.otherCanTake(llm, e.task)
		return e.retry(err.Error(), llm, errors.Is(cause, errTimeout), elsewhere)
	case outcomeElsewhere:
		return e.retryValidation(string(ft.kind)+": "+err.Error(), llm)
	default:
		return e.fail(err.Error())
	}
}

// intentAndQuota writes the request intent and has the allocator charge
// the quota at the same time: both are durable before the request leaves
// (usage is recorded first), and neither waits for the other's fsync.
// The replies come in either order.
//
// The intent is queued in the scheduler's journal from here, not sent
// through the scheduler's mailbox: the scheduler has nothing to decide
// for it, and in the burst of work after each commit its mailbox is the
// slower way. Its order in the log still follows the run's start, which
// the scheduler queued in the same journal before it started this
// executor. The scheduler applies it when it is durable, like its own;
// until then it decides on the task as if the start were already
// applied. A journal that is closing (the scheduler stops or restarts)
// refuses it, and it goes through the scheduler's mailbox instead.
func (e *executor) intentAndQuota(deep bool, intent *pb.Event) (seqs []uint64, err, quotaErr error) {
	e.tell(e.env.allocatorPID, &pb.UseQuota{Backend: e.task.LlmAssigned, Deep: deep, TaskId: e.task.Id})
	m := e.taskEvents([]*pb.Event{intent})
	if e.env.hookBeforeIntent != nil {
		e.env.hookBeforeIntent(e.task.Id)
	}
	if !e.queueIntent(m) {
		e.tell(e.env.schedulerPID, m)
	}
	var evs *pb.TaskEventsReply
	for range 2 {
		r, rerr := e.reply()
		if rerr != nil {
			return nil, rerr, rerr
		}
		switch r := r.(type) {
		case *pb.Done:
			quotaErr = errorFromWire(r.Error)
		case *pb.TaskEventsReply:
			evs = r
		default:
			bad := fmt.Errorf("task %s: unexpected reply %T to the request intent", e.task.Id, r)
			return nil, bad, bad
		}
	}
	seqs, err = e.persisted(m, evs, nil)
	return seqs, err, quotaErr
}

// queueIntent queues m, a request's intent, in the scheduler's journal;
// its answer comes to this executor once it is durable, as the
// scheduler's would (false: the journal is closing, nothing queued).
func (e *executor) queueIntent(m *pb.TaskEvents) bool {
	j := e.env.schedulerJournal.Load()
	if j == nil {
		return false
	}
	self, root := e.self, e.env.root
	return j.offer(&batch{events: m.Events, durable: func(seqs []uint64, err error) {
		root.Send(self, &pb.TaskEventsReply{Seqs: seqs, Error: errorToWire(err)})
	}})
}

// stopped ends the run for a cancellation cause: a shutdown or preemption
// pauses the task; a person's cancel cancels it.
func (e *executor) stopped(cause error) *pb.TaskResult {
	var cu *cancelledByUser
	if errors.As(cause, &cu) {
		_ = e.moduleEnd(true, "cancelled: "+cu.reason)
		if _, err := e.persist(&pb.Event{Body: &pb.Event_TaskCancelled{TaskCancelled: &pb.TaskCancelled{TaskId: e.task.Id, Reason: cu.reason}}}); err != nil {
			return &pb.TaskResult{Paused: true, Reason: "wal", Error: err.Error()}
		}
		return &pb.TaskResult{Cancelled: true, Reason: cu.reason}
	}
	reason := "shutdown"
	if errors.Is(cause, errPreempted) {
		reason = "preempted"
	}
	return e.pause(reason, time.Time{})
}

// held parks the run while WAL writes fail (the storage gate is shut),
// writing nothing, and returns nil to go on once they succeed. A
// shutdown meanwhile ends the run unwritten; a person's cancel or a
// preemption is carried out once writes go through.
func (e *executor) held(ctx context.Context) *pb.TaskResult {
	err := e.env.storageGate.wait(ctx)
	if err == nil {
		return nil
	}
	if errors.Is(err, errShutdown) {
		return e.unwritten(err)
	}
	if werr := e.env.storageGate.wait(e.env.baseCtx); werr != nil {
		return e.unwritten(werr)
	}
	return e.stopped(err)
}

// unwritten ends a run held by a WAL fault without writing: the log
// still says RUNNING and recovery pauses the task at the next start.
func (e *executor) unwritten(cause error) *pb.TaskResult {
	return &pb.TaskResult{Paused: true, Reason: "shutdown", Error: fmt.Sprintf("%v while WAL writes fail: nothing written", cause)}
}

func (e *executor) pause(reason string, until time.Time) *pb.TaskResult {
	if _, err := e.persist(&pb.Event{Body: &pb.Event_TaskPaused{TaskPaused: &pb.TaskPaused{TaskId: e.task.Id, Reason: reason, NotBefore: nanos(until)}}}); err != nil {
		// Not written: the task stays RUNNING in the log and recovery pauses it.
		return &pb.TaskResult{Paused: true, Reason: reason, Error: err.Error()}
	}
	return &pb.TaskResult{Paused: true, Reason: reason}
}

// retry schedules the task again after the backoff for its run of
// consecutive failed requests (60/300/900 s, then 900 s again: an answer
// resets the run), or at once avoiding llm when another backend may take
// it now (elsewhere). A flaky backend never fails the task; from the
// second failure in a row another backend is preferred.
func (e *executor) retry(msg, llm string, hung, elsewhere bool) *pb.TaskResult {
	backoff := e.env.opts.RetryBackoff
	n := min(int(e.task.Attempts), len(backoff)-1)
	avoid := ""
	if e.task.Attempts > 0 || hung || elsewhere {
		avoid = llm
	}
	at := e.env.clock.Now().Add(backoff[n])
	if elsewhere {
		at = e.env.clock.Now() // another backend may take it now
	}
	if _, err := e.persist(&pb.Event{Body: &pb.Event_TaskRetryScheduled{TaskRetryScheduled: &pb.TaskRetryScheduled{
		TaskId: e.task.Id, Error: msg, NotBefore: nanos(at), AvoidLlm: avoid}}}); err != nil {
		return &pb.TaskResult{Paused: true, Reason: "wal", Error: err.Error()}
	}
	return &pb.TaskResult{Paused: true, Reason: "retry", Error: msg}
}

// timedOut handles a request past the task's own deadline: it counts as
// one of the task's max requests (with the answered ones and earlier
// failed attempts); the task is asked again at once while requests
// remain, and fails with "timeout" after the last.
func (e *executor) timedOut(maxReq int32) *pb.TaskResult {
	t := e.task
	used := t.Conversation.GetTurnCount() + t.Attempts + 1
	limit := time.Duration(t.RequestTimeoutMs) * time.Millisecond
	if used >= maxReq {
		return e.fail(fmt.Sprintf("%s: no answer within %s (%d of %d attempts)", KindTimeout, limit, used, maxReq))
	}
	msg := fmt.Sprintf("%s: no answer within %s (attempt %d of %d)", KindTimeout, limit, used, maxReq)
	if _, err := e.persist(&pb.Event{Body: &pb.Event_TaskRetryScheduled{TaskRetryScheduled: &pb.TaskRetryScheduled{
		TaskId: t.Id, Error: msg, NotBefore: nanos(e.env.clock.Now())}}}); err != nil {
		return &pb.TaskResult{Paused: true, Reason: "wal", Error: err.Error()}
	}
	return &pb.TaskResult{Paused: true, Reason: "retry", Error: msg}
}

// KindTimeout starts the failure reason of a task whose requests all
// passed its own deadline (Task.request_timeout_ms).
const KindTimeout = "timeout"

// maxRequests is the task's request budget: its own, or its type's.
func maxRequests(t *pb.Task, o Options) int32 {
	if t.MaxRequests > 0 {
		return t.MaxRequests
	}
	return int32(o.MaxRequests(t.TaskType))
}

// retryValidation retries at once an answer that failed validation or was
// no answer at all, on another backend when avoid names the one that gave
// it; the task fails once its own validation budget is spent.
func (e *executor) retryValidation(msg, avoid string) *pb.TaskResult {
	budget := e.env.opts.ValidationRetries
	switch {
	case budget == 0:
		budget = len(e.env.opts.RetryBackoff)
	case budget < 0:
		budget = 0 // max_task_retries: 0, the first failed answer fails the task
	}
	if n := int(e.task.ValidationAttempts); n >= budget {
		return e.fail(fmt.Sprintf("gave up after %d answers failed validation: %s", n+1, msg))
	}
	if _, err := e.persist(&pb.Event{Body: &pb.Event_TaskRetryScheduled{TaskRetryScheduled: &pb.TaskRetryScheduled{
		TaskId: e.task.Id, Error: msg, NotBefore: nanos(e.env.clock.Now()), Validation: true, AvoidLlm: avoid}}}); err != nil {
		return &pb.TaskResult{Paused: true, Reason: "wal", Error: err.Error()}
	}
	return &pb.TaskResult{Paused: true, Reason: "retry", Error: msg}
}

// failover pauses the task, uncounted, for another eligible backend: it
// runs again as soon as one is free (its own backend, once usable again,
// is taken only if no other is).
func (e *executor) failover(reason, llm string) *pb.TaskResult {
	if _, err := e.persist(&pb.Event{Body: &pb.Event_TaskPaused{TaskPaused: &pb.TaskPaused{
		TaskId: e.task.Id, Reason: reason, AvoidLlm: llm}}}); err != nil {
		return &pb.TaskResult{Paused: true, Reason: reason, Error: err.Error()}
	}
	return &pb.TaskResult{Paused: true, Reason: reason}
}

// complete ends the task without waiting for an fsync: the module's
// completion events are only queued in the WAL when it answers, and the
// task's completion, queued after them, is handed to the scheduler with no
// reply asked. A crash can lose the completion but never keep it without
// the module's events (the log keeps call order); a task whose completion
// was lost is RUNNING at the next start, is paused by recovery, and its
// module, which has its answers, ends it again without a request.
func (e *executor) complete() *pb.TaskResult {
	pid, err := e.modulePID()
	if err == nil {
		err = e.askDone(pid, &pb.ModuleEnd{Task: e.task, ReplyWhenQueued: true})
	}
	return e.completed(err)
}

// completed completes the task once the module has ended it (err: it
// could not).
func (e *executor) completed(err error) *pb.TaskResult {
	if err != nil {
		return e.fail(fmt.Sprintf("completion: %v", err))
	}
	m := e.taskEvents([]*pb.Event{{Body: &pb.Event_TaskCompleted{TaskCompleted: &pb.TaskCompleted{TaskId: e.task.Id}}}})
	m.NoReply = true
	// Before finish's TaskComplete, from the same goroutine: the
	// scheduler queues the completion before it hears the run ended.
	e.env.root.Send(e.env.schedulerPID, m) // no reply: no envelope
	return &pb.TaskResult{Completed: true}
}

func (e *executor) fail(msg string) *pb.TaskResult {
	_ = e.moduleEnd(true, msg)
	if _, err := e.persist(&pb.Event{Body: &pb.Event_TaskFailed{TaskFailed: &pb.TaskFailed{TaskId: e.task.Id, Error: msg}}}); err != nil {
		return &pb.TaskResult{Paused: true, Reason: "wal", Error: err.Error()}
	}
	return &pb.TaskResult{Failed: true, Error: msg}
}

// webConversation is what a browser backend needs to continue a task's
// conversation on it.
type webConversation struct {
	url         string
	answers     int
	interrupted bool
}

// conversationOn returns the task's own conversation on backend llm: a
// conversation belongs to its backend, so a task that moved starts a new
// one there (primed with its history by the backend).
func conversationOn(c *pb.ConversationState, llm, prompt string) webConversation {
	if bc := c.GetBackends()[llm]; bc != nil {
		return webConversation{url: bc.Url, answers: int(bc.Answers),
			interrupted: bc.InterruptedPrompt != "" && bc.InterruptedPrompt == prompt}
	}
	if len(c.GetBackends()) == 0 && c.GetUrl() != "" {
		// Recorded before conversations were kept per backend: the URL is
		// the last answering backend's.
		for i := len(c.Messages) - 1; i >= 0; i-- {
			if m := c.Messages[i]; m.Role == "assistant" {
				if m.Llm == llm {
					return webConversation{url: c.Url}
				}
				break
			}
		}
	}
	return webConversation{}
}
