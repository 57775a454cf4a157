package remote

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pr "github.com/asynkron/protoactor-go/remote"
	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"

	"fano/gateway"
	"fano/pb"
)

// HostConfig configures a gateway host (`fano gateway serve`).
type HostConfig struct {
	// Name is the host's name (its certificate's).
	Name      string
	Transport Transport
	// Orchestrator is host:port of the orchestrator's hub.
	Orchestrator string
	Version      string
	// Backends are the backends this host holds, each with its type.
	Backends []gateway.Backend
	Types    map[string]string
	Clock    clockwork.Clock
	Logger   zerolog.Logger
	// HelloEvery is how often an unregistered host says hello; LostAfter
	// how long a registered host may go without the orchestrator's ping
	// before it registers again. Zero: 1 s and 6 s.
	HelloEvery, LostAfter time.Duration
	// KeepAnswers is how long the outcome of an intent is kept for a
	// repeat, MaxAnswers how many. Zero: 1 h, 10,000.
	KeepAnswers time.Duration
	MaxAnswers  int
	// StatusFile, if set, is rewritten with the host's status.
	StatusFile string
	// ProbeEvery is how often a host the orchestrator does not answer
	// checks whether its certificate is refused (revoked, or replaced
	// since it started), to say so in one line. Zero: 10 s.
	ProbeEvery time.Duration
	// JournalFile, if set, is where the prompts handed to browser
	// backends are noted, so that a prompt left on a page by a process
	// that died is read from the page, not sent again, by the next.
	JournalFile string
}

// Host is a gateway host: it serves its backends to the orchestrator.
type Host struct {
	cfg      HostConfig
	sys      *actor.ActorSystem
	remote   *pr.Remote
	pid      *actor.PID
	inbox    *actor.PID // where the orchestrator sends calls
	hub      *actor.PID
	answers  sync.Map // pidKey -> *outbox: the answers on their way to each who calls
	instance string
	backends map[string]gateway.Backend
	book     *intentBook
	journal  *promptJournal // nil: no browser backends, or no JournalFile

	mu        sync.Mutex
	connected bool
	since     time.Time
	lastHeard time.Time
	refused   string
	linkErr   string    // why the last probe of an unanswered host failed
	probedAt  time.Time // when an unanswered host last probed the link

	refusedCh chan error
	stop      chan struct{}
	stopped   chan struct{}
	once      sync.Once
	refusals  onceEvery
}

// HostStatusFile is what a host leaves for `fano gateway status`.
type HostStatusFile struct {
	WrittenAt    time.Time `json:"written_at"`
	PID          int       `json:"pid"`
	Host         string    `json:"host"`
	Address      string    `json:"address"`
	Orchestrator string    `json:"orchestrator"`
	Connected    bool      `json:"connected"`
	Since        time.Time `json:"since,omitzero"`
	LastHeard    time.Time `json:"last_heard,omitzero"`
	Refused      string    `json:"refused,omitempty"`
	LinkError    string    `json:"link_error,omitempty"`
	Backends     []string  `json:"backends"`
	Running      int       `json:"running"`
	AnswersKept  int       `json:"answers_kept"`
}

// StartHost starts serving and registering with the orchestrator.
func StartHost(cfg HostConfig) (*Host, error) {
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	if cfg.HelloEvery == 0 {
		cfg.HelloEvery = time.Second
	}
	if cfg.LostAfter == 0 {
		cfg.LostAfter = 6 * time.Second
	}
	if cfg.ProbeEvery == 0 {
		cfg.ProbeEvery = 10 * time.Second
	}
	if cfg.KeepAnswers == 0 {
		cfg.KeepAnswers = time.Hour
	}
	if cfg.MaxAnswers == 0 {
		cfg.MaxAnswers = 10000
	}
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	h := &Host{cfg: cfg, instance: hex.EncodeToString(nonce[:]), backends: map[string]gateway.Backend{},
		book: newIntentBook(cfg.KeepAnswers, cfg.MaxAnswers), refusedCh: make(chan error, 1),
		stop: make(chan struct{}), stopped: make(chan struct{}), refusals: onceEvery{period: time.Minute}}
	for _, b := range cfg.Backends {
		h.backends[b.Name()] = b
		if cfg.Types[b.Name()] == "browser" && cfg.JournalFile != "" && h.journal == nil {
			j, err := openPromptJournal(cfg.JournalFile)
			if err != nil {
				return nil, fmt.Errorf("gateway host %s: %w", cfg.Name, err)
			}
			h.journal = j
		}
	}
	t := cfg.Transport
	t.Accept = func(name, _ string) error {
		if name != OrchestratorName {
			return fmt.Errorf("a gateway host talks only to %s", OrchestratorName)
		}
		return nil
	}
	t.Refused = func(line string) {
		if h.refusals.pass(line, cfg.Clock.Now()) {
			cfg.Logger.Error().Str("event", "remote.host.refused").Msg(line)
		}
	}
	t.Logger = cfg.Logger
	if !t.Plaintext {
		// Ask once, before the transport hides it in its retries, whether
		// the orchestrator takes this host's certificate.
		if err := t.probe(cfg.Orchestrator); err != nil {
			return nil, err
		}
	}
	sys, r, err := t.start()
	if err != nil {
		return nil, fmt.Errorf("gateway host %s: %w", cfg.Name, err)
	}
	h.sys, h.remote = sys, r
	h.hub = actor.NewPID(cfg.Orchestrator, hubActorName)
	h.pid, err = sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &hostActor{h: h} }), hostActorName)
	if err != nil {
		r.Shutdown(false)
		return nil, fmt.Errorf("gateway host %s: %w", cfg.Name, err)
	}
	h.inbox, _ = addInbox(sys, hostInboxName, cfg.Logger, h.receive)
	go h.loop()
	return h, nil
}

