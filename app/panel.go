package app

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"

	"fano/actors"
	"fano/config"
	"fano/control"
)

// The control panel is a run service: it starts once the actor system is
// up, on control.address, when control.enabled. Its address and token go
// to the console (ServiceEnv.Out) only: the token never goes through the
// logger, so it never reaches logs/fano.log.

func (s *Services) startPanel(rc *ServiceEnv) (func(), error) {
	ctl := rc.Cfg.Control
	if !ctl.Enabled || rc.NoPanel {
		if rc.PanelListener != nil {
			rc.PanelListener.Close()
		}
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
	l := rc.PanelListener // bound by `fano run` before the WAL was opened
	if l == nil {
		if l, err = listenPanel(rc.Cfg, rc.DataDir, rc.UntilIdle, rc.Out); err != nil {
			return nil, err
		}
	}
	srv, err := control.New(control.Options{
		Sys: rc.Sys, Token: tok, AllowedOrigins: ctl.AllowedOrigins, Logger: rc.Logger,
		Health: panelHealth{s}, DataDir: dataDir, StartedAt: time.Now(),
		Collectors:   panelCollectors(s.collector(), rc.Hub),
		Backup:       panelBackup(rc),
		AlertWebhook: control.Webhook{URL: ctl.AlertsWebhook, Topic: ctl.AlertsWebhookTopic},
		Hosts:        panelHosts(rc.Hub),
	})
	if err != nil {
		l.Close()
		return nil, err
	}
	addr := panelAddr(ctl.Address, l.Addr().String())
	var ptls *control.PanelTLS
	if pl, ok := l.(*tlsPanelListener); ok {
		ptls = pl.tls
		addr = "https://" + addr
	}
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
	ev := rc.Logger.Info().Str("event", "control.panel.started").Str("url", base+"/").Str("token_source", string(src)).Bool("remote", ctl.Remote())
	if ptls != nil {
		ev = ev.Str("tls_cert", ptls.CertFile).Str("tls_sha256", ptls.Fingerprint)
	}
	ev.Msg("control panel listening")
	printPanelBanner(rc.Out, base, tok, src, ctl.TokenEnv, rc.DataDir)
	if ptls != nil {
		_, port, _ := net.SplitHostPort(l.Addr().String())
		fmt.Fprintf(rc.Out, "panel served to the network over TLS on port %s (open it by this machine's IP address); certificate %s, SHA-256 fingerprint %s\n",
			port, ptls.CertFile, ptls.Fingerprint)
	}
	return func() {
		if err := srv.Close(); err != nil {
			rc.Logger.Warn().Err(err).Str("event", "control.panel.close_failed").Msg("control panel close")
		}
		<-served
		_ = os.Remove(addrFile)
	}, nil
}

// listenPanel binds control.address (nil listener when the panel is
// off). `fano run` calls it before it opens the WAL: a port already taken
// stops the start before anything is written. A run that ends by itself
// (--until-idle) does not need that very port: when it is taken (another
// fano, most likely) it takes a free port on the same host and says so.
func listenPanel(cfg *config.Config, dataDir string, untilIdle bool, out io.Writer) (net.Listener, error) {
	ctl := cfg.Control
	if !ctl.Enabled {
		return nil, nil
	}
	var ptls *control.PanelTLS
	if ctl.Remote() {
		if !ctl.AllowRemote {
			return nil, fmt.Errorf("control panel: %s is reachable from other machines: set control.allow_remote: true (TLS) or use 127.0.0.1", ctl.Address)
		}
		t, err := control.LoadPanelTLS(ctl.TLSCert, ctl.TLSKey, dataDir)
		if err != nil {
			return nil, err
		}
		ptls = t
	}
	l, err := listenFree(ctl.Address, untilIdle, out)
	if err != nil {
		return nil, err
	}
	if ptls != nil {
		return &tlsPanelListener{Listener: tls.NewListener(l, ptls.Config), tls: ptls}, nil
	}
	return l, nil
}

func listenFree(address string, untilIdle bool, out io.Writer) (net.Listener, error) {
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
	fmt.Fprintf(out, "fano: %s (control.address) is in use, by another fano or another program; this --until-idle run's panel takes the free port %s instead\n",
		address, l.Addr())
	return l, nil
}

// tlsPanelListener is the panel's listener when it is served over TLS.
type tlsPanelListener struct {
	net.Listener
	tls *control.PanelTLS
}

// panelAddr is the address local clients use: the bound port on the
// configured host, loopback for an unspecified one (the listener reports
// "[::]" for "0.0.0.0", which would read as IPv6 only).
func panelAddr(configured, bound string) string {
	host, _, _ := net.SplitHostPort(configured)
	_, port, err := net.SplitHostPort(bound)
	if err != nil {
		return bound
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// printPanelBanner tells the person at the console where the panel is and
// how to make changes, once. A token the operator set (config,
// environment) is not echoed. One from panel.token is shown only to a
// terminal, in the URL's fragment, which the browser keeps to itself (it
// is never sent to the server or logged); output that goes to a file (a
// supervisor's log) names the token file instead.
func printPanelBanner(w io.Writer, base, tok string, src control.TokenSource, env, dataDir string) {
	switch src {
	case control.TokenFromConfig:
		fmt.Fprintf(w, "fano control panel: %s/  (changes need the token of control.token)\n", base)
	case control.TokenFromEnv:
		fmt.Fprintf(w, "fano control panel: %s/  (changes need the token in $%s)\n", base, env)
	default:
		if isTerminal(w) {
			fmt.Fprintf(w, "fano control panel: %s/#token=%s\n", base, tok)
			return
		}
		fmt.Fprintf(w, "fano control panel: %s/  (changes need the token in %s)\n", base, filepath.Join(dataDir, control.TokenFile))
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
}
