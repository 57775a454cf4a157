package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"fano/actors/scheduler"
	"fano/pb"
)

// Operations the health monitor and the operator tools need from a
// running System: backend connectivity, reconnecting, ending a stuck run,
// retrying failed tasks (the actors' mailbox depths for a SIGUSR1 dump are
// in mailbox.go). Like the rest of the System API they are safe for
// concurrent use.

// BackendHealth is one backend's connectivity as its gateway host sees it.
type BackendHealth struct {
	Name    string `json:"name"`
	Healthy bool   `json:"healthy"`
	Error   string `json:"error,omitempty"`
	Running int    `json:"running"` // requests in flight
}

// Reconnector is implemented by backends that can re-establish their
// connection (a browser relaunching, an API client dialling again). The
// health monitor calls it when no LLM has been available for a while;
// backends without it are only probed again with Health.
type Reconnector interface {
	Reconnect(ctx context.Context) error
}

// Accepting reports whether new work may start: not held (see
// SetAccepting) and WAL writes go through (see onStorage).
func (s *System) Accepting() bool { return s.accepting.Load() && !s.storageHalted.Load() }

// BackendHealth asks the named gateway hosts (all, in the order of
// Options.Backends, when none is named) for their backend's Health. A
// host that does not answer before ctx ends is reported unhealthy with
// the reason.
func (s *System) BackendHealth(ctx context.Context, names ...string) []BackendHealth {
	if len(names) == 0 {
		for _, b := range s.opts.Backends {
			names = append(names, b.Name())
		}
	}
	// All asked at once: one slow backend does not delay the others.
	replies := make([]actor.Future, len(names))
	for i, name := range names {
		if pid, ok := s.gatewayPIDs[name]; ok {
			replies[i] = s.asks.ask(ctx, pid, &pb.BackendHealthQuery{})
		}
	}
	out := make([]BackendHealth, len(names))
	for i, name := range names {
		out[i] = BackendHealth{Name: name}
		pid, ok := s.gatewayPIDs[name]
		if !ok {
			out[i].Error = "no such backend"
			continue
		}
		st, err := await[*pb.BackendHealthReply](s.asks, replies[i], pid, &pb.BackendHealthQuery{})
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			out[i].Error = "health check did not answer: " + context.DeadlineExceeded.Error()
		case err != nil:
			out[i].Error = err.Error()
		default:
			out[i] = BackendHealth{Name: name, Healthy: st.Healthy, Error: st.Error, Running: int(st.Running)}
		}
	}
	return out
}

// ReconnectBackends re-establishes the named backends (all when names is
// empty): Reconnect where the backend implements Reconnector, then a fresh
// Health probe through its gateway host. It returns the probes' results.
func (s *System) ReconnectBackends(ctx context.Context, names []string) []BackendHealth {
	if len(names) == 0 {
		for _, b := range s.opts.Backends {
			names = append(names, b.Name())
		}
	}
	failed := map[string]string{}
	for _, b := range s.opts.Backends {
		r, ok := b.(Reconnector)
		if !ok || !slices.Contains(names, b.Name()) {
			continue
		}
		if err := r.Reconnect(ctx); err != nil {
			failed[b.Name()] = "reconnect: " + err.Error()
		}
	}
	out := s.BackendHealth(ctx, names...)
	var well []string
	for i := range out {
		if msg, ok := failed[out[i].Name]; ok && !out[i].Healthy && out[i].Error == "" {
			out[i].Error = msg
		}
		if out[i].Healthy {
			well = append(well, out[i].Name)
		}
	}
	// A backend that answers its probe after the reconnect is checked
	// again as when a person acted, before this returns: a condition
	// recorded before (a login wall the relaunch cleared) does not
	// outlive it until the next sweep.
	if len(well) > 0 {
		s.RecheckBackends(well...)
	}
	return out
}

// StuckOutcome says how StopStuckTask ended a run.
type StuckOutcome string

const (
	StuckNotRunning StuckOutcome = "not_running" // it had moved on by itself
	StuckByExecutor StuckOutcome = "executor"    // its executor stopped at a safe point
	StuckForced     StuckOutcome = "forced"      // no executor answered: the event was written directly
)

