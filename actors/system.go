package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"

	"fano/actors/allocator"
	"fano/actors/scheduler"
	"fano/gateway"
	"fano/logging"
	"fano/modules"
	"fano/pb"
)

// System is a running fano: the actor tree over one WAL, and the facade
// the CLI, app/, control/, health/ and simulate/ use. Its methods are safe
// for concurrent use; each turns a call into messages to the actors. What
// is not the facade lives in the types it holds, one per concern
// (facade_test.go keeps it so).
type System struct {
	// What it was started with (defaults filled in).
	opts   Options
	log    Store
	clock  clockwork.Clock
	logger zerolog.Logger

	// The actor tree; every PID is fixed in Start before any actor runs.
	as                                          *actor.ActorSystem
	root                                        *actor.RootContext
	orchestratorPID, schedulerPID, allocatorPID *actor.PID
	modulePIDs, gatewayPIDs                     map[string]*actor.PID
	gateways                                    map[string]*gatewayCalls // by backend: its calls, shared by its host's instances
	// moduleOffers: per module, its host's open offers (see moduleOffers;
	// read by tests under the module's desk guard).
	moduleOffers map[string]*moduleOffers
	// moduleHosts: per module, its host instance while it runs (see
	// moduleHost.nextActionNow); made at Start, never changed after.
	moduleHosts map[string]*atomic.Pointer[moduleHost]

	// Each concern owns its facts in a type of its own (see each type's
	// doc for who calls it from which goroutine); System only holds them.
	recovery    *recovery        // rebuilds the owners, at start and after a restart
	desks       *desks           // per owner: the guard and the journal's outbox
	checkpoints *checkpoints     // writes the owners' snapshots
	inputs      *schedulerInputs // what the scheduler reads on its tick
	state       *stateAccess     // the facade's reads of the owners' state
	asks        *asker           // the facade's requests and their futures
	faults      *backendFaults   // backend faults to the allocator
	execEnv     *executorEnv     // all an executor sees of the system
	executors   *liveExecutors   // executors at work, and who waits for them
	mailboxes   *mailboxes       // each actor's mailbox depth
	notices     *notices         // subscribers to applied events and updates
	storageGate *storageGate     // holds running tasks while WAL writes fail

	// Whether new work starts (see Accepting): held by the operator or
	// the health monitor (accepting), or by a WAL write fault
	// (storageHalted, see onStorage).
	accepting, storageHalted atomic.Bool
	// offActor counts work handed off the actors that will come back as a
	// message: journal batches not yet delivered, an archive write under
	// way; callsWaiting are the task calls blocked on the clock
	// (CallWaiting). fano simulate reads both (see QueuedMessages).
	offActor     atomic.Int64
	callsWaiting waitingCalls
	// callBase is the parent of every call's context: it carries
	// callsWaiting, made once rather than once a call.
	callBase context.Context

	report     *RecoveryReport
	baseCancel context.CancelCauseFunc // cancels every executor's context
	dead       chan struct{}           // closed when the system has stopped
	stopOnce   sync.Once
	stopErr    error
	loopsDone  sync.WaitGroup
	stopLoops  chan struct{}
}

// Recover runs recovery (checkpoints, replay, validation and repair)
// without starting any actor: `fano recover`.
func Recover(opts Options) (*RecoveryReport, error) {
	s, err := newSystem(opts)
	if err != nil {
		return nil, err
	}
	return s.recovery.recoverAll()
}

