package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pr "github.com/asynkron/protoactor-go/remote"
	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"fano/gateway"
	"fano/pb"
)

// Well-known actor names: each side spawns its own, locally, and the
// other reaches it by address and name. No kinds are registered, so the
// other side can spawn nothing here.
const (
	hubActorName  = "fano-hub"
	hostActorName = "fano-gateway"
)

// HubConfig configures the orchestrator's side.
type HubConfig struct {
	Transport Transport
	// Version is fano's version; a host of another version is refused.
	Version string
	// Routed maps each configured host to the backends the config routes
	// to it.
	Routed map[string][]string
	// Ledger names the orchestrator's WAL, so intents of two WALs never
	// meet in a host's book.
	Ledger string
	Clock  clockwork.Clock
	Logger zerolog.Logger
	// PingEvery is how often each host is pinged (round trip, liveness);
	// LostAfter is how long a connected host may stay unheard before it
	// is lost (a silent partition); ResendWithin is how long a call whose
	// host was lost waits for that same host process to come back before
	// it fails as host_lost. Zero: 1 s, 6 s, 30 s.
	PingEvery, LostAfter, ResendWithin time.Duration
	// StatusFile, if set, is rewritten with the hosts' status every ping.
	StatusFile string
	// OnChange, if set, is told every change of a host's state (from the
	// hub's goroutines: it must not block).
	OnChange func(HostStatus)
}

// Hub is the orchestrator's side: it listens for gateway hosts, keeps
// the host table, and hands out a gateway.Backend for each remote
// backend that sends its requests to the host that holds it.
type Hub struct {
	cfg    HubConfig
	sys    *actor.ActorSystem
	remote *pr.Remote
	pid    *actor.PID
	inbox  *actor.PID // where hosts send their answers

	mu     sync.Mutex
	table  *hostTable
	pids   map[string]*actor.PID // host -> its gateway actor
	outbox map[string]*outbox    // host -> the calls on their way to it
	calls  map[uint64]*pendingCall
	pings  map[uint64]pingSent
	// delivered are the answers that arrived, by host, told to the host
	// with the next ping so it can let them go.
	delivered map[string]*pb.HostPing

	nextCall atomic.Uint64
	nextPing atomic.Uint64
	changed  chan struct{} // closed and replaced at every change of a host's state
	stop     chan struct{}
	stopped  chan struct{}
	once     sync.Once
	refusals onceEvery
}

type pingSent struct {
	host string
	at   time.Time
}

type pendingCall struct {
	host string
	msg  *pb.RemoteCall
	// finish is told the call's outcome, once: by whoever takes the call
	// out of Hub.calls (its answer, its host lost for good, its cancel),
	// outside h.mu.
	finish func(*pb.RemoteAnswer, error)
	// abandoned: its caller's context ended before an answer.
	abandoned atomic.Bool
	lostAt    time.Time
	sentAt    time.Time // last handed to the host's outbox
	// addressed is the request's ConversationAddressed (nil: none).
	addressed func(url string)
}

// lost is a call ended without an answer.
type lost struct {
	c   *pendingCall
	err error
}

func finishLost(ls []lost) {
	for _, l := range ls {
		l.c.finish(nil, l.err)
	}
}

