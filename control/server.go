// Package control is fano's control panel: a REST API over a running
// actors.System, a websocket of live events, Prometheus metrics and an
// embedded web page.
//
// Reads are open to whoever reaches the listening address (127.0.0.1 by
// default); every mutation needs the panel's bearer token. The websocket
// checks Origin, and every request's Host must be an IP literal,
// "localhost" or a host named in the allowed origins, so a web page that
// rebinds its own domain name to 127.0.0.1 cannot read the API.
//
// The panel never slows the orchestrator: it sees events through
// System.Subscribe with a callback that only counts metrics and does a
// non-blocking hand-off; a websocket client that cannot keep up is
// dropped.
package control

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"fano/actors"
	"fano/gateway"
	"fano/modules"
	"fano/pb"
)

// HealthSource reports the health monitor's view (disk, memory, backends,
// alerts) for /api/orchestrator/status. Health must be safe for concurrent
// use and return something encoding/json can encode.
type HealthSource interface {
	Health() any
}

// Readiness is a HealthSource that also says what keeps fano from doing
// any work now (low disk, failing WAL writes, no LLM able to take work);
// none: it can work. /healthz answers 503 with those reasons. Blocked
// must be safe for concurrent use.
type Readiness interface {
	Blocked() []string
}

// Options configures a Server.
type Options struct {
	// Sys is the running system the panel shows and steers (required).
	Sys *actors.System
	// Token is the bearer token every mutation needs (required, at least
	// 16 characters). It never appears in a response or a log line.
	Token string
	// AllowedOrigins are extra websocket origins ("http://localhost:3000")
	// besides the page's own; their hosts are also accepted as Host.
	AllowedOrigins []string
	Logger         zerolog.Logger
	// Health, if set, is shown under "health" in the status.
	Health HealthSource
	// Backends are the gateways, for the circuit state of those that have
	// a `State() string` method. Nil: taken from Sys if it offers
	// `Backends() []gateway.Backend`.
	Backends []gateway.Backend
	// Modules are the configured module names. Nil: taken from Sys if it
	// offers `ModuleNames() []string`, else discovered among the known
	// names and the modules that have tasks.
	Modules []string
	// DataDir is shown by /healthz and the status, so the CLI can tell
	// which fano answers.
	DataDir string
	// StartedAt is when fano started (uptime); zero: when New ran.
	StartedAt time.Time
	// ClientBuffer is how many events a websocket client may have queued
	// before it counts as too slow and is dropped (default 1024).
	ClientBuffer int
	// Backup, if set, writes a backup of the WAL now and returns its path
	// (POST /api/wal/backup, `fano wal backup` beside a running fano).
	Backup func() (string, error)
	// WALStatsEvery bounds how often the WAL is walked for its figures
	// (default 15 s): wal.Log.Stats reads the whole file.
	WALStatsEvery time.Duration
	// Collectors are registered beside the panel's own metrics on
	// /metrics (the 24-hour figures of the ops service). Their series
	// names must not clash with the panel's.
	Collectors []prometheus.Collector
	// AlertWebhook, if its URL is set, receives a JSON POST for every
	// alert that needs a person, raised or resolved.
	AlertWebhook Webhook
	// Hosts, if set, lists the gateway hosts on other machines (GET
	// /api/hosts, the status's "hosts", the host of a backend's card).
	Hosts HostSource
}

// knownModules are the module names looked for when neither Options nor
// the System lists them.
var knownModules = []string{"explorer", "documenter", "researcher", "probe"}

// Server serves the panel. Its methods are safe for concurrent use.
type Server struct {
	opts    Options
	sys     *actors.System
	logger  zerolog.Logger
	started time.Time
	mux     *http.ServeMux
	tokenH  [32]byte // sha256 of the token: compared in constant time

	hub *hub
	// comments: the same comment within a minute counts once.
	comments *recentTexts
	metrics  *metrics
	unsub    func()
	// obs keeps the history, alerts and timelines; notifier posts alerts
	// to the webhook (nil without one).
	obs      *observer
	notifier *notifier

	modMu sync.Mutex
	mods  []moduleInfo // discovered once, lazily (modules are fixed at start)

	walMu   sync.Mutex
	walAt   time.Time
	walView *WALView

	closeOnce sync.Once
	srvMu     sync.Mutex
	httpSrv   *http.Server
	closed    bool
}

// moduleInfo is a configured module and what the panel can do with it.
type moduleInfo struct {
	Name         string
	Capabilities []string // "seeds", "comments", "document", "sections"
}

// Capability names (a module's pb.ModuleView lists them).
const (
	capSeeds    = modules.CapSeeds
	capComments = modules.CapComments
	capDocument = modules.CapDocument
	capSections = modules.CapSections
)