func newSystem(opts Options) (*System, error) {
	opts.defaults()
	if opts.Log == nil {
		return nil, errors.New("actors: no WAL")
	}
	s := &System{
		opts: opts, log: opts.Log, clock: opts.Clock, logger: opts.Logger,
		modulePIDs: map[string]*actor.PID{}, gatewayPIDs: map[string]*actor.PID{}, gateways: map[string]*gatewayCalls{}, moduleOffers: map[string]*moduleOffers{},
		moduleHosts: map[string]*atomic.Pointer[moduleHost]{},
		dead:        make(chan struct{}),
		stopLoops:   make(chan struct{}), executors: newLiveExecutors(), inputs: newSchedulerInputs(),
		storageGate: newStorageGate(), mailboxes: &mailboxes{},
		notices: &notices{observe: opts.Observe},
	}
	s.callsWaiting.idle = &s.mailboxes.idle
	s.callBase = withWaitCounter(context.Background(), &s.callsWaiting)
	s.desks = &desks{logger: opts.Logger, notices: s.notices}
	s.checkpoints = &checkpoints{log: opts.Log, publish: s.Publish}
	s.faults = &backendFaults{backends: opts.Backends, clock: opts.Clock, credentialsRecheck: opts.CredentialsRecheck,
		logger: opts.Logger, publish: s.Publish}
	var err error
	if s.recovery, err = newRecovery(opts, s.Publish); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, b := range opts.Backends {
		if seen[b.Name()] {
			return nil, fmt.Errorf("actors: backend %q configured twice", b.Name())
		}
		seen[b.Name()] = true
	}
	for _, bc := range opts.Allocator.Backends {
		if !seen[bc.Name] {
			return nil, fmt.Errorf("actors: allocator names backend %q that has no gateway", bc.Name)
		}
	}
	s.accepting.Store(!opts.HoldWork)
	return s, nil
}

// Start recovers and starts the actor tree.
func Start(opts Options) (*System, error) {
	s, err := newSystem(opts)
	if err != nil {
		return nil, err
	}
	if s.report, err = s.recovery.recoverAll(); err != nil {
		return nil, err
	}
	if s.recovery.initAlloc != nil {
		s.faults.seedLearnedRates(s.recovery.initAlloc.book.LearnedRates())
	}
	baseCtx, baseCancel := context.WithCancelCause(context.Background())
	s.baseCancel = baseCancel
	s.as = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logging.Slog(s.logger) }))
	shrinkRegistry(s.as, registryTables)
	s.root = s.as.Root
	s.asks = &asker{root: s.root, dead: s.dead}
	// Every PID is known before any actor starts, so actors read them
	// without a race: a child of the orchestrator is "orchestrator/<name>".
	s.orchestratorPID = s.as.NewLocalPID("orchestrator")
	s.schedulerPID = s.as.NewLocalPID("orchestrator/scheduler")
	s.allocatorPID = s.as.NewLocalPID("orchestrator/allocator")
	s.faults.root, s.faults.allocator = s.root, s.allocatorPID
	for _, b := range s.opts.Backends {
		s.gatewayPIDs[b.Name()] = s.as.NewLocalPID("orchestrator/gateway-" + b.Name())
		s.gateways[b.Name()] = &gatewayCalls{sys: s, backend: b}
	}
	for _, m := range s.opts.Modules {
		s.modulePIDs[m.Name()] = s.as.NewLocalPID("orchestrator/module-" + m.Name())
		s.moduleOffers[m.Name()] = &moduleOffers{}
		s.moduleHosts[m.Name()] = &atomic.Pointer[moduleHost]{}
	}
	s.execEnv = &executorEnv{baseCtx: baseCtx, root: s.root, registry: s.as.ProcessRegistry, clock: s.clock, logger: s.logger, opts: &s.opts,
		schedulerPID: s.schedulerPID, allocatorPID: s.allocatorPID,
		modulePIDs: s.modulePIDs, moduleHosts: s.moduleHosts, gateways: s.gateways, offActor: &s.offActor, executors: s.executors,
		faults: s.faults, storageGate: s.storageGate, quotaView: s.inputs}
	s.state = &stateAccess{asks: s.asks, desks: s.desks, schedulerPID: s.schedulerPID, allocatorPID: s.allocatorPID, modulePIDs: s.modulePIDs}
	// A fault that began before the start holds work from the first
	// message on: the tree may dispatch as soon as it runs.
	if s.opts.Storage != nil {
		if since, _, err := s.opts.Storage.Fault(); err != nil {
			s.storageHalted.Store(true)
			s.storageGate.shut(err, since)
		}
	}
	ready := make(chan struct{})
	props, count := counted(func() actor.Actor { return &orchestrator{sys: s, ready: ready} },
		actor.WithSupervisor(actor.NewOneForOneStrategy(10, time.Minute, func(reason any) actor.Directive {
			s.logger.Error().Str("event", "actors.orchestrator.child_failed").Interface("reason", reason).Msg("child actor failed; restarting it")
			return actor.RestartDirective
		})))
	pid, err := s.root.SpawnNamed(props, "orchestrator")
	if err != nil {
		return nil, fmt.Errorf("actors: spawn orchestrator: %w", err)
	}
	if pid.Id != s.orchestratorPID.Id {
		return nil, fmt.Errorf("actors: orchestrator spawned as %q", pid.Id)
	}
	s.mailboxes.track(pid.Id, count)
	<-ready
	for _, pid := range s.modulePIDs { // every host exists now: flows may start
		s.root.Send(pid, &pb.SendOutbox{})
	}
	if s.opts.Storage != nil {
		s.opts.Storage.Subscribe(s.onStorage)
		// The fault may have begun or ended before we subscribed.
		since, _, err := s.opts.Storage.Fault()
		s.storageHalted.Store(err != nil)
		if err != nil {
			s.storageGate.shut(err, since)
		} else {
			s.storageGate.reopen()
		}
	}
	s.startLoops()
	return s, nil
}