// StartHub starts listening for hosts.
func StartHub(cfg HubConfig) (*Hub, error) {
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	if cfg.PingEvery == 0 {
		cfg.PingEvery = time.Second
	}
	if cfg.LostAfter == 0 {
		cfg.LostAfter = 6 * time.Second
	}
	if cfg.ResendWithin == 0 {
		cfg.ResendWithin = 30 * time.Second
	}
	h := &Hub{cfg: cfg, table: newHostTable(cfg.Version, cfg.Routed), pids: map[string]*actor.PID{}, outbox: map[string]*outbox{},
		calls: map[uint64]*pendingCall{}, pings: map[uint64]pingSent{}, delivered: map[string]*pb.HostPing{},
		stop: make(chan struct{}), stopped: make(chan struct{}), refusals: onceEvery{period: time.Minute},
		changed: make(chan struct{})}
	t := cfg.Transport
	if t.Accept == nil {
		t.Accept = h.acceptHost
	}
	t.Refused = h.refused
	t.Logger = cfg.Logger
	sys, r, err := t.start()
	if err != nil {
		return nil, fmt.Errorf("gateway hosts: %w", err)
	}
	h.sys, h.remote = sys, r
	// Call numbers of this hub never meet an earlier hub's on the same
	// address: a host may still answer a call of the one before.
	h.nextCall.Store(uint64(time.Now().UnixNano()))
	h.pid, err = sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &hubActor{h: h} }), hubActorName)
	if err != nil {
		r.Shutdown(false)
		return nil, fmt.Errorf("gateway hosts: %w", err)
	}
	h.inbox, _ = addInbox(sys, hubInboxName, cfg.Logger, h.receive)
	go h.tick()
	cfg.Logger.Info().Str("event", "remote.hub.listening").Str("address", sys.Address()).Bool("tls", !t.Plaintext).
		Msg("listening for gateway hosts")
	return h, nil
}

// Address is where hosts reach the hub.
func (h *Hub) Address() string { return h.sys.Address() }

// acceptHost admits a certificate whose name is a configured host and
// whose serial is the one last issued to it.
func (h *Hub) acceptHost(name, serial string) error {
	if _, ok := h.cfg.Routed[name]; !ok {
		return errors.New("not a host in the orchestrator's config")
	}
	if id := h.cfg.Transport.Identity; id != nil {
		want, ok, checked := id.issuedSerial(name)
		if !checked {
			return nil
		}
		if !ok {
			return errors.New("no certificate is issued to this host (revoked): enroll it again")
		}
		if want != serial {
			return errors.New("the certificate was replaced by a newer one (revoked): use the newest bundle")
		}
	}
	return nil
}

func (h *Hub) refused(line string) {
	if h.refusals.pass(line, h.cfg.Clock.Now()) {
		h.cfg.Logger.Error().Str("event", "remote.hub.refused").Msg(line)
	}
}

// Close stops the hub: running calls fail as host_lost and the listener
// closes.
func (h *Hub) Close() {
	h.once.Do(func() {
		close(h.stop)
		<-h.stopped
		var ls []lost
		h.mu.Lock()
		for id, c := range h.calls {
			delete(h.calls, id)
			ls = append(ls, lost{c, h.lostFault(c.msg.Backend, c.host, "the orchestrator is stopping", false)})
		}
		h.mu.Unlock()
		finishLost(ls)
		h.sys.Root.Stop(h.pid)
		h.sys.ProcessRegistry.Remove(h.inbox)
		h.remote.Shutdown(false)
		h.sys.Shutdown()
	})
}

// Status is every configured host, by name.
func (h *Hub) Status() []HostStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.table.status()
}

func (h *Hub) tick() {
	defer close(h.stopped)
	t := h.cfg.Clock.NewTicker(h.cfg.PingEvery)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.Chan():
			h.pingAll()
		}
	}
}

