package control

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/rs/zerolog"

	"fano/actors"
	"fano/pb"
)

// Event is one message of the /api/events websocket. It carries facts,
// sizes and timings — never prompt or answer text.
type Event struct {
	Seq  uint64    `json:"seq"`  // per panel, increasing; a gap means events were dropped
	Type string    `json:"type"` // task | llm | quota | module | health
	Kind string    `json:"kind"` // e.g. task_started, llm_request_finished, quota_used, seed_added, disk_low
	At   time.Time `json:"at"`

	TaskID   string `json:"task_id,omitempty"`
	Module   string `json:"module,omitempty"`
	TaskType string `json:"task_type,omitempty"`
	State    string `json:"state,omitempty"` // the task's new state
	LLM      string `json:"llm,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Error    string `json:"error,omitempty"`

	Turn             int32   `json:"turn,omitempty"`
	DeepMode         bool    `json:"deep_mode,omitempty"`
	Resend           bool    `json:"resend,omitempty"`
	PromptBytes      int     `json:"prompt_bytes,omitempty"`
	Images           int     `json:"images,omitempty"`
	ResponseBytes    int     `json:"response_bytes,omitempty"`
	DurationMS       float64 `json:"duration_ms,omitempty"`
	PromptTokens     int64   `json:"prompt_tokens,omitempty"`
	CompletionTokens int64   `json:"completion_tokens,omitempty"`
	// A browser answer: its new conversation was primed with this many
	// earlier turns; it was read from the page after a restart; it stalled.
	PrimedTurns int32  `json:"primed_turns,omitempty"`
	FromPage    bool   `json:"from_page,omitempty"`
	Incomplete  string `json:"incomplete,omitempty"`

	Backend string     `json:"backend,omitempty"`
	Until   *time.Time `json:"until,omitempty"`

	Component string            `json:"component,omitempty"`
	Data      map[string]string `json:"data,omitempty"`
}

// maxErrorText bounds error text in events: enough to diagnose, and an
// error that quotes an answer cannot carry it whole to the page.
const maxErrorText = 240

func clip(s string) string {
	if len(s) <= maxErrorText {
		return s
	}
	cut := maxErrorText
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// moduleOf reads the module from a deterministic task id "module/type/subject".
func moduleOf(taskID string) string {
	m, _, ok := strings.Cut(taskID, "/")
	if !ok {
		return ""
	}
	return m
}

// toEvent converts a notice; nil for what the feed does not show.
func toEvent(n actors.Notice) *Event {
	if u := n.Update; u != nil {
		return &Event{Type: "health", Kind: u.GetUpdateType(), Component: u.GetComponent(), Data: u.GetData(), At: time.Unix(0, u.GetAt()).UTC()}
	}
	e := n.Event
	if e == nil {
		return nil
	}
	ev := &Event{At: time.Unix(0, e.GetAt()).UTC()}
	task := func(kind, id, state string) *Event {
		ev.Type, ev.Kind, ev.TaskID, ev.State, ev.Module = "task", kind, id, state, moduleOf(id)
		return ev
	}
	switch b := e.Body.(type) {
	case *pb.Event_TaskSubmitted:
		t := b.TaskSubmitted.GetTask()
		task("task_submitted", t.GetId(), "PENDING")
		ev.Module, ev.TaskType = t.GetModule(), t.GetTaskType()
	case *pb.Event_TaskStarted:
		task("task_started", b.TaskStarted.GetTaskId(), "RUNNING").LLM = b.TaskStarted.GetLlm()
	case *pb.Event_TaskPaused:
		task("task_paused", b.TaskPaused.GetTaskId(), "PAUSED").Reason = b.TaskPaused.GetReason()
	case *pb.Event_TaskResumed:
		task("task_resumed", b.TaskResumed.GetTaskId(), "PENDING")
	case *pb.Event_TaskRequeued:
		task("task_requeued", b.TaskRequeued.GetTaskId(), "PENDING").Reason = b.TaskRequeued.GetReason()
	case *pb.Event_TaskRetryScheduled:
		task("task_retry_scheduled", b.TaskRetryScheduled.GetTaskId(), "PENDING").Error = clip(b.TaskRetryScheduled.GetError())
	case *pb.Event_TaskCompleted:
		task("task_completed", b.TaskCompleted.GetTaskId(), "COMPLETED")
	case *pb.Event_TaskFailed:
		task("task_failed", b.TaskFailed.GetTaskId(), "FAILED").Error = clip(b.TaskFailed.GetError())
	case *pb.Event_TaskCancelled:
		task("task_cancelled", b.TaskCancelled.GetTaskId(), "CANCELLED").Reason = b.TaskCancelled.GetReason()
	case *pb.Event_TaskForgotten:
		// One line for a batch: its first task, and how many left.
		ev := task("task_forgotten", b.TaskForgotten.GetTaskId(), "")
		if n := len(b.TaskForgotten.GetMoreTaskIds()); n > 0 {
			ev.Reason = fmt.Sprintf("%d finished tasks left memory", n+1)
		}
	case *pb.Event_LlmRequestStarted:
		r := b.LlmRequestStarted
		ev.Type, ev.Kind, ev.TaskID, ev.Module, ev.LLM = "llm", "llm_request_started", r.GetTaskId(), moduleOf(r.GetTaskId()), r.GetLlm()
		ev.Turn, ev.DeepMode, ev.Resend, ev.PromptBytes, ev.Images = r.GetTurn(), r.GetDeepMode(), r.GetResend(), len(r.GetPrompt()), len(r.GetImages())
	case *pb.Event_LlmResponseReceived:
		r := b.LlmResponseReceived
		ev.Type, ev.Kind, ev.TaskID, ev.Module, ev.LLM = "llm", "llm_request_finished", r.GetTaskId(), moduleOf(r.GetTaskId()), r.GetLlm()
		ev.Turn, ev.ResponseBytes = r.GetTurn(), len(r.GetContent())
		ev.DurationMS = float64(r.GetDurationNs()) / 1e6
		ev.PromptTokens, ev.CompletionTokens = r.GetPromptTokens(), r.GetCompletionTokens()
		ev.PrimedTurns, ev.FromPage, ev.Incomplete = r.GetPrimedTurns(), r.GetFromPage(), clip(r.GetIncomplete())
	case *pb.Event_LlmRequestFailed:
		r := b.LlmRequestFailed
		ev.Type, ev.Kind, ev.TaskID, ev.Module, ev.LLM = "llm", "llm_request_failed", r.GetTaskId(), moduleOf(r.GetTaskId()), r.GetLlm()
		ev.Turn, ev.Reason, ev.Error = r.GetTurn(), r.GetKind(), clip(r.GetError())
	case *pb.Event_QuotaUsed:
		q := b.QuotaUsed
		ev.Type, ev.Kind, ev.Backend, ev.DeepMode, ev.TaskID = "quota", "quota_used", q.GetBackend(), q.GetDeepMode(), q.GetTaskId()
	case *pb.Event_RateLimitRecorded:
		q := b.RateLimitRecorded
		ev.Type, ev.Kind, ev.Backend, ev.TaskID = "quota", "rate_limited", q.GetBackend(), q.GetTaskId()
		if q.GetUntil() != 0 {
			t := time.Unix(0, q.GetUntil()).UTC()
			ev.Until = &t
		}
	case *pb.Event_QuotaReleased:
		q := b.QuotaReleased
		ev.Type, ev.Kind, ev.Backend, ev.DeepMode, ev.TaskID = "quota", "quota_released", q.GetBackend(), q.GetDeepMode(), q.GetTaskId()
	case *pb.Event_BackendConditionRecorded:
		c := b.BackendConditionRecorded
		ev.Type, ev.Kind, ev.Backend, ev.Reason = "quota", "backend_"+cmp.Or(c.GetState(), "ready"), c.GetBackend(), c.GetReason()
		if c.GetUntil() != 0 {
			t := time.Unix(0, c.GetUntil()).UTC()
			ev.Until = &t
		}
	case *pb.Event_HourWindowReset:
		ev.Type, ev.Kind = "quota", "hour_window_reset"
	case *pb.Event_DayWindowReset:
		ev.Type, ev.Kind = "quota", "day_window_reset"
	case *pb.Event_BackendPaused:
		ev.Type, ev.Kind, ev.Backend, ev.Reason = "quota", "backend_paused", b.BackendPaused.GetBackend(), b.BackendPaused.GetReason()
	case *pb.Event_BackendResumed:
		ev.Type, ev.Kind, ev.Backend = "quota", "backend_resumed", b.BackendResumed.GetBackend()
	case *pb.Event_ModuleEvent:
		me := b.ModuleEvent
		module := me.GetModule()
		if module == "" {
			module = strings.TrimPrefix(n.Owner, "module/")
		}
		ev.Type, ev.Kind, ev.Module, ev.TaskID = "module", me.GetType(), module, me.GetTaskId()
	default:
		return nil
	}
	return ev
}

// hub fans events out to websocket clients. The system's callback only
// offers notices to a bounded queue (dropping, and counting, when it is
// full); one goroutine converts and encodes each event once and offers
// the bytes to every client's bounded queue. A client whose queue is full
// is dropped: a slow browser costs its own connection, nothing else.
type hub struct {
	logger  zerolog.Logger
	buffer  int
	metrics *metrics
	in      chan actors.Notice
	done    chan struct{}
	stopped chan struct{}
	seq     uint64       // of the last event sent
	lost    atomic.Int64 // notices dropped at offer since the last event: a gap in seq says so

	mu      sync.Mutex
	clients map[*client]struct{}
	closed  bool
}

// client is one websocket connection. drop closes gone and cancels the
// connection's write context, so a write blocked on a client that does not
// read returns at once.
type client struct {
	send   chan []byte
	gone   chan struct{}
	cancel context.CancelFunc
	once   sync.Once
	reason atomic.Pointer[string]
}

func (c *client) drop(reason string) {
	c.once.Do(func() {
		c.reason.Store(&reason)
		close(c.gone)
		c.cancel()
	})
}

const hubQueue = 4096

func newHub(logger zerolog.Logger, buffer int, m *metrics) *hub {
	h := &hub{logger: logger, buffer: buffer, metrics: m, in: make(chan actors.Notice, hubQueue),
		done: make(chan struct{}), stopped: make(chan struct{}), clients: map[*client]struct{}{}}
	go h.loop()
	return h
}

// offer never blocks: it runs in actor goroutines.
func (h *hub) offer(n actors.Notice) {
	select {
	case h.in <- n:
	default:
		h.lost.Add(1)
		h.metrics.eventsDropped.Inc()
	}
}

func (h *hub) loop() {
	defer close(h.stopped)
	for {
		select {
		case n := <-h.in:
			h.broadcast(n)
		case <-h.done:
			return
		}
	}
}

func (h *hub) broadcast(n actors.Notice) {
	ev := toEvent(n)
	if ev == nil {
		return
	}
	h.seq += 1 + uint64(h.lost.Swap(0))
	ev.Seq = h.seq
	data, err := json.Marshal(ev)
	if err != nil {
		h.logger.Error().Err(err).Str("event", "control.panel.event_encode_failed").Str("kind", ev.Kind).Msg("encode event")
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.clients {
		select {
		case c.send <- data:
		default:
			h.removeLocked(c, "too slow: more than the buffered events were waiting")
		}
	}
}

func (h *hub) add(cancel context.CancelFunc) (*client, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, false
	}
	c := &client{send: make(chan []byte, h.buffer), gone: make(chan struct{}), cancel: cancel}
	h.clients[c] = struct{}{}
	h.metrics.wsClients.Inc()
	return c, true
}

func (h *hub) remove(c *client, reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.removeLocked(c, reason)
}

func (h *hub) removeLocked(c *client, reason string) {
	if _, ok := h.clients[c]; !ok {
		return
	}
	delete(h.clients, c)
	h.metrics.wsClients.Dec()
	if strings.HasPrefix(reason, "too slow") {
		h.metrics.wsDropped.Inc()
		h.logger.Warn().Str("event", "control.panel.ws_client_dropped").Str("reason", reason).Msg("websocket client dropped")
	}
	c.drop(reason)
}

func (h *hub) close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	for c := range h.clients {
		h.removeLocked(c, "fano is stopping")
	}
	h.mu.Unlock()
	close(h.done)
	<-h.stopped
}

// writeTimeout bounds one websocket write; a client that takes longer is
// as good as gone.
const writeTimeout = 10 * time.Second

// handleEvents upgrades to a websocket and streams events. The Origin must
// be the page's own host or one of control.allowed_origins.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	if err := s.checkOrigin(r); err != nil {
		s.logger.Warn().Str("event", "control.panel.ws_origin_refused").Str("origin", r.Header.Get("Origin")).
			Str("remote", r.RemoteAddr).Msg("websocket from a foreign origin refused")
		writeError(w, http.StatusForbidden, "%v", err)
		return
	}
	// The client is registered before the handshake completes, so once a
	// client sees the upgrade it receives every later event. wctx ends
	// when the client is dropped or its connection closes; it bounds
	// every write, so a write blocked on a client that does not read
	// returns as soon as the hub drops it.
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	c, ok := s.hub.add(wcancel)
	if !ok {
		writeError(w, http.StatusServiceUnavailable, "fano is stopping")
		return
	}
	defer s.hub.remove(c, "closed")
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{OriginPatterns: s.opts.AllowedOrigins})
	if err != nil {
		return // Accept has answered
	}
	defer conn.CloseNow()
	// The reader discards what the client sends and ends ctx when the
	// client closes.
	ctx := conn.CloseRead(r.Context())
	stop := context.AfterFunc(ctx, wcancel)
	defer stop()
	for {
		select {
		case data := <-c.send:
			tctx, tcancel := context.WithTimeout(wctx, writeTimeout)
			err := conn.Write(tctx, websocket.MessageText, data)
			tcancel()
			if err != nil {
				return
			}
		case <-c.gone:
			closeClient(conn, c)
			return
		case <-wctx.Done():
			select {
			case <-c.gone:
				closeClient(conn, c)
			default:
			}
			return
		}
	}
}

// closeClient ends a dropped client's connection. A client dropped for
// being slow is not reading, so it gets no close handshake: its
// connection is cut at once. At shutdown the client gets a "going away"
// close frame (the library bounds that handshake by its own timeouts).
func closeClient(conn *websocket.Conn, c *client) {
	reason := "closed"
	if p := c.reason.Load(); p != nil {
		reason = *p
	}
	if reason == "fano is stopping" {
		_ = conn.Close(websocket.StatusGoingAway, reason)
		return
	}
	_ = conn.CloseNow()
}

// checkOrigin allows no Origin (not a browser: the CLI, curl), the page's
// own host, and control.allowed_origins.
func (s *Server) checkOrigin(r *http.Request) error {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	o := strings.TrimSuffix(origin, "/")
	for _, scheme := range []string{"http://", "https://"} {
		if strings.EqualFold(o, scheme+r.Host) {
			return nil
		}
	}
	for _, a := range s.opts.AllowedOrigins {
		if strings.EqualFold(o, strings.TrimSuffix(a, "/")) {
			return nil
		}
	}
	return errors.New("origin " + origin + " is not allowed: open the panel from its own address, or add the origin to control.allowed_origins")
}