// Report is what recovery found and did at start.
func (s *System) Report() *RecoveryReport { return s.report }

func (s *System) startLoops() {
	tickers := []struct {
		every time.Duration
		fn    func()
	}{
		{s.opts.TickInterval, func() { sweepThenTick(s) }},
	}
	if s.opts.CheckpointInterval > 0 {
		tickers = append(tickers, struct {
			every time.Duration
			fn    func()
		}{s.opts.CheckpointInterval, func() {
			if err := s.Checkpoint(); err != nil {
				s.logger.Error().Err(err).Str("event", "actors.orchestrator.checkpoint_failed").Msg("checkpoint")
			}
		}})
	}
	for _, tk := range tickers {
		s.loopsDone.Add(1)
		go func(every time.Duration, fn func()) {
			defer s.loopsDone.Done()
			t := s.opts.Clock.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-t.Chan():
					fn()
				case <-s.stopLoops:
					return
				}
			}
		}(tk.every, tk.fn)
	}
}

// tick drives time-based work: window resets, priorities, dispatch,
// resumption of paused tasks and module proposals.
func (s *System) tick() {
	// Busy from the tick to the message it sends: fano simulate must not
	// move its clock in between.
	s.offActor.Add(1)
	defer s.offActor.Add(-1)
	now := nanos(s.clock.Now())
	// One chain per tick: the allocator rebuilds the quota view, then the
	// scheduler reads it (and the modules' backlogs), then the module
	// hosts propose. Sent to all at once, what each saw of the others'
	// work on the same tick was a matter of thread timing.
	s.root.Send(s.allocatorPID, &pb.Tick{Now: now})
}

// tickModules hands a tick on to the module hosts (from the scheduler).
func (s *System) tickModules(t *pb.Tick) {
	for _, pid := range s.modulePIDs {
		s.root.Send(pid, t)
	}
}

// Tick runs one tick at once (tests on a fake clock, and after a submit),
// with the backends' sweep before it as the periodic tick has.
func (s *System) Tick() { sweepThenTick(s) }

// sweepThenTick is the periodic tick: first the backends' own conditions
// and due re-checks (backendFaults.sweep), so the tick's dispatch already
// avoids a backend that cannot serve; then the tick. Not from the WAL
// writer's goroutine (onStorage): the sweep may wait for a write.
func sweepThenTick(s *System) {
	s.faults.sweep(s.asks.requestDone, s.state.allocatorStatus(s.clock.Now()), s.execEnv.baseCtx)
	s.tick()
}

// SetAccepting stops (false) or resumes (true) the start of new work, as
// the health monitor does on low disk. Running tasks go on.
func (s *System) SetAccepting(on bool) {
	s.accepting.Store(on)
	if on {
		s.tick()
	}
}

// Backends are the gateways fano runs (status reads their optional
// State() string, e.g. a circuit breaker's).
func (s *System) Backends() []gateway.Backend { return s.opts.Backends }

// ModuleNames lists the configured modules in the order given.
func (s *System) ModuleNames() []string {
	out := make([]string, len(s.opts.Modules))
	for i, m := range s.opts.Modules {
		out[i] = m.Name()
	}
	return out
}