// pingAll pings every connected host, loses those unheard too long,
// fails the calls of hosts lost too long, and writes the status file. A
// lost host is not pinged (it would be redialled every second): it says
// hello again once it notices it is not pinged.
func (h *Hub) pingAll() {
	now := h.cfg.Clock.Now()
	h.mu.Lock()
	silent := h.table.silent(now.Add(-h.cfg.LostAfter))
	for _, name := range silent {
		h.loseLocked(name, fmt.Sprintf("not heard for %s (link cut off?)", h.cfg.LostAfter), now)
	}
	defer func() {
		for _, name := range silent {
			h.notify(name)
		}
	}()
	var ls []lost
	defer func() { finishLost(ls) }() // after h.mu is released
	for id, c := range h.calls {
		if !c.lostAt.IsZero() && now.Sub(c.lostAt) >= h.cfg.ResendWithin {
			delete(h.calls, id)
			ls = append(ls, lost{c, h.lostFault(c.msg.Backend, c.host, fmt.Sprintf("did not come back within %s", h.cfg.ResendWithin), false)})
		}
	}
	for seq, p := range h.pings {
		if now.Sub(p.at) > h.cfg.LostAfter {
			delete(h.pings, seq)
		}
	}
	// A call unanswered that long on a host still connected is sent
	// again under its intent: a batch can be lost with a link that is
	// being replaced. The host answers a repeat from what it did.
	var again []*pendingCall
	for _, c := range h.calls {
		if c.lostAt.IsZero() && !c.sentAt.IsZero() && now.Sub(c.sentAt) >= h.cfg.LostAfter {
			if e := h.table.hosts[c.host]; e != nil && e.state == HostConnected && h.outbox[c.host] != nil {
				c.sentAt = now
				again = append(again, c)
			}
		}
	}
	type target struct {
		pid *actor.PID
		msg *pb.HostPing
	}
	var ts []target
	for name, pid := range h.pids {
		if e := h.table.hosts[name]; e == nil || e.state != HostConnected {
			continue
		}
		seq := h.nextPing.Add(1)
		h.pings[seq] = pingSent{host: name, at: now}
		ping := &pb.HostPing{Seq: seq, SentUnixNs: now.UnixNano(), Ledger: h.cfg.Ledger}
		if d := h.delivered[name]; d != nil {
			ping.DeliveredIntents, ping.DeliveredCalls = d.DeliveredIntents, d.DeliveredCalls
			delete(h.delivered, name)
		}
		ts = append(ts, target{pid, ping})
	}
	st := h.table.status()
	// Only a connected host's: a flush to a lost one would have it
	// redialled every tick.
	obs := make([]*outbox, 0, len(h.outbox))
	for name, ob := range h.outbox {
		if e := h.table.hosts[name]; e != nil && e.state == HostConnected {
			obs = append(obs, ob)
		}
	}
	resendTo := make([]*outbox, len(again))
	for i, c := range again {
		resendTo[i] = h.outbox[c.host]
	}
	h.mu.Unlock()
	for i, c := range again {
		resendTo[i].call(c.msg, now)
	}
	for _, ob := range obs {
		ob.kick(now.Add(-h.cfg.PingEvery), now)
	}
	for _, t := range ts {
		h.sys.Root.RequestWithCustomSender(t.pid, t.msg, h.pid)
	}
	if h.cfg.StatusFile != "" {
		if data, err := json.MarshalIndent(HostsFile{WrittenAt: now.UTC(), Hosts: st}, "", "  "); err == nil {
			_ = writeFileFast(h.cfg.StatusFile, append(data, '\n'))
		}
	}
}

// HostsFile is what the hub leaves in the data directory for `fano
// status`.
type HostsFile struct {
	WrittenAt time.Time    `json:"written_at"`
	Hosts     []HostStatus `json:"hosts"`
}

// loseLocked marks a host lost and starts its calls' wait for it.
func (h *Hub) loseLocked(name, reason string, now time.Time) {
	if !h.table.lose(name, reason, now) {
		return
	}
	if ob := h.outbox[name]; ob != nil {
		// Its calls still waiting are sent again when it is back; one
		// that fails or is cancelled meanwhile must not reach it late.
		ob.drop()
	}
	for _, c := range h.calls {
		if c.host == name && c.lostAt.IsZero() {
			c.lostAt = now
		}
	}
	h.cfg.Logger.Warn().Str("event", "remote.host_lost").Str("host", name).Str("reason", reason).
		Msg("gateway host " + name + " lost: its backends wait or move (" + reason + ")")
}

func (h *Hub) lostFault(backend, host, why string, notSent bool) error {
	return &gateway.Fault{Backend: backend, NotSent: notSent,
		Condition: gateway.Condition{State: gateway.StateHostLost, Reason: "host " + host + ": " + why}}
}

// hubActor only translates messages into the hub's calls.
type hubActor struct{ h *Hub }

func (a *hubActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *pb.HostHello:
		a.h.hello(ctx, m)
	case *pb.HostPong:
		a.h.pong(m)
	case *actor.Terminated:
		a.h.terminated(m)
	case *pb.HostBye:
		a.h.bye(m)
		if ctx.Sender() != nil {
			ctx.Respond(&pb.HostBye{})
		}
	}
}

