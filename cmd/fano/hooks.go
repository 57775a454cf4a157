package main

import (
	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"net"

	"fano/actors"
	"fano/config"
	"fano/gateway"
	"fano/modules"
	"fano/wal"
)

// Extension points: each capability (a module, a backend type, the control
// panel, the health monitor) registers itself from an init func in its own
// file of this package, so they plug in without editing shared code.

// extraCommands add subcommands to the root.
var extraCommands []func(g *globals) *cobra.Command

// moduleFactory builds a module from the config; nil, nil = disabled.
type moduleFactory func(env *moduleEnv) (modules.Module, error)

// moduleEnv is what a module factory may use.
type moduleEnv struct {
	Cfg     *config.Config
	DataDir string
	Logger  zerolog.Logger
}

// moduleFactories are tried in order; if none yields a module, the probe
// module runs (see buildModules).
var moduleFactories []moduleFactory

// backendFactories build a gateway for a config backend type other than sim.
var backendFactories = map[string]func(name string, b *config.Backend, env *backendEnv) (gateway.Backend, error){}

// backendEnv is what a backend factory may use.
type backendEnv struct {
	Cfg     *config.Config
	DataDir string
	Clock   clockwork.Clock
	Logger  zerolog.Logger
}

// runService is started by `fano run` once the actor system is up (the
// control panel, the health monitor, the heartbeat); the returned stop
// func is called before the system stops.
type runService func(rc *runContext) (stop func(), err error)

var runServices []runService

// runContext is what a run service may use.
type runContext struct {
	Cfg     *config.Config
	DataDir string
	Sys     *actors.System
	Log     *wal.Log // the open WAL (backups read it online)
	// PanelListener is control.address, bound before the WAL was opened
	// (nil: the panel service binds it itself, or the panel is off).
	PanelListener net.Listener
	Logger        zerolog.Logger
	Clock         clockwork.Clock
	// Stop asks `fano run` to shut down (as a signal would).
	Stop func(reason string)
}

// stopRequests is a run's channel of stop requests and the Stop func of
// its runContext: the first reason waits to be read, later ones are
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

// startServices starts every runService for rc. The returned stop (safe
// to call again) stops those that started, the newest first; it is
// returned also with an error, for the caller to run after stopping the
// system.
func startServices(rc *runContext) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
		stops = nil
	}
	for _, svc := range runServices {
		s, err := svc(rc)
		if err != nil {
			return stop, err
		}
		if s != nil {
			stops = append(stops, s)
		}
	}
	return stop, nil
}