// Clock is the system's clock.
func (s *System) Clock() clockwork.Clock { return s.clock }

// Log is the system's WAL (read-only uses: stats).
func (s *System) Log() Store { return s.log }

// Checkpoint asks every owner of state to save its snapshot, then compacts
// the WAL when it has grown past the threshold.
func (s *System) Checkpoint() error {
	pids := []*actor.PID{s.schedulerPID, s.allocatorPID}
	for _, pid := range s.modulePIDs {
		pids = append(pids, pid)
	}
	var errs []error
	for _, pid := range pids {
		err := s.asks.requestDone(pid, &pb.Checkpoint{})
		if errors.Is(err, errStopping) {
			return errors.New("checkpoint: system stopped")
		}
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if s.opts.CompactThreshold > 0 {
		if size, err := s.log.Size(); err == nil && size > s.opts.CompactThreshold {
			if _, err := s.log.Compact(); err != nil {
				return fmt.Errorf("compact: %w", err)
			}
		}
	}
	return nil
}

// WithModule runs fn on a module's state between two messages of its
// host, after every message sent to it before and with every event it
// queued before applied: a task seen completed has its module's events
// for it there too. fn must only read. It is for in-process tooling only
// (the pipeline CLI's progress and summary, tests): a reader that could
// be elsewhere uses Query.
func (s *System) WithModule(name string, fn func(modules.Module)) error {
	pid, ok := s.modulePIDs[name]
	if !ok {
		return fmt.Errorf("no module %q", name)
	}
	if _, err := request[*pb.BarrierReply](s.asks, context.Background(), pid, &pb.Barrier{Applied: true}); err != nil {
		return err
	}
	g := &s.desks.desk(moduleOwner(name)).guard
	g.Lock()
	defer g.Unlock()
	for _, m := range s.opts.Modules {
		if m.Name() == name {
			fn(m)
		}
	}
	return nil
}

// CommandError says a module refused a command: bad input (Reason is
// the module's own message) or, with Unsupported, a command it does not
// take. Nothing was written.
type CommandError struct {
	Module, Command, Reason string
	Unsupported             bool
}

func (e *CommandError) Error() string {
	return fmt.Sprintf("module %s: command %s: %s", e.Module, e.Command, e.Reason)
}

// Unwrap makes an unsupported command match modules.ErrUnsupportedCommand.
func (e *CommandError) Unwrap() error {
	if e.Unsupported {
		return modules.ErrUnsupportedCommand
	}
	return nil
}

// Command sends a command to its module's host, which has the module
// decide events on its current state and persists them; it returns once
// they are applied, with their types and the command's result. A
// refusal is a *CommandError, with nothing written.
func (s *System) Command(cmd *pb.ModuleCommand) (*pb.ModuleCommandReply, error) {
	name := modules.CommandName(cmd)
	pid, ok := s.modulePIDs[cmd.GetModule()]
	if !ok {
		return nil, fmt.Errorf("command %s: no module %q", name, cmd.GetModule())
	}
	r, err := request[*pb.ModuleCommandReply](s.asks, context.Background(), pid, cmd)
	if err != nil {
		return nil, fmt.Errorf("module %s: command %s: %w", cmd.GetModule(), name, err)
	}
	if r.Refused != "" || r.Unsupported {
		return r, &CommandError{Module: cmd.GetModule(), Command: name, Reason: r.Refused, Unsupported: r.Unsupported}
	}
	if r.Error != nil {
		return r, fmt.Errorf("module %s: command %s: %w", cmd.GetModule(), name, errorFromWire(r.Error))
	}
	return r, nil
}

// Query asks a module's host for a view of the module's current state,
// after every message sent to the host before.
func (s *System) Query(q *pb.ModuleQuery) (*pb.ModuleView, error) {
	pid, ok := s.modulePIDs[q.GetModule()]
	if !ok {
		return nil, fmt.Errorf("query: no module %q", q.GetModule())
	}
	v, err := request[*pb.ModuleView](s.asks, context.Background(), pid, q)
	if err != nil {
		return nil, fmt.Errorf("module %s: query: %w", q.GetModule(), err)
	}
	return v, nil
}

// Deliver hands a flow message to the host of the module it is for, as
// the sender's host would (a sender elsewhere, tests of one module). The
// receiver's acknowledgment goes to the sender's host, if it runs here.
func (s *System) Deliver(msg *pb.ModuleMessage) error {
	pid, ok := s.modulePIDs[msg.GetTo()]
	if !ok {
		return fmt.Errorf("flow message %q: no module %q", msg.GetId(), msg.GetTo())
	}
	s.root.Send(pid, msg)
	return nil
}

// Submit queues a task (idempotent by its id) and waits until it is durable.
func (s *System) Submit(t *pb.Task) (*pb.TaskSubmitReply, error) {
	res, err := s.root.RequestFuture(s.schedulerPID, &pb.TaskSubmit{Task: t}, 30*time.Second).Result()
	if err != nil {
		return nil, fmt.Errorf("submit %s: %w", t.GetId(), err)
	}
	return res.(*pb.TaskSubmitReply), nil
}

// SubmitBatch queues tasks as Submit does, each with its own reply in the
// same order, and waits once: the accepted ones are written together, in
// one journal batch, and durable when it returns.
func (s *System) SubmitBatch(tasks []*pb.Task) ([]*pb.TaskSubmitReply, error) {
	res, err := s.root.RequestFuture(s.schedulerPID, &pb.TaskSubmitBatch{Tasks: tasks}, 30*time.Second).Result()
	if err != nil {
		return nil, fmt.Errorf("submit %d tasks: %w", len(tasks), err)
	}
	return res.(*pb.TaskSubmitBatchReply).GetReplies(), nil
}

// Cancel cancels a task: at once if it waits, through its executor if it runs.
func (s *System) Cancel(id, reason string) error {
	return s.asks.requestDone(s.schedulerPID, &pb.CancelTask{TaskId: id, Reason: reason})
}

// PauseBackend and ResumeBackend are the operator's switch for one LLM.
func (s *System) PauseBackend(name, reason string, pause bool) error {
	if !pause {
		// A resume also re-checks the backend: `fano backend resume`
		// after a key was fixed.
		s.RecheckBackends(name)
	}
	return s.asks.requestDone(s.allocatorPID, &pb.BackendPause{Backend: name, Reason: reason, Pause: pause})
}

// Task returns a copy of one task; a finished task that left memory is
// read back from the archive.
func (s *System) Task(id string) (*pb.Task, bool) {
	var t *pb.Task
	var ok bool
	s.state.withScheduler(func(st *scheduler.State) { t, ok = st.Task(id) })
	if ok && !t.Archived {
		return s.storageGate.shown(t), true
	}
	var light *pb.Task
	if ok {
		light = t
	}
	at, found, err := ArchivedTask(s.log, light, id)
	if err != nil || !found {
		return t, ok
	}
	return at, true
}

// ArchivedTask reads a finished task back from the WAL's archive: one
// archived at its completion (conversation included; light is its copy
// in memory, if any) or forgotten after its retention.
func ArchivedTask(log ArchiveStore, light *pb.Task, id string) (*pb.Task, bool, error) {
	key := archiveKey(id)
	if light.GetArchived() {
		key = completedKey(light)
	}
	data, found, err := log.Archived(key)
	if err == nil && found && len(data) > 0 && data[0] == archiveRef {
		data, found, err = log.Archived(string(data[1:]))
	}
	if err != nil || !found {
		return nil, false, err
	}
	var at pb.Task
	if err := proto.Unmarshal(data, &at); err != nil {
		return nil, false, fmt.Errorf("archived task %s: %w", id, err)
	}
	return &at, true, nil
}

// Tasks returns copies of the tasks that match, as people see them: a
// running task held by a WAL fault is PAUSED (see storageGate).
func (s *System) Tasks(filter func(*pb.Task) bool, limit int) []*pb.Task {
	var out []*pb.Task
	if held, _ := s.storageGate.fault(); held != nil && filter != nil {
		inner := filter
		filter = func(t *pb.Task) bool { return inner(s.storageGate.shown(t)) }
	}
	s.state.withScheduler(func(st *scheduler.State) { out = st.Tasks(filter, limit) })
	for i, t := range out {
		out[i] = s.storageGate.shown(t)
	}
	return out
}

// Counts returns module -> state -> number of tasks (running tasks held
// by a WAL fault count as paused).
func (s *System) Counts() map[string]map[pb.TaskState]int {
	var out map[string]map[pb.TaskState]int
	s.state.withScheduler(func(st *scheduler.State) { out = st.Counts() })
	if held, _ := s.storageGate.fault(); held != nil {
		for _, byState := range out {
			if n := byState[pb.TaskState_TASK_STATE_RUNNING]; n > 0 {
				byState[pb.TaskState_TASK_STATE_PAUSED] += n
				delete(byState, pb.TaskState_TASK_STATE_RUNNING)
			}
		}
	}
	return out
}

// Quotas returns every backend's quota figures.
// A backend that knows it cannot serve now (a login wall, an unset key,
// an open circuit) shows that state even before a task met it.
func (s *System) Quotas() []allocator.BackendStatus {
	var out []allocator.BackendStatus
	s.state.withAllocator(func(b *allocator.Book) { out = b.Status(s.clock.Now()) })
	s.faults.overlayBackendFacts(out)
	return out
}

// Idle reports whether no task is waiting, running or paused and no
// executor runs: what `fano run --until-idle` waits for.
func (s *System) Idle() bool {
	if s.executors.Load() > 0 {
		return false
	}
	idle := true
	s.state.withScheduler(func(st *scheduler.State) {
		for _, byState := range st.Counts() {
			for state, n := range byState {
				if n > 0 && !finishedState(state) {
					idle = false
				}
			}
		}
	})
	return idle
}

func finishedState(st pb.TaskState) bool {
	return st == pb.TaskState_TASK_STATE_COMPLETED || st == pb.TaskState_TASK_STATE_FAILED || st == pb.TaskState_TASK_STATE_CANCELLED
}

// WaitIdle blocks until Idle, woken by every executor that ends, or
// until ctx is done.
func (s *System) WaitIdle(ctx context.Context) error {
	for {
		ch := s.executors.finishSignal()
		if s.Idle() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.dead:
			return errors.New("fano stopped")
		}
	}
}

