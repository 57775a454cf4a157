package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fano/actors"
	"fano/control"
)

// The control panel is a run service: `fano run` starts it once the actor
// system is up, on control.address, when control.enabled.

func init() {
	runServices = append(runServices, startPanel)
}

// panelOut is where `fano run` prints the panel's address and token: the
// console only. The token never goes through the logger, so it never
// reaches logs/fano.log.
var panelOut io.Writer = os.Stdout

// panelHealth is what the panel shows under "health"; the health
// monitor's run service sets it with setPanelHealth. It is read on every
// status request, so the order in which run services start does not
// matter.
var (
	panelHealthMu sync.Mutex
	panelHealth   control.HealthSource
)

// setPanelHealth makes h the panel's health source (nil: none).
func setPanelHealth(h control.HealthSource) {
	panelHealthMu.Lock()
	defer panelHealthMu.Unlock()
	panelHealth = h
}

// lateHealth reads panelHealth at each call.
type lateHealth struct{}

func (lateHealth) Health() any {
	panelHealthMu.Lock()
	h := panelHealth
	panelHealthMu.Unlock()
	if h == nil {
		return nil
	}
	return h.Health()
}

func startPanel(rc *runContext) (func(), error) {
	ctl := rc.Cfg.Control
	if !ctl.Enabled {
		return nil, nil
	}
	tok, src, err := control.ResolveToken(ctl, rc.DataDir, os.Getenv, true)
	if err != nil {
		return nil, fmt.Errorf("control panel: %w", err)
	}
	dataDir, err := filepath.Abs(rc.DataDir)
	if err != nil {
		return nil, fmt.Errorf("control panel: data dir: %w", err)
	}
	l, err := listenPanel(ctl.Address, untilIdleRun, rc)
	if err != nil {
		return nil, err
	}
	srv, err := control.New(control.Options{
		Sys: rc.Sys, Token: tok, AllowedOrigins: ctl.AllowedOrigins, Logger: rc.Logger,
		Health: lateHealth{}, DataDir: dataDir, StartedAt: time.Now(),
		Collectors: []prometheus.Collector{opsCollector()},
	})
	if err != nil {
		l.Close()
		return nil, err
	}
	addr := l.Addr().String()
	addrFile := filepath.Join(rc.DataDir, control.AddrFile)
	if err := actors.WriteFileAtomic(addrFile, []byte(addr+"\n"), 0o644); err != nil {
		l.Close()
		_ = srv.Close()
		return nil, fmt.Errorf("control panel: %w", err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			rc.Logger.Error().Err(err).Str("event", "control.panel.serve_failed").Msg("control panel stopped serving")
		}
	}()
	base, _ := control.BaseURL(addr)
	rc.Logger.Info().Str("event", "control.panel.started").Str("url", base+"/").Str("token_source", string(src)).
		Msg("control panel listening")
	printPanelBanner(panelOut, base, tok, src, ctl.TokenEnv, rc.DataDir)
	return func() {
		if err := srv.Close(); err != nil {
			rc.Logger.Warn().Err(err).Str("event", "control.panel.close_failed").Msg("control panel close")
		}
		<-served
		_ = os.Remove(addrFile)
	}, nil
}

// listenPanel listens on the panel's address. A run that ends by itself
// (--until-idle) does not need that very port: when it is taken (another
// fano, most likely) it takes a free port on the same host and says so.
func listenPanel(address string, untilIdle bool, rc *runContext) (net.Listener, error) {
	l, err := net.Listen("tcp", address)
	if err == nil {
		return l, nil
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("control panel: listen on %s (control.address): %w", address, err)
	}
	if !untilIdle {
		return nil, fmt.Errorf("control panel: %s (control.address) is in use, by another fano or another program: stop it, or set control.address to a free port: %w", address, err)
	}
	host, _, _ := net.SplitHostPort(address)
	l, ferr := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if ferr != nil {
		return nil, fmt.Errorf("control panel: %s (control.address) is in use, and no free port on %s: %w", address, host, ferr)
	}
	rc.Logger.Warn().Str("event", "control.panel.address_in_use").Str("address", address).Str("instead", l.Addr().String()).
		Msg("control panel address in use: this --until-idle run uses a free port")
	fmt.Fprintf(panelOut, "fano: %s (control.address) is in use, by another fano or another program; this --until-idle run's panel takes the free port %s instead\n",
		address, l.Addr())
	return l, nil
}

// printPanelBanner tells the person at the console where the panel is and
// how to make changes. A token the operator set (config, environment) is
// not echoed; one from panel.token is, in the URL's fragment, which the
// browser keeps to itself (it is never sent to the server or logged).
func printPanelBanner(w io.Writer, base, tok string, src control.TokenSource, env, dataDir string) {
	switch src {
	case control.TokenFromConfig:
		fmt.Fprintf(w, "fano control panel: %s/  (changes need the token of control.token)\n", base)
	case control.TokenFromEnv:
		fmt.Fprintf(w, "fano control panel: %s/  (changes need the token in $%s)\n", base, env)
	default:
		fmt.Fprintf(w, "fano control panel: %s/#token=%s\n", base, tok)
		fmt.Fprintf(w, "panel token (for changes; also in %s): %s\n", filepath.Join(dataDir, control.TokenFile), tok)
	}
}
