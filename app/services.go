package app

import (
	"io"
	"net"
	"sync/atomic"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"fano/actors"
	"fano/config"
	"fano/health"
	"fano/remote"
	"fano/wal"
)

// ServiceEnv is what the run services (the control panel, the health and
// metrics service, backups, the module feeds and logs) use: one run's
// system, its data directory and its console.
type ServiceEnv struct {
	Cfg     *config.Config
	DataDir string
	Sys     *actors.System
	Log     *wal.Log // the open WAL (backups read it online); nil: no backups
	// PanelListener is control.address, bound before the WAL was opened
	// (nil: the panel service binds it itself, or the panel is off).
	PanelListener net.Listener
	Logger        zerolog.Logger
	Clock         clockwork.Clock
	// Stop asks the run to shut down (as a signal would).
	Stop func(reason string)
	// Out is the console: the panel's address and token go there, never
	// through the logger. Nil: discarded.
	Out io.Writer
	// UntilIdle: the run ends by itself when no work is left (the
	// heartbeat prints an ETA; the panel may take a free port).
	UntilIdle bool
	// Disk reads the data directory's free space (nil: health.StatFS).
	Disk health.DiskUsage
	// IntakeHeld: Sys was started with new work held back (low disk before
	// the start); the health checks let it start once space is fine.
	IntakeHeld bool
	// NoPanel and NoBackups leave those services out although the
	// config enables them.
	NoPanel, NoBackups bool
	// Hub, if set, is the gateway hosts' listener: its hosts go to
	// /metrics.
	Hub *remote.Hub
}

// Services are the run services of one run, started in a fixed order
// and stopped newest first.
type Services struct {
	env   *ServiceEnv
	stops []func()
	// ops is the health and metrics service while it runs: the panel and
	// its /metrics read it at each request.
	ops atomic.Pointer[ops]
}

// StartServices starts the run services for env once its system is up.
// On an error, those already started are stopped.
func StartServices(env ServiceEnv) (*Services, error) {
	if env.Out == nil {
		env.Out = io.Discard
	}
	if env.Disk == nil {
		env.Disk = health.StatFS
	}
	if env.Stop == nil {
		env.Stop = func(string) {}
	}
	s := &Services{env: &env}
	// The order is fixed: the panel last, once what it shows is there.
	steps := []func(*ServiceEnv) (func(), error){
		backupService,
		documenterLogService,
		explorerLogService,
		researcherLogService,
		s.startOps,
		s.startPanel,
	}
	for _, start := range steps {
		stop, err := start(s.env)
		if err != nil {
			s.Stop()
			return nil, err
		}
		if stop != nil {
			s.stops = append(s.stops, stop)
		}
	}
	return s, nil
}

// Stop stops the services, the newest first; safe to call again. The
// health and metrics service keeps writing the trace log until Finish.
func (s *Services) Stop() {
	for i := len(s.stops) - 1; i >= 0; i-- {
		s.stops[i]()
	}
	s.stops = nil
}

// Finish is called after the system stopped: the shutdown's own events
// reach logs/trace.log, which is then closed.
func (s *Services) Finish() {
	if o := s.ops.Load(); o != nil {
		o.finishNow()
	}
}

// stopRequests is a run's channel of stop requests and the Stop func of
// its services: the first reason waits to be read, later ones are
// dropped rather than block the service asking.
func stopRequests() (<-chan string, func(reason string)) {
	reqs := make(chan string, 1)
	return reqs, func(reason string) {
		select {
		case reqs <- reason:
		default:
		}
	}
}

// StopRequests is stopRequests for a command that runs its own loop (a
// pipeline run).
func StopRequests() (<-chan string, func(reason string)) { return stopRequests() }
