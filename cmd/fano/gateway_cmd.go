package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	fanoapp "fano/app"
	"fano/logging"
	"fano/remote"
)

// newGatewayCmd is `fano gateway`: this machine as a gateway host.
func newGatewayCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gateway",
		Short: "Run this machine's backends for an orchestrator on another machine (serve, status, login)",
		Long: "A gateway host runs the backends its config enables (browser, api, sim) on this machine, with\n" +
			"their browser profiles here, and serves them to the orchestrator over mutual TLS. The\n" +
			"orchestrator keeps the WAL, the queue and the quotas. See docs/remote.md.",
	}
	login := newLoginCmd(g)
	login.Short = "Open a browser on a backend's profile on this host so you can log in to the site"
	cmd.AddCommand(newGatewayServeCmd(g), newGatewayStatusCmd(g), login)
	return cmd
}

func newGatewayServeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "serve",
		Short: "Serve this config's backends to the orchestrator until SIGINT or SIGTERM",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if g.configPath == "" {
				return errors.New("gateway serve: --config is required (the host's config: gateway section and backends)")
			}
			cfg, err := loadConfig(g)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
				return fmt.Errorf("data dir: %w", err)
			}
			logger, closeLog, err := logging.New(logging.Options{Dir: filepath.Join(cfg.DataDir, "logs"), Level: cfg.Logging.Level,
				Console: cfg.Logging.Console, Out: cmd.ErrOrStderr()})
			if err != nil {
				return err
			}
			defer closeLog()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			gw, err := fanoapp.StartGateway(fanoapp.GatewayOptions{Config: cfg, DataDir: cfg.DataDir, Logger: logger})
			if err != nil {
				return err
			}
			defer gw.Close()
			st := gw.Host.Status()
			fmt.Fprintf(cmd.OutOrStdout(), "gateway host %s: serving %s on %s for the orchestrator at %s\n",
				gw.Name, strings.Join(st.Backends, ", "), st.Address, st.Orchestrator)
			select {
			case <-ctx.Done():
				return nil
			case err := <-gw.Host.Refused():
				return err
			}
		},
	}
}

func newGatewayStatusCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Say whether this gateway host runs, is connected, and to whom",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(g)
			if err != nil {
				return err
			}
			data, err := os.ReadFile(filepath.Join(cfg.DataDir, fanoapp.GatewayStatusFile))
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("no gateway host has run on %s (fano gateway serve --config host.yaml)", cfg.DataDir)
			}
			if err != nil {
				return err
			}
			var st remote.HostStatusFile
			if err := json.Unmarshal(data, &st); err != nil {
				return fmt.Errorf("%s: %w", fanoapp.GatewayStatusFile, err)
			}
			running := alive(st.PID) && time.Since(st.WrittenAt) < 30*time.Second
			if g.json {
				return writeJSON(cmd.OutOrStdout(), struct {
					Running bool `json:"running"`
					remote.HostStatusFile
				}{running, st})
			}
			printGatewayStatus(cmd.OutOrStdout(), st, running, time.Now())
			return nil
		},
	}
	jsonFlag(cmd, g)
	return cmd
}

func printGatewayStatus(w io.Writer, st remote.HostStatusFile, running bool, now time.Time) {
	switch {
	case !running:
		fmt.Fprintf(w, "gateway host %s: not running (last status %s ago)\n", st.Host, now.Sub(st.WrittenAt).Round(time.Second))
	case st.Refused != "":
		fmt.Fprintf(w, "gateway host %s: refused by the orchestrator at %s: %s\n", st.Host, st.Orchestrator, st.Refused)
	case st.Connected:
		fmt.Fprintf(w, "gateway host %s: connected to the orchestrator at %s since %s, last heard %s ago\n",
			st.Host, st.Orchestrator, st.Since.Local().Format(time.DateTime), now.Sub(st.LastHeard).Round(time.Millisecond))
	case st.LinkError != "":
		fmt.Fprintf(w, "gateway host %s: NOT connected to the orchestrator at %s: %s\n", st.Host, st.Orchestrator, st.LinkError)
	default:
		fmt.Fprintf(w, "gateway host %s: NOT connected to the orchestrator at %s (trying)\n", st.Host, st.Orchestrator)
	}
	fmt.Fprintf(w, "listening on %s; backends: %s; running %d; answers kept for repeats %d\n",
		st.Address, strings.Join(st.Backends, ", "), st.Running, st.AnswersKept)
}

// alive reports whether process pid exists.
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	return p.Signal(syscall.Signal(0)) == nil
}

// readHostsStatus is the gateway hosts as the orchestrator on dataDir
// last wrote them (nil without hosts).
func readHostsStatus(dataDir string) []remote.HostStatus {
	data, err := os.ReadFile(filepath.Join(dataDir, fanoapp.HostsStatusFile))
	if err != nil {
		return nil
	}
	var f remote.HostsFile
	if json.Unmarshal(data, &f) != nil {
		return nil
	}
	// Rewritten every second while the orchestrator runs: an older file
	// is what it saw last, not what is.
	if age := time.Since(f.WrittenAt); age > 10*time.Second {
		for i := range f.Hosts {
			h := &f.Hosts[i]
			h.Reason = fmt.Sprintf("the orchestrator is not running; %s when it last looked, %s ago", h.State, age.Round(time.Second))
			h.State = "unknown"
		}
	}
	return f.Hosts
}

// printHosts is the hosts section of `fano status`.
func printHosts(w io.Writer, hosts []remote.HostStatus, now time.Time) {
	if len(hosts) == 0 {
		return
	}
	fmt.Fprintln(w, "gateway hosts:")
	for _, h := range hosts {
		heard := "never"
		if !h.LastHeard.IsZero() {
			heard = now.Sub(h.LastHeard).Round(100*time.Millisecond).String() + " ago"
		}
		line := fmt.Sprintf("  %-12s %-10s %-21s %-s backends %s, last heard %s, rtt %.1f ms",
			h.Name, h.State, h.Address, h.Version, strings.Join(h.Backends, ","), heard, h.RTTMillis)
		if h.Reason != "" {
			line += ": " + h.Reason
		}
		fmt.Fprintln(w, line)
	}
}