// New builds a Server and subscribes it to the system's events. Call
// Close to unsubscribe and drop the websocket clients.
func New(opts Options) (*Server, error) {
	if opts.Sys == nil {
		return nil, errors.New("control: no system")
	}
	if len(opts.Token) < 16 {
		return nil, errors.New("control: the panel token must be at least 16 characters")
	}
	if opts.ClientBuffer <= 0 {
		opts.ClientBuffer = 1024
	}
	if opts.WALStatsEvery <= 0 {
		opts.WALStatsEvery = 15 * time.Second
	}
	if opts.StartedAt.IsZero() {
		opts.StartedAt = time.Now()
	}
	if opts.Backends == nil {
		if bl, ok := any(opts.Sys).(interface{ Backends() []gateway.Backend }); ok {
			opts.Backends = bl.Backends()
		}
	}
	s := &Server{
		opts: opts, sys: opts.Sys, started: opts.StartedAt,
		logger:   opts.Logger.With().Str("component", "control").Logger(),
		tokenH:   hashToken(opts.Token),
		comments: newRecentTexts(time.Minute),
	}
	s.metrics = newMetrics(s)
	for _, c := range opts.Collectors {
		if err := s.metrics.reg.Register(c); err != nil {
			return nil, fmt.Errorf("control: metrics collector: %w", err)
		}
	}
	s.hub = newHub(s.logger, opts.ClientBuffer, s.metrics)
	var notify func(change)
	if opts.AlertWebhook.URL != "" {
		s.notifier = newNotifier(opts.AlertWebhook, s.logger)
		notify = s.notifier.offer
	}
	var jl journal
	var since uint64
	if l := s.sys.Log(); l != nil {
		jl, since = l, l.LastSeq()
	}
	s.obs = newObserver(jl, s.sys.Clock().Now, s.logger, notify)
	s.unsub = s.sys.Subscribe(s.onNotice)
	s.obs.start(since)
	s.mux = s.routes()
	return s, nil
}

// onNotice runs in actor goroutines for every applied event and published
// update: it must not block. It counts metrics (atomic adds) and hands the
// notice to the hub without waiting.
func (s *Server) onNotice(n actors.Notice) {
	s.metrics.observe(n)
	s.hub.offer(n)
	switch {
	case n.Event != nil:
		s.obs.offer(liveNotice{event: n.Event})
	case n.Update != nil:
		s.obs.offer(liveNotice{update: n.Update})
	}
}

// Handler is the panel's HTTP handler (for httptest and for embedding).
func (s *Server) Handler() http.Handler { return s.guard(s.mux) }

// Serve serves on l until Close. It returns http.ErrServerClosed after
// Close, like http.Server.Serve.
func (s *Server) Serve(l net.Listener) error {
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	s.srvMu.Lock()
	if s.closed {
		s.srvMu.Unlock()
		l.Close()
		return http.ErrServerClosed
	}
	s.httpSrv = srv
	s.srvMu.Unlock()
	return srv.Serve(l)
}

// Close stops serving, unsubscribes from the system and closes every
// websocket. It waits at most about two seconds for requests in flight.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.unsub()
		s.hub.close()
		s.obs.stop()
		if s.notifier != nil {
			s.notifier.close()
		}
		s.srvMu.Lock()
		srv := s.httpSrv
		s.closed = true
		s.srvMu.Unlock()
		if srv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if e := srv.Shutdown(ctx); e != nil {
				err = fmt.Errorf("control: shutdown: %w", e)
				_ = srv.Close()
			}
		}
	})
	return err
}

// modules returns the configured modules with their capabilities. The list
// is found once: modules do not change while fano runs.
func (s *Server) modules() []moduleInfo {
	s.modMu.Lock()
	defer s.modMu.Unlock()
	if s.mods != nil {
		return s.mods
	}
	names := s.opts.Modules
	if names == nil {
		if ml, ok := any(s.sys).(interface{ ModuleNames() []string }); ok {
			names = ml.ModuleNames()
		}
	}
	if names == nil {
		seen := map[string]bool{}
		for _, n := range knownModules {
			seen[n] = true
		}
		for m := range s.sys.Counts() {
			seen[m] = true
		}
		for n := range seen {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	mods := []moduleInfo{}
	for _, name := range names {
		v, err := s.sys.Query(&pb.ModuleQuery{Module: name})
		if err != nil {
			continue // not configured
		}
		caps := append([]string{}, v.GetCapabilities()...)
		mods = append(mods, moduleInfo{Name: name, Capabilities: caps})
	}
	s.mods = mods
	return mods
}

// moduleWith returns the module that has capability c: preferred if it
// has it, else the first (by name) that does.
func (s *Server) moduleWith(c, preferred string) (string, bool) {
	var first string
	for _, m := range s.modules() {
		for _, have := range m.Capabilities {
			if have != c {
				continue
			}
			if m.Name == preferred {
				return m.Name, true
			}
			if first == "" {
				first = m.Name
			}
		}
	}
	return first, first != ""
}

func (s *Server) hasCapability(module, c string) bool {
	for _, m := range s.modules() {
		if m.Name == module {
			for _, have := range m.Capabilities {
				if have == c {
					return true
				}
			}
		}
	}
	return false
}

func (s *Server) moduleConfigured(module string) bool {
	for _, m := range s.modules() {
		if m.Name == module {
			return true
		}
	}
	return false
}

// walStats returns the WAL's figures, walking the file at most once per
// WALStatsEvery.
func (s *Server) walStats() *WALView {
	s.walMu.Lock()
	defer s.walMu.Unlock()
	if s.walView != nil && time.Since(s.walAt) < s.opts.WALStatsEvery {
		return s.walView
	}
	st, err := s.sys.Log().Stats()
	if err != nil {
		s.logger.Warn().Err(err).Str("event", "control.panel.wal_stats_failed").Msg("wal stats")
		return s.walView
	}
	v := &WALView{Bytes: st.Bytes, Entries: st.Entries, LastSeq: st.LastSeq, Uncommitted: st.Uncommitted, Checkpoints: st.Checkpoints}
	if cp := st.OldestCheckpoint; cp.Owner != "" {
		t := cp.Time
		v.OldestCheckpoint = &CheckpointView{Owner: cp.Owner, Seq: cp.Seq, At: t}
	}
	s.walView, s.walAt = v, time.Now()
	return v
}
