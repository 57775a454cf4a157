package health

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"fano/pb"
)

// Target is the running system as the monitor needs it. *actors.System
// provides all of it through a small adapter (cmd/fano/ops.go). Methods
// are called from the Service's goroutines and must be safe for that.
type Target interface {
	// Running lists the ids of the RUNNING tasks.
	Running() []string
	// QueueDepth is the number of PENDING and READY tasks.
	QueueDepth() int
	// Backends probes every backend's health.
	Backends(ctx context.Context) []Backend
	// Reconnect re-establishes the named backends and probes them again.
	Reconnect(ctx context.Context, names []string) []Backend
	// SetAccepting stops (false) or resumes (true) the start of new work.
	SetAccepting(on bool)
	// StopStuck ends a stuck run: pause it until resumeAt, or fail it.
	StopStuck(ctx context.Context, id string, fail bool, reason string, resumeAt time.Time) (outcome string, err error)
	// Alert publishes an alert or an action to subscribers (the panel).
	Alert(kind string, a Alert)
}

// DiskUsage returns the free bytes of the file system holding path.
type DiskUsage func(path string) (free uint64, err error)

// ServiceOptions configure a Service.
type ServiceOptions struct {
	Clock  clockwork.Clock
	Target Target
	Disk   DiskUsage // nil: StatFS
	Logger zerolog.Logger
	// ActionTimeout bounds how long a stuck task's executor gets to stop
	// (real time: it waits on goroutines, not on the clock). Default 5 s.
	ActionTimeout time.Duration
	// OnCheck, if set, is called after every check with the new status
	// (tests wait on it).
	OnCheck func(Status)
	// Storage, if set, returns the WAL write fault going on (nil: none).
	Storage func() error
	// IntakeHeld: the target started with new work held back (the disk
	// was low before the start); the first reading that is not low lets
	// it start, as the end of a low-disk period does.
	IntakeHeld bool
}

// Service runs a Monitor every CheckInterval on its clock and carries out
// its plans. All methods are safe for concurrent use; checks never overlap.
type Service struct {
	opts ServiceOptions

	mu  sync.Mutex // guards mon
	mon *Monitor

	checkMu sync.Mutex // one check (or reconnect) at a time

	ticker    clockwork.Ticker
	reconnect clockwork.Timer
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	startOnce sync.Once
	stopOnce  sync.Once
}

// NewService returns a service for cfg; Start starts its checks.
func NewService(cfg Config, opts ServiceOptions) *Service {
	if opts.Clock == nil {
		opts.Clock = clockwork.NewRealClock()
	}
	if opts.Disk == nil {
		opts.Disk = StatFS
	}
	if opts.ActionTimeout <= 0 {
		opts.ActionTimeout = 5 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	mon := New(cfg)
	mon.intakeHeld = opts.IntakeHeld
	return &Service{opts: opts, mon: mon, ctx: ctx, cancel: cancel}
}

// Start runs a first check at once (so the status means something from
// the start), then one every CheckInterval until Stop. The ticker exists
// when Start returns, so advancing a fake clock right after reaches it.
func (s *Service) Start() {
	s.startOnce.Do(func() {
		s.ticker = s.opts.Clock.NewTicker(s.mon.Config().CheckInterval)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.CheckNow(s.ctx)
			for {
				select {
				case <-s.ticker.Chan():
					s.CheckNow(s.ctx)
				case <-s.ctx.Done():
					return
				}
			}
		}()
	})
}

// Stop ends the checks and a pending reconnect, and waits for a check in
// progress (its actions are bounded by ActionTimeout).
func (s *Service) Stop() {
	s.stopOnce.Do(func() {
		s.cancel()
		if s.ticker != nil {
			s.ticker.Stop()
		}
		s.mu.Lock()
		if s.reconnect != nil && s.reconnect.Stop() {
			s.wg.Done() // it will never run
		}
		s.reconnect = nil
		s.mu.Unlock()
		s.wg.Wait()
	})
}

// Observe feeds a scheduler event to the monitor (see Monitor.Observe).
func (s *Service) Observe(e *pb.Event) {
	s.mu.Lock()
	s.mon.Observe(e)
	s.mu.Unlock()
}

// Status returns the latest view.
func (s *Service) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mon.Status()
}