func (h *Hub) hello(ctx actor.Context, m *pb.HostHello) {
	sender := ctx.Sender()
	if sender == nil {
		return
	}
	now := h.cfg.Clock.Now()
	h.mu.Lock()
	out := h.table.hello(m, now)
	h.mu.Unlock()
	out.welcome.Ledger = h.cfg.Ledger
	defer h.notify(m.Host)
	if !out.welcome.Accepted {
		h.refused("remote: refused gateway host " + m.Host + " at " + m.Address + ": " + out.welcome.Reason)
		ctx.Send(sender, out.welcome)
		return
	}
	var resend []*pb.RemoteCall
	var ls []lost
	h.mu.Lock()
	h.pids[m.Host] = sender
	inbox := actor.NewPID(sender.Address, hostInboxName)
	ob := h.outbox[m.Host]
	if ob == nil {
		ob = callsOutbox(h.remote, inbox, h.inbox)
		h.outbox[m.Host] = ob
	}
	for id, c := range h.calls {
		if c.host != m.Host {
			continue
		}
		if out.restart {
			delete(h.calls, id)
			ls = append(ls, lost{c, h.lostFault(c.msg.Backend, c.host, "restarted; the request's answer was lost with the old process", false)})
			continue
		}
		c.lostAt = time.Time{}
		resend = append(resend, c.msg)
	}
	h.mu.Unlock()
	finishLost(ls)
	ctx.Watch(sender)
	ctx.Send(sender, out.welcome)
	// A restarted host's calls failed above: none still queued is sent
	// to the new process.
	ob.retarget(inbox, out.restart, now)
	for _, msg := range resend {
		ob.call(msg, now)
	}
	h.cfg.Logger.Info().Str("event", "remote.host_registered").Str("host", m.Host).Str("address", m.Address).
		Str("version", m.Version).Bool("restarted", out.restart).Int("resent", len(resend)).
		Msg("gateway host " + m.Host + " registered")
}

func (h *Hub) pong(m *pb.HostPong) {
	now := h.cfg.Clock.Now()
	h.mu.Lock()
	p, ok := h.pings[m.Seq]
	delete(h.pings, m.Seq)
	if !ok {
		h.mu.Unlock()
		return
	}
	found := h.table.heard(p.host, m.Instance, now.Sub(p.at), m, now)
	var resend []*pb.RemoteCall
	ob := h.outbox[p.host] // made at the host's hello, which found needs
	if found && ob != nil {
		for _, c := range h.calls {
			if c.host == p.host {
				c.lostAt = time.Time{}
				resend = append(resend, c.msg)
			}
		}
	}
	h.mu.Unlock()
	if found {
		defer h.notify(p.host)
		h.cfg.Logger.Info().Str("event", "remote.host_back").Str("host", p.host).Int("resent", len(resend)).
			Msg("gateway host " + p.host + " is back")
		if ob != nil {
			ob.reflush(now)
		}
		for _, msg := range resend {
			ob.call(msg, now)
		}
	}
}

// receive handles what arrives at the hub's inbox, on the link's
// reader.
func (h *Hub) receive(msg any, _ *actor.PID) {
	switch m := msg.(type) {
	case *pb.RemoteAnswers:
		for _, a := range m.Answers {
			h.answer(a)
		}
	case *pb.RemoteConversationAddressed:
		h.addressed(m)
	}
}

// addressed hands a host's report of a new conversation's address to the
// call that waits for its answer (one of the intent's deliveries); a
// report for a call that has ended is dropped.
func (h *Hub) addressed(m *pb.RemoteConversationAddressed) {
	h.mu.Lock()
	c, ok := h.calls[m.Call]
	if !ok || c.msg.Intent != m.Intent {
		c, ok = nil, false
		for _, pc := range h.calls {
			if m.Intent != 0 && pc.msg.Intent == m.Intent && pc.msg.Backend == m.Backend {
				c, ok = pc, true
				break
			}
		}
	}
	h.mu.Unlock()
	if ok && c.addressed != nil {
		c.addressed(m.Url)
	}
}