// probe dials the orchestrator once with this host's certificate (TLS
// 1.2, where a refused client certificate fails the handshake itself) so
// a refusal is one clear line here too; an orchestrator not up yet is no
// error (the host keeps saying hello).
func (t Transport) probe(address string) error {
	_, cli := t.tlsConfigs()
	cli.MaxVersion = tls.VersionTLS12
	cli.NextProtos = []string{"h2"} // gRPC refuses a handshake without it
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", address, cli)
	if err != nil {
		var ne net.Error
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Op == "dial" || errors.As(err, &ne) && ne.Timeout() {
			return nil
		}
		if strings.Contains(err.Error(), "remote: refused the peer") {
			return fmt.Errorf("this host refused the orchestrator at %s: %w", address, err)
		}
		return fmt.Errorf("the orchestrator at %s refused this host's certificate (%w): enroll the host again with `fano remote enroll` on the orchestrator", address, err)
	}
	return conn.Close()
}

// Address is where the orchestrator reaches this host.
func (h *Host) Address() string { return h.sys.Address() }

// Refused delivers the orchestrator's refusal (version, unknown host):
// the host cannot serve and should stop.
func (h *Host) Refused() <-chan error { return h.refusedCh }

// Close stops the host: running calls are cancelled as at a shutdown (a
// browser leaves its answer on the page).
func (h *Host) Close() {
	h.once.Do(func() {
		close(h.stop)
		<-h.stopped
		h.book.cancelAll(true)
		// Said before the link goes: a stopping host is lost at once.
		_, _ = h.sys.Root.RequestFuture(h.hub, &pb.HostBye{Host: h.cfg.Name, Instance: h.instance}, time.Second).Result()
		h.sys.Root.Stop(h.pid)
		h.sys.ProcessRegistry.Remove(h.inbox)
		h.remote.Shutdown(false)
		h.sys.Shutdown()
		_ = h.journal.close()
	})
}

// Status is the host's own view.
func (h *Host) Status() HostStatusFile {
	h.mu.Lock()
	st := HostStatusFile{Host: h.cfg.Name, Address: h.sys.Address(), Orchestrator: h.cfg.Orchestrator,
		Connected: h.connected, Since: h.since, LastHeard: h.lastHeard, Refused: h.refused, LinkError: h.linkErr}
	h.mu.Unlock()
	for name := range h.backends {
		st.Backends = append(st.Backends, name)
	}
	sort.Strings(st.Backends)
	st.Running, st.AnswersKept = h.book.counts()
	return st
}

func (h *Host) loop() {
	defer close(h.stopped)
	t := h.cfg.Clock.NewTicker(h.cfg.HelloEvery)
	defer t.Stop()
	h.hello()
	for {
		select {
		case <-h.stop:
			return
		case <-t.Chan():
		}
		now := h.cfg.Clock.Now()
		h.mu.Lock()
		if h.connected && now.Sub(h.lastHeard) > h.cfg.LostAfter {
			h.connected = false
			h.cfg.Logger.Warn().Str("event", "remote.orchestrator_lost").Str("orchestrator", h.cfg.Orchestrator).
				Msg("the orchestrator was not heard for " + h.cfg.LostAfter.String() + ": registering again")
		}
		again := !h.connected && h.refused == ""
		probe := again && !h.cfg.Transport.Plaintext && now.Sub(h.probedAt) >= h.cfg.ProbeEvery
		if probe {
			h.probedAt = now
		}
		h.mu.Unlock()
		if again {
			h.hello()
		}
		h.answers.Range(func(_, ob any) bool {
			ob.(*outbox).kick(now.Add(-h.cfg.HelloEvery), now)
			return true
		})
		if probe {
			h.probeLink()
		}
		if h.cfg.StatusFile != "" {
			st := h.Status()
			st.WrittenAt, st.PID = now.UTC(), os.Getpid()
			if data, err := json.MarshalIndent(st, "", "  "); err == nil {
				_ = writeFileFast(h.cfg.StatusFile, append(data, '\n'))
			}
		}
	}
}