// CheckNow runs one check at once and carries out its plan.
func (s *Service) CheckNow(ctx context.Context) Status {
	s.checkMu.Lock()
	defer s.checkMu.Unlock()
	t := s.opts.Target
	cfg := s.mon.Config()
	probeCtx, cancel := context.WithTimeout(ctx, s.opts.ActionTimeout)
	sample := Sample{Running: t.Running(), QueueDepth: t.QueueDepth(), Backends: t.Backends(probeCtx)}
	cancel()
	sample.DiskFree, sample.DiskErr = s.opts.Disk(cfg.DiskPath)
	if s.opts.Storage != nil {
		sample.StorageErr = s.opts.Storage()
	}
	sample.At = s.opts.Clock.Now()

	s.mu.Lock()
	plan := s.mon.Check(sample)
	status := s.mon.Status()
	s.mu.Unlock()

	log := s.opts.Logger
	if !status.Healthy && len(plan.Alerts) > 0 {
		log.Warn().Str("event", "health.monitor.unhealthy").Strs("issues", status.Issues).Msg("health check found problems")
	}
	for _, a := range plan.Alerts {
		s.alert(a)
	}
	if plan.StopIntake {
		t.SetAccepting(false)
		log.Warn().Str("event", "health.monitor.intake_stopped").Uint64("free_bytes", sample.DiskFree).Msg("low disk space: no new work starts")
	}
	if plan.ResumeIntake {
		t.SetAccepting(true)
		log.Info().Str("event", "health.monitor.intake_resumed").Uint64("free_bytes", sample.DiskFree).Msg("disk space is back: new work starts again")
	}
	for _, st := range plan.Stuck {
		s.stopStuck(ctx, st, cfg)
	}
	if plan.Reconnect {
		s.armReconnect(cfg.ReconnectAfter)
	}
	s.mu.Lock()
	status = s.mon.Status()
	s.mu.Unlock()
	if s.opts.OnCheck != nil {
		s.opts.OnCheck(status)
	}
	return status
}

func (s *Service) stopStuck(ctx context.Context, st StuckTask, cfg Config) {
	log := s.opts.Logger
	reason := fmt.Sprintf("stuck: running for %s (threshold %s)", round(st.For), cfg.StuckThreshold)
	resumeAt := s.opts.Clock.Now().Add(cfg.CheckInterval)
	actx, cancel := context.WithTimeout(ctx, s.opts.ActionTimeout)
	outcome, err := s.opts.Target.StopStuck(actx, st.ID, st.Action == ActionFail, reason, resumeAt)
	cancel()
	st.Outcome = outcome
	ev := log.Warn()
	if err != nil {
		st.Error = err.Error()
		ev = log.Error().Err(err)
	}
	ev.Str("event", "health.monitor.task_stuck").Str("task", st.ID).Str("action", st.Action).
		Str("outcome", outcome).Dur("running_for", st.For).Msg("stuck task handled")
	s.mu.Lock()
	s.mon.StuckDone(st)
	s.mu.Unlock()
	s.opts.Target.Alert("stuck_task", Alert{Kind: AlertStuckTask, Message: fmt.Sprintf("task %s: %s (%s)", st.ID, st.Action, outcome),
		Data: map[string]string{"task_id": st.ID, "action": st.Action, "outcome": outcome, "error": st.Error}})
}

// armReconnect schedules a reconnect on the clock.
func (s *Service) armReconnect(after time.Duration) {
	s.opts.Logger.Warn().Str("event", "health.monitor.no_llm").Dur("reconnect_in", after).Msg("no LLM available: reconnecting soon")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return
	}
	s.wg.Add(1)
	s.reconnect = s.opts.Clock.AfterFunc(after, func() {
		defer s.wg.Done()
		s.reconnectNow(s.ctx)
	})
}

// reconnectNow reconnects the backends that are down and records the result.
func (s *Service) reconnectNow(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	s.checkMu.Lock()
	defer s.checkMu.Unlock()
	s.mu.Lock()
	var names []string
	for _, b := range s.mon.Status().Backends {
		// Only a failing probe is a reconnect's business: a backend
		// parked by a rate limit, a cap or its credentials is not.
		if !b.Healthy {
			names = append(names, b.Name)
		}
	}
	s.mu.Unlock()
	log := s.opts.Logger
	log.Info().Str("event", "health.monitor.reconnecting_llms").Strs("backends", names).Msg("reconnecting LLM backends")
	rctx, cancel := context.WithTimeout(ctx, s.opts.ActionTimeout)
	var res []Backend
	if len(names) > 0 {
		res = s.opts.Target.Reconnect(rctx, names)
	} else {
		res = s.opts.Target.Backends(rctx) // every probe passes: nothing to reconnect
	}
	cancel()
	s.mu.Lock()
	alerts := s.mon.Reconnected(s.opts.Clock.Now(), res)
	status := s.mon.Status()
	s.mu.Unlock()
	log.Info().Str("event", "health.monitor.reconnected").Str("result", status.ReconnectResult).Msg("reconnect done")
	s.opts.Target.Alert("reconnect", Alert{Kind: AlertNoLLM, Resolved: len(alerts) > 0, Message: status.ReconnectResult,
		Data: map[string]string{"reconnects": fmt.Sprint(status.Reconnects)}})
	for _, a := range alerts {
		s.alert(a)
	}
	if s.opts.OnCheck != nil {
		s.opts.OnCheck(status)
	}
}

func (s *Service) alert(a Alert) {
	log := s.opts.Logger
	ev := log.Warn()
	if a.Resolved {
		ev = log.Info()
	}
	ev.Str("event", "health.monitor."+a.Kind).Bool("resolved", a.Resolved).Msg(a.Message)
	s.opts.Target.Alert("alert", a)
}