func (h *Hub) answer(m *pb.RemoteAnswer) {
	h.mu.Lock()
	c, ok := h.calls[m.Call]
	ok = ok && c.msg.Intent == m.Intent
	if ok {
		delete(h.calls, m.Call)
		d := h.delivered[c.host]
		if d == nil {
			d = &pb.HostPing{}
			h.delivered[c.host] = d
		}
		if m.Intent != 0 {
			d.DeliveredIntents = append(d.DeliveredIntents, m.Intent)
		} else {
			d.DeliveredCalls = append(d.DeliveredCalls, m.Call)
		}
	}
	h.mu.Unlock()
	if ok {
		c.finish(m, nil)
	}
}

func (h *Hub) terminated(m *actor.Terminated) {
	now := h.cfg.Clock.Now()
	var lost []string
	h.mu.Lock()
	for name, pid := range h.pids {
		if pid.Equal(m.Who) {
			h.loseLocked(name, "its link ended ("+m.Why.String()+")", now)
			lost = append(lost, name)
		}
	}
	h.mu.Unlock()
	for _, name := range lost {
		h.notify(name)
	}
}

// Backend is the gateway of backend, held by host: what the executor
// sends it goes to that host.
func (h *Hub) Backend(name, host string) gateway.Backend {
	return &hostBackend{hub: h, name: name, host: host}
}

type hostBackend struct {
	hub        *Hub
	name, host string
}

var _ gateway.Conditioner = (*hostBackend)(nil)

func (b *hostBackend) Name() string { return b.name }

// Host names the gateway host that holds the backend.
func (b *hostBackend) Host() string { return b.host }

func (b *hostBackend) Close() error { return nil }

// AddressesConversations implements gateway.Addresser: as the host said
// of its backend when it registered (a browser reports the address of a
// new conversation as the site gives it: RemoteConversationAddressed);
// a host not registered yet may hold a browser.
func (b *hostBackend) AddressesConversations() bool {
	b.hub.mu.Lock()
	defer b.hub.mu.Unlock()
	return b.hub.table.addresses(b.host, b.name)
}

func (b *hostBackend) Condition() gateway.Condition {
	b.hub.mu.Lock()
	defer b.hub.mu.Unlock()
	return b.hub.table.condition(b.host, b.name)
}

func (b *hostBackend) Health(context.Context) error {
	c := b.Condition()
	if c.State == gateway.StateReady || c.State == "" {
		return nil
	}
	return &gateway.Fault{Backend: b.name, Condition: c}
}

// Send sends req to the host under its intent and waits for the answer
// (SendThen).
func (b *hostBackend) Send(ctx context.Context, req gateway.Request) (gateway.Response, error) {
	type outcome struct {
		resp gateway.Response
		err  error
	}
	done := make(chan outcome, 1)
	b.SendThen(ctx, req, func(resp gateway.Response, err error) { done <- outcome{resp, err} })
	o := <-done
	return o.resp, o.err
}

// SendThen sends req to the host under its intent and tells done the
// outcome, once, from the goroutine that has it (the link's reader, for
// an answer): no goroutine waits while the host works. done must not
// block. A host lost meanwhile gets the same intent again when the same
// process comes back (it answers from what it did); a restarted host, or
// one that stays away, fails the call as host_lost. When ctx ends first
// the host is told to cancel the call and done gets ctx's error.
func (b *hostBackend) SendThen(ctx context.Context, req gateway.Request, done func(gateway.Response, error)) {
	h := b.hub
	call := h.nextCall.Add(1)
	msg := callOf(h.cfg.Ledger, req.IntentSeq, call, b.name, req)
	var stopWatch func() bool
	pc := &pendingCall{host: b.host, msg: msg, addressed: req.ConversationAddressed}
	pc.finish = func(a *pb.RemoteAnswer, err error) {
		if stopWatch != nil {
			stopWatch()
		}
		if err != nil {
			done(gateway.Response{}, err)
			return
		}
		done(responseOf(a))
	}
	h.mu.Lock()
	if c := h.table.condition(b.host, b.name); c.State == gateway.StateHostLost {
		h.mu.Unlock()
		done(gateway.Response{}, &gateway.Fault{Backend: b.name, NotSent: true, Condition: c})
		return
	}
	// A host not registered yet has no outbox: it gets the call with the
	// resends of its registration.
	ob := h.outbox[b.host]
	now := h.cfg.Clock.Now()
	if ob != nil {
		pc.sentAt = now
	}
	h.calls[call] = pc
	// Set before the call can be answered (h.mu is held), so finish sees
	// it.
	if ctx.Done() != nil {
		stopWatch = context.AfterFunc(ctx, func() { b.abandon(ctx, call, msg.Intent) })
	}
	h.mu.Unlock()
	if ob != nil {
		ob.call(msg, now)
		if pc.abandoned.Load() {
			// Its context ended while the call was being queued:
			// abandon's cancel may have gone first.
			ob.cancel(&pb.RemoteCancel{Ledger: h.cfg.Ledger, Intent: msg.Intent, Call: call,
				Shutdown: errors.Is(context.Cause(ctx), gateway.ErrShutdown)}, h.cfg.Clock.Now())
		}
	}
}