// probeLink says, once in a line, why the orchestrator does not answer
// when its TLS refuses this host; the transport's redials do not.
func (h *Host) probeLink() {
	t := h.cfg.Transport
	t.Accept = func(name, _ string) error {
		if name != OrchestratorName {
			return fmt.Errorf("a gateway host talks only to %s", OrchestratorName)
		}
		return nil
	}
	t.Refused = nil
	err := t.probe(h.cfg.Orchestrator)
	h.mu.Lock()
	h.linkErr = ""
	if err != nil {
		h.linkErr = err.Error()
	}
	h.mu.Unlock()
	if err != nil && h.refusals.pass(err.Error(), h.cfg.Clock.Now()) {
		h.cfg.Logger.Error().Str("event", "remote.host.refused").Msg("gateway host " + h.cfg.Name + ": " + err.Error())
	}
}

func (h *Host) hello() {
	m := &pb.HostHello{Host: h.cfg.Name, Version: h.cfg.Version, Instance: h.instance, Address: h.sys.Address()}
	names := make([]string, 0, len(h.backends))
	for name := range h.backends {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		a, ok := gateway.As[gateway.Addresser](h.backends[name])
		m.Backends = append(m.Backends, &pb.HostBackend{Name: name, Type: h.cfg.Types[name],
			AddressesConversations: ok && a.AddressesConversations()})
	}
	h.sys.Root.RequestWithCustomSender(h.hub, m, h.pid)
}

// hostActor only translates messages into the host's calls.
type hostActor struct{ h *Host }

func (a *hostActor) Receive(ctx actor.Context) {
	h := a.h
	switch m := ctx.Message().(type) {
	case *pb.HostPing:
		h.heard()
		h.book.delivered(m.Ledger, m.DeliveredIntents, m.DeliveredCalls)
		if s := ctx.Sender(); s != nil {
			ctx.Send(s, h.pong(m))
		}
	case *pb.HostWelcome:
		h.welcome(ctx, m)
	case *actor.Terminated:
		h.mu.Lock()
		if h.connected {
			h.connected = false
			h.cfg.Logger.Warn().Str("event", "remote.orchestrator_lost").Str("orchestrator", h.cfg.Orchestrator).
				Msg("the link to the orchestrator ended: registering again")
		}
		h.mu.Unlock()
	}
}

// receive handles what arrives at the host's inbox, on the link's
// reader: nothing here waits.
func (h *Host) receive(msg any, sender *actor.PID) {
	if m, ok := msg.(*pb.RemoteCalls); ok {
		h.heard()
		var run []func()
		var then func()
		if sender != nil && len(m.Calls) > 0 {
			// The answers the batch's calls give as they run go together,
			// once every call has run or is waiting on its backend.
			ob := h.answersTo(sender)
			ob.hold()
			then = func() { ob.release(h.cfg.Clock.Now()) }
			defer func() {
				if then != nil { // a call's start panicked: nothing will release
					then()
				}
			}()
			for _, c := range m.Calls {
				if fn := h.call(sender, ob, c); fn != nil {
					run = append(run, fn)
				}
			}
		}
		// Cancelled before they start, a batch's calls of a cancel in the
		// same batch end as cancelled.
		for _, c := range m.Cancels {
			h.cancel(c)
		}
		calls.GoEach(run, then)
		then = nil
	}
}

func (h *Host) cancel(m *pb.RemoteCancel) {
	h.book.cancel(intentKey{ledger: m.Ledger, intent: m.Intent, call: callIfNoIntent(m.Intent, m.Call)}, m.Call, m.Shutdown)
}

// pidKey names a PID without building a string.
type pidKey struct{ address, id string }

// answersTo is the outbox of the answers to who.
func (h *Host) answersTo(who *actor.PID) *outbox {
	k := pidKey{who.Address, who.Id}
	if ob, ok := h.answers.Load(k); ok {
		return ob.(*outbox)
	}
	ob, _ := h.answers.LoadOrStore(k, answersOutbox(h.remote, who))
	return ob.(*outbox)
}

func callIfNoIntent(intent, call uint64) uint64 {
	if intent != 0 {
		return 0
	}
	return call
}

func (h *Host) heard() {
	h.mu.Lock()
	h.lastHeard = h.cfg.Clock.Now()
	h.mu.Unlock()
}