// StopStuckTask ends the current run of a task that has been RUNNING too
// long (the health monitor's stuck check). Its executor is
// cancelled as a preemption would be: the call in flight is really
// cancelled and the task is PAUSED at a safe point. As the scheduler
// applies that pause, a follow-up event records the decision:
// TaskPaused{reason, not_before: resumeAt} or, with fail,
// TaskFailed{reason}; a failed task's module is told through
// DecideFailure. New work does not start meanwhile (a few milliseconds);
// the previous SetAccepting state comes back on return.
//
// If no executor answers before ctx ends (the executor is gone, e.g. a
// write failed, or wedged in a call that ignores its context), the
// follow-up event is written directly. It returns how the run ended.
func (s *System) StopStuckTask(ctx context.Context, id string, fail bool, reason string, resumeAt time.Time) (StuckOutcome, error) {
	t, ok := s.Task(id)
	if !ok {
		return "", &scheduler.NotFoundError{TaskID: id}
	}
	if t.State != pb.TaskState_TASK_STATE_RUNNING {
		return StuckNotRunning, nil
	}
	// No dispatch while we decide: between the executor's pause and our
	// follow-up a tick could resume the task and start it again, and a
	// start already queued in the journal would outlive a FAILED written
	// after it. Dispatch comes back when the follow-up is durable.
	if s.accepting.Swap(false) {
		defer s.SetAccepting(true)
	}
	followUp := func() *pb.Event {
		at := nanos(s.clock.Now())
		if fail {
			return &pb.Event{At: at, Body: &pb.Event_TaskFailed{TaskFailed: &pb.TaskFailed{TaskId: id, Error: reason}}}
		}
		return &pb.Event{At: at, Body: &pb.Event_TaskPaused{TaskPaused: &pb.TaskPaused{TaskId: id, Reason: reason, NotBefore: nanos(resumeAt)}}}
	}
	var sent atomic.Bool
	written := make(chan actor.Future, 1) // the follow-up's write
	ended := make(chan StuckOutcome, 1)
	signal := func(o StuckOutcome) {
		select {
		case ended <- o:
		default:
		}
	}
	unsubscribe := s.Subscribe(func(n Notice) {
		if n.Owner != ownerScheduler || n.Event == nil {
			return
		}
		if tid, _ := scheduler.TaskID(n.Event); tid != id {
			return
		}
		switch n.Event.Body.(type) {
		case *pb.Event_TaskPaused:
			// Runs in the scheduler's goroutine while it applies the
			// pause: the follow-up enters its mailbox before any start of
			// this task can be persisted (a start needs a resume, then an
			// allocation round trip, both behind it).
			if sent.CompareAndSwap(false, true) {
				written <- s.asks.ask(context.Background(), s.schedulerPID, &pb.TaskEvents{TaskId: id, Events: []*pb.Event{followUp()}})
				signal(StuckByExecutor)
			}
		case *pb.Event_TaskCompleted, *pb.Event_TaskFailed, *pb.Event_TaskCancelled:
			signal(StuckNotRunning)
		}
	})
	defer unsubscribe()

	if err := s.asks.requestDone(s.orchestratorPID, &pb.CancelTask{TaskId: id, Reason: errPreempted.Error()}); err != nil {
		return "", fmt.Errorf("stop stuck task %s: %w", id, err)
	}
	var outcome StuckOutcome
	select {
	case outcome = <-ended:
	case <-ctx.Done():
		// Nobody paused it in time: write the decision ourselves, unless
		// the pause was seen meanwhile or the task moved on by itself.
		if !sent.CompareAndSwap(false, true) {
			outcome = <-ended
			break
		}
		if cur, ok := s.Task(id); !ok || cur.State != pb.TaskState_TASK_STATE_RUNNING {
			return StuckNotRunning, nil
		}
		written <- s.asks.ask(context.Background(), s.schedulerPID, &pb.TaskEvents{TaskId: id, Events: []*pb.Event{followUp()}})
		outcome = StuckForced
	case <-s.dead:
		return "", fmt.Errorf("stop stuck task %s: fano is stopping", id)
	}
	if outcome == StuckNotRunning {
		return outcome, nil
	}
	r, err := await[*pb.TaskEventsReply](s.asks, <-written, s.schedulerPID, &pb.TaskEvents{})
	if err == nil {
		err = errorFromWire(r.Error)
	}
	if err != nil {
		return "", fmt.Errorf("stop stuck task %s: %w", id, err)
	}
	// A tick that read the task between the executor's pause and our
	// follow-up may have decided to resume it, and that resume lands after
	// the follow-up. Nothing can start the task meanwhile (dispatch is
	// off), so write the follow-up again until it is the last word.
	for i := 0; ; i++ {
		cur, ok := s.Task(id)
		if !ok || settled(cur, fail, reason) {
			break
		}
		if i == 5 {
			return outcome, fmt.Errorf("stop stuck task %s: it is %s after %d attempts", id, cur.State, i+1)
		}
		if _, _, err := s.state.persistTask(id, []*pb.Event{followUp()}, false); err != nil {
			return outcome, fmt.Errorf("stop stuck task %s: %w", id, err)
		}
	}
	if fail {
		if err := s.state.moduleEnd(t, true, reason); err != nil {
			return outcome, fmt.Errorf("stop stuck task %s: tell module %s: %w", id, t.Module, err)
		}
	}
	return outcome, nil
}