// Running is the number of executors at work.
func (s *System) Running() int { return int(s.executors.Load()) }

// Stop shuts down: no new work, running tasks cancelled and PAUSED (never
// FAILED), a checkpoint, then the actors stop. It returns within about
// opts.ShutdownTimeout even while calls are in flight.
func (s *System) Stop() error {
	s.stopOnce.Do(func() { s.stopErr = s.stop() })
	return s.stopErr
}

func (s *System) stop() error {
	start := time.Now()
	s.accepting.Store(false)
	_ = s.asks.requestDone(s.schedulerPID, &pb.Shutdown{})
	s.baseCancel(errShutdown)
	deadline := time.NewTimer(s.opts.ShutdownTimeout)
	defer deadline.Stop()
wait:
	for s.executors.Load() > 0 {
		select {
		case <-s.executors.done:
		case <-deadline.C:
			s.logger.Warn().Int64("running", s.executors.Load()).Str("event", "actors.orchestrator.shutdown_timeout").
				Msg("executors did not pause in time; recovery will pause their tasks")
			break wait
		}
	}
	close(s.stopLoops)
	s.loopsDone.Wait()
	var cpErr error
	if s.storageHalted.Load() {
		// It would wait for the disk like every write now; the log holds
		// everything acknowledged and recovery replays it.
		s.logger.Warn().Str("event", "actors.orchestrator.no_checkpoint").Msg("WAL writes fail: stopping without a checkpoint")
	} else {
		cpErr = s.Checkpoint()
	}
	_ = s.root.StopFuture(s.orchestratorPID).Wait()
	close(s.dead)
	s.asks.failPending()
	s.as.Shutdown()
	var errs []error
	if cpErr != nil {
		errs = append(errs, cpErr)
	}
	for _, b := range s.opts.Backends {
		if err := b.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close backend %s: %w", b.Name(), err))
		}
	}
	s.logger.Info().Str("event", "actors.orchestrator.stopped").Dur("took", time.Since(start)).Msg("stopped")
	return errors.Join(errs...)
}