func (h *Host) welcome(ctx actor.Context, m *pb.HostWelcome) {
	now := h.cfg.Clock.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if !m.Accepted {
		if h.refused == "" {
			h.refused = m.Reason
			line := "gateway host " + h.cfg.Name + ": the orchestrator refused it: " + m.Reason
			h.cfg.Logger.Error().Str("event", "remote.host.refused").Msg(line)
			h.refusedCh <- errors.New(line)
		}
		return
	}
	if !h.connected {
		h.cfg.Logger.Info().Str("event", "remote.registered").Str("orchestrator", h.cfg.Orchestrator).
			Msg("registered with the orchestrator at " + h.cfg.Orchestrator)
		h.since = now
	}
	h.connected, h.lastHeard = true, now
	ctx.Watch(h.hub)
}

func (h *Host) pong(m *pb.HostPing) *pb.HostPong {
	p := &pb.HostPong{Seq: m.Seq, SentUnixNs: m.SentUnixNs, Instance: h.instance}
	running, _ := h.book.counts()
	p.Running = int32(running)
	for name, b := range h.backends {
		if c, ok := gateway.As[gateway.Conditioner](b); ok {
			cond := c.Condition()
			if cond.State != "" && cond.State != gateway.StateReady {
				p.Conditions = append(p.Conditions, &pb.HostBackendCondition{Backend: name, State: string(cond.State),
					Reason: cond.Reason, UntilUnixNs: unixNanos(cond.Until)})
			}
		}
	}
	return p
}

// call answers a request from the book when its intent was seen before,
// or returns what runs it (on a goroutine of its own: a backend's call
// blocks).
func (h *Host) call(sender *actor.PID, ob *outbox, m *pb.RemoteCall) (run func()) {
	reply := func(a *pb.RemoteAnswer) { ob.answer(a, h.cfg.Clock.Now()) }
	k := keyOf(m)
	w := waiter{call: m.Call, reply: func(a *pb.RemoteAnswer) {
		if a.Call != m.Call {
			a = proto.Clone(a).(*pb.RemoteAnswer) // another delivery of the intent: only Call differs
			a.Call = m.Call
		}
		reply(a)
	}}
	outcome, done := h.book.begin(k, w, h.cfg.Clock.Now())
	switch outcome {
	case beginAnswered:
		out := proto.Clone(done).(*pb.RemoteAnswer)
		out.Intent, out.Call, out.Backend, out.Repeated = m.Intent, m.Call, m.Backend, true
		reply(out)
		return nil
	case beginAttached:
		return nil
	}
	b, ok := h.backends[m.Backend]
	if !ok {
		a := answerOf(m, gateway.Response{}, gateway.Unavailable(m.Backend, "host %s does not hold backend %s", h.cfg.Name, m.Backend))
		for _, w := range h.book.finish(k, a, false, h.cfg.Clock.Now()) {
			w.reply(a)
		}
		return nil
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	h.book.running(k, func(shutdown bool) {
		if shutdown {
			cancel(gateway.ErrShutdown)
		} else {
			cancel(context.Canceled)
		}
	})
	return func() {
		req := requestOf(m)
		if a, ok := gateway.As[gateway.Addresser](b); ok && a.AddressesConversations() {
			// The address of a new conversation goes back at once, as its
			// own message (not queued behind answers): a report lost on
			// the way costs nothing, the answer carries the address too.
			req.ConversationAddressed = func(url string) {
				h.remote.SendMessage(sender, nil, addressedOf(m, url), nil, -1)
			}
		}
		journal := h.journal != nil && h.cfg.Types[m.Backend] == "browser"
		if journal {
			again, err := h.journal.begin(req.TaskID, req.Prompt)
			if err != nil {
				h.cfg.Logger.Error().Err(err).Str("event", "remote.journal_failed").Msg("could not note the prompt")
			}
			// An earlier process of this host left it on the page.
			req.Interrupted = req.Interrupted || again
		}
		resp, err := send(ctx, b, req)
		cancelled := err != nil && ctx.Err() != nil
		cancel(nil)
		if journal && !cancelled {
			// Cancelled (a shutdown): the answer may still come on the
			// page; the next process reads it there.
			_ = h.journal.done(req.TaskID, req.Prompt)
		}
		a := answerOf(m, resp, err)
		for _, w := range h.book.finish(k, a, !cancelled, h.cfg.Clock.Now()) {
			w.reply(a)
		}
	}
}

// calls runs the backends' calls of every host of the process.
var calls = newWarmPool(128)

// send runs one request; a panic in a backend is a permanent error of
// that request, not the end of the host.
func send(ctx context.Context, b gateway.Backend, req gateway.Request) (resp gateway.Response, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = gateway.Permanent(b.Name(), "backend panicked: %v", r)
		}
	}()
	return b.Send(ctx, req)
}