// settled reports whether the stuck task's follow-up is its current state,
// or it ended by itself.
func settled(t *pb.Task, fail bool, reason string) bool {
	switch {
	case t.State == pb.TaskState_TASK_STATE_COMPLETED || t.State == pb.TaskState_TASK_STATE_CANCELLED:
		return true
	case fail:
		return t.State == pb.TaskState_TASK_STATE_FAILED
	}
	return t.State == pb.TaskState_TASK_STATE_PAUSED && t.PauseReason == reason || t.State == pb.TaskState_TASK_STATE_FAILED
}

// RetryError says why a task cannot be retried; it names the task.
type RetryError struct {
	TaskID string
	Reason string
}

func (e *RetryError) Error() string { return "retry " + e.TaskID + ": " + e.Reason }

// Retry puts FAILED tasks back in the queue with fresh retry budgets
// (retry only the failed units): the tasks named by ids, or,
// when ids is empty, every FAILED task (of module, if given). It returns
// the ids requeued. A named task that is unknown or not FAILED is a
// *RetryError and nothing is requeued.
func (s *System) Retry(ids []string, module string) ([]string, error) {
	var chosen []string
	var bad error
	s.state.withScheduler(func(st *scheduler.State) {
		if len(ids) == 0 {
			for _, t := range st.Tasks(func(t *pb.Task) bool {
				return t.State == pb.TaskState_TASK_STATE_FAILED && (module == "" || t.Module == module)
			}, 0) {
				chosen = append(chosen, t.Id)
			}
			return
		}
		for _, id := range ids {
			t, ok := st.Task(id)
			switch {
			case !ok:
				bad = &RetryError{TaskID: id, Reason: "no such task in memory (unknown, or finished and archived)"}
				return
			case t.State != pb.TaskState_TASK_STATE_FAILED:
				bad = &RetryError{TaskID: id, Reason: "not FAILED (" + t.State.String() + ")"}
				return
			}
			chosen = append(chosen, id)
		}
	})
	if bad != nil {
		return nil, bad
	}
	slices.Sort(chosen)
	var done []string
	for _, id := range chosen {
		ev := &pb.Event{At: nanos(s.clock.Now()), Body: &pb.Event_TaskRequeued{TaskRequeued: &pb.TaskRequeued{TaskId: id, Reason: "retry"}}}
		if _, _, err := s.state.persistTask(id, []*pb.Event{ev}, false); err != nil {
			return done, fmt.Errorf("retry %s: %w", id, err)
		}
		done = append(done, id)
	}
	if len(done) > 0 {
		s.logger.Info().Str("event", "actors.scheduler.retried").Strs("tasks", done).Msg("failed tasks requeued")
		s.tick()
	}
	return done, nil
}