// abandon ends call as its caller's context ended, unless it ended
// already: the host is told to cancel it.
func (b *hostBackend) abandon(ctx context.Context, call, intent uint64) {
	h := b.hub
	h.mu.Lock()
	c, ok := h.calls[call]
	delete(h.calls, call)
	ob := h.outbox[b.host]
	h.mu.Unlock()
	if !ok {
		return
	}
	c.abandoned.Store(true)
	shutdown := errors.Is(context.Cause(ctx), gateway.ErrShutdown)
	if ob != nil {
		ob.cancel(&pb.RemoteCancel{Ledger: h.cfg.Ledger, Intent: intent, Call: call, Shutdown: shutdown}, h.cfg.Clock.Now())
	}
	c.finish(nil, fmt.Errorf("%s on host %s: %w", b.name, b.host, ctx.Err()))
}

// notify tells OnChange (and AwaitHosts) the state of host.
func (h *Hub) notify(host string) {
	h.mu.Lock()
	close(h.changed)
	h.changed = make(chan struct{})
	h.mu.Unlock()
	if h.cfg.OnChange == nil {
		return
	}
	for _, st := range h.Status() {
		if st.Name == host {
			h.cfg.OnChange(st)
		}
	}
}

// bye: the host stops; its backends are lost now, not after the link's
// end is noticed.
func (h *Hub) bye(m *pb.HostBye) {
	now := h.cfg.Clock.Now()
	h.mu.Lock()
	e, ok := h.table.hosts[m.Host]
	if ok && e.instance == m.Instance {
		h.loseLocked(m.Host, "it stopped", now)
	}
	h.mu.Unlock()
	if ok {
		h.notify(m.Host)
	}
}

// Unreached is the backend of a gateway host for a process that does
// not listen for hosts (a command that reads the data directory): it
// says its host is not connected and sends nothing.
func Unreached(name, host string) gateway.Backend { return unreached{name: name, host: host} }

type unreached struct{ name, host string }

func (u unreached) Name() string { return u.name }
func (u unreached) Close() error { return nil }
func (u unreached) Condition() gateway.Condition {
	return gateway.Condition{State: gateway.StateHostLost, Reason: "host " + u.host + " is reached only by a running orchestrator"}
}
func (u unreached) Health(context.Context) error {
	return &gateway.Fault{Backend: u.name, Condition: u.Condition()}
}
func (u unreached) Send(context.Context, gateway.Request) (gateway.Response, error) {
	return gateway.Response{}, &gateway.Fault{Backend: u.name, NotSent: true, Condition: u.Condition()}
}

// AwaitHosts waits until every configured host has registered (or was
// refused), at most within: a start of the orchestrator gives hosts that
// were waiting for it the moment to say hello before work is handed out,
// so their backends are not parked as lost at once.
func (h *Hub) AwaitHosts(within time.Duration) {
	deadline := h.cfg.Clock.NewTimer(within)
	defer deadline.Stop()
	for {
		h.mu.Lock()
		waiting := false
		for _, st := range h.table.status() {
			if st.State == HostNever {
				waiting = true
			}
		}
		changed := h.changed
		h.mu.Unlock()
		if !waiting {
			return
		}
		select {
		case <-changed:
		case <-deadline.Chan():
			return
		case <-h.stop:
			return
		}
	}
}
