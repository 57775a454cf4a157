package control

import (
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fano/gateway"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"fano/actors"
	"fano/actors/allocator"
	"fano/actors/scheduler"
	"fano/modules"
	"fano/pb"
)

// maxBody bounds a request body: seeds and comments are prose, not files.
const maxBody = 1 << 20

// defaultLimit and maxLimit bound GET /api/orchestrator/tasks.
const (
	defaultLimit = 50
	maxLimit     = 10000
)

func (s *Server) routes() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("GET /healthz", s.handleHealthz)
	m.Handle("GET /metrics", s.metrics.handler())
	m.HandleFunc("GET /api/orchestrator/status", s.handleStatus)
	m.HandleFunc("GET /api/orchestrator/tasks", s.handleTasks)
	// Task ids hold slashes ("probe/exploration/q0001"): the id is the
	// rest of the path, raw or %2F-escaped.
	m.HandleFunc("GET /api/orchestrator/task/{id...}", s.handleTask)
	m.Handle("POST /api/orchestrator/task/{rest...}", s.auth(http.HandlerFunc(s.handleCancel)))
	m.Handle("POST /api/orchestrator/retry", s.auth(http.HandlerFunc(s.handleRetry)))
	m.Handle("POST /api/seeds", s.auth(http.HandlerFunc(s.handleSeed)))
	m.Handle("POST /api/comments", s.auth(http.HandlerFunc(s.handleComment)))
	m.Handle("POST /api/backends/{name}/pause", s.auth(http.HandlerFunc(s.handlePause)))
	m.Handle("POST /api/backends/{name}/resume", s.auth(http.HandlerFunc(s.handleResume)))
	m.Handle("POST /api/wal/backup", s.auth(http.HandlerFunc(s.handleBackup)))
	m.HandleFunc("GET /api/document", s.handleDocument)
	m.HandleFunc("GET /api/alerts", s.handleAlerts)
	m.HandleFunc("GET /api/history", s.handleHistory)
	m.HandleFunc("GET /api/tasks", s.handleTaskPage)
	m.HandleFunc("GET /api/hosts", s.handleHosts)
	m.HandleFunc("GET /api/events", s.handleEvents)
	m.HandleFunc("GET /simulation", s.handleSimulation)
	m.HandleFunc("GET /simulation/{name}", s.handleSimulationFile)
	m.Handle("GET /", s.webHandler())
	return m
}

// apiError is the body of every error answer.
type apiError struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, format string, args ...any) {
	writeJSON(w, code, apiError{Error: fmt.Sprintf(format, args...)})
}

// guard refuses requests whose Host is a DNS name the panel does not know
// (a DNS-rebinding page would send its own name), and sets headers that
// keep the page out of frames.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hostAllowed(r.Host) {
			writeError(w, http.StatusMisdirectedRequest,
				"host %q is not served here: use the IP address, localhost, or add the origin to control.allowed_origins", r.Host)
			return
		}
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}

func (s *Server) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "" || net.ParseIP(host) != nil || strings.EqualFold(host, "localhost") {
		return true
	}
	for _, o := range s.opts.AllowedOrigins {
		if u, err := url.Parse(o); err == nil && strings.EqualFold(u.Hostname(), host) {
			return true
		}
	}
	return false
}

func hashToken(tok string) [32]byte { return sha256.Sum256([]byte(tok)) }

// auth lets a request through only with "Authorization: Bearer <token>".
// The comparison is of fixed-size hashes in constant time, so neither the
// token's bytes nor its length leak through timing.
func (s *Server) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Get("Authorization")
		tok, ok := strings.CutPrefix(h, "Bearer ")
		got := hashToken(strings.TrimSpace(tok))
		if err := s.checkOrigin(r); err != nil {
			// A browser page of another site cannot make changes, even
			// with the token at hand.
			s.logger.Warn().Str("event", "control.panel.origin_refused").Str("method", r.Method).Str("path", r.URL.Path).
				Str("origin", r.Header.Get("Origin")).Msg("mutation from a foreign origin")
			writeError(w, http.StatusForbidden, "changes from origin %s are refused: use the panel at its own address, or add the origin to control.allowed_origins", r.Header.Get("Origin"))
			return
		}
		if !ok || subtle.ConstantTimeCompare(got[:], s.tokenH[:]) != 1 {
			s.logger.Warn().Str("event", "control.panel.unauthorized").Str("method", r.Method).Str("path", r.URL.Path).
				Str("remote", r.RemoteAddr).Bool("had_token", ok).Msg("mutation without a valid token")
			w.Header().Set("WWW-Authenticate", `Bearer realm="fano"`)
			writeError(w, http.StatusUnauthorized,
				"this change needs the panel token: send \"Authorization: Bearer <token>\" (the token is in panel.token in the data directory, or control.token / control.token_env)")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// decodeBody reads one JSON object into v. An empty body is allowed when
// optional; unknown fields, wrong types and trailing data are errors that
// name the field or the byte offset.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, optional bool) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return fmt.Errorf("request body is larger than %d bytes", maxBody)
		}
		return fmt.Errorf("read request body: %w", err)
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		if optional {
			return nil
		}
		return errors.New("empty request body: expected a JSON object")
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonProblem(err)
	}
	if dec.More() {
		return errors.New("bad JSON: more than one value in the body")
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); err != io.EOF {
		return errors.New("bad JSON: data after the object")
	}
	return nil
}

// jsonProblem turns a decoder error into a message naming the field.
func jsonProblem(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Errorf("bad JSON at byte %d: %v", syn.Offset, err)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			return fmt.Errorf("bad JSON: expected an object, got %s", typ.Value)
		}
		return fmt.Errorf("field %q: expected %s, got %s", field, typ.Type, typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("bad JSON: the body ends in the middle of a value")
	}
	if msg, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fmt.Errorf("unknown field %s", msg)
	}
	return fmt.Errorf("bad JSON: %v", err)
}

// handleHealthz answers 503 with the reason whenever fano cannot do its
// work: the WAL cannot be written, or the health monitor holds work back
// (free disk below the minimum, no LLM able to take work). A monitor
// polling it sees a fano that makes no progress, not only a dead one.
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	var reasons []string
	if since, err := s.sys.StorageFault(); err != nil {
		reasons = append(reasons, fmt.Sprintf("WAL writes fail since %s: %v", since.UTC().Format(time.RFC3339), err))
	}
	if rd, ok := s.opts.Health.(Readiness); ok {
		for _, b := range rd.Blocked() {
			if len(reasons) == 0 || !strings.HasPrefix(b, "WAL writes fail") {
				reasons = append(reasons, b)
			}
		}
	}
	if len(reasons) > 0 {
		writeJSON(w, http.StatusServiceUnavailable, Healthz{Status: "unhealthy", Service: "fano", DataDir: s.opts.DataDir,
			Reason: strings.Join(reasons, "; ")})
		return
	}
	writeJSON(w, http.StatusOK, Healthz{Status: "ok", Service: "fano", DataDir: s.opts.DataDir})
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.status())
}

// status gathers the status from the scheduler and allocator (one round
// trip each), the module list and the cached WAL figures.
func (s *Server) status() Status {
	now := s.sys.Clock().Now()
	up := time.Since(s.started)
	state := "running"
	if !s.sys.Accepting() {
		state = "not_accepting" // the health monitor stopped new work (low disk)
	}
	st := Status{
		State: state, Uptime: up.Round(time.Second).String(), UptimeSeconds: up.Seconds(),
		StartedAt: s.started.UTC(), DataDir: s.opts.DataDir,
		LLMs: map[string]LLMStatus{}, Backends: []BackendView{}, Hosts: []HostView{}, Modules: []ModuleView{}, Running: []RunningTask{},
	}
	counts := s.sys.Counts()
	st.Tasks.ByModule = map[string]map[string]int{}
	for module, byState := range counts {
		m := map[string]int{}
		for state, n := range byState {
			if n == 0 {
				continue
			}
			m[StateName(state)] = n
			switch state {
			case pb.TaskState_TASK_STATE_PENDING:
				st.Tasks.Pending += n
			case pb.TaskState_TASK_STATE_READY:
				st.Tasks.Ready += n
			case pb.TaskState_TASK_STATE_RUNNING:
				st.Tasks.Running += n
			case pb.TaskState_TASK_STATE_PAUSED:
				st.Tasks.Paused += n
			case pb.TaskState_TASK_STATE_COMPLETED:
				st.Tasks.Completed += n
			case pb.TaskState_TASK_STATE_FAILED:
				st.Tasks.Failed += n
			case pb.TaskState_TASK_STATE_CANCELLED:
				st.Tasks.Cancelled += n
			}
		}
		st.Tasks.ByModule[module] = m
	}
	since := now.Add(-24 * time.Hour).UnixNano()
	n24 := 0
	// The filter counts inside the scheduler and keeps nothing: no copies.
	s.sys.Tasks(func(t *pb.Task) bool {
		if t.GetState() == pb.TaskState_TASK_STATE_COMPLETED && t.GetCompletedAt() >= since {
			n24++
		}
		return false
	}, 0)
	st.Tasks.Completed24h = n24

	running := s.sys.Tasks(func(t *pb.Task) bool { return t.GetState() == pb.TaskState_TASK_STATE_RUNNING }, 0)
	byBackend := map[string][]string{}
	for _, t := range running {
		byBackend[t.GetLlmAssigned()] = append(byBackend[t.GetLlmAssigned()], t.GetId())
		rt := RunningTask{ID: t.GetId(), Module: t.GetModule(), TaskType: t.GetTaskType(), LLM: t.GetLlmAssigned(),
			RequestCount: t.GetRequestCount(), MaxRequests: t.GetMaxRequests(), DeepMode: t.GetRequiresDeepMode()}
		if p := timePtr(t.GetStartedAt()); p != nil {
			rt.StartedAt = *p
		}
		st.Running = append(st.Running, rt)
	}

	circuits, memory := s.circuits(), s.backendMemory()
	st.Hosts = s.hosts()
	hostOf := hostOfBackend(st.Hosts)
	for _, b := range s.sys.Quotas() {
		st.LLMs[b.Name] = LLMStatus{Available: b.Available, HourlyUsed: b.HourlyUsed, HourlyLimit: b.HourlyLimit,
			DeepModeUsed: b.DeepUsed, DeepModeLimit: b.DeepLimit}
		bv := BackendViewOf(b, now)
		bv.Circuit, bv.RunningTasks, bv.MemoryBytes = circuits[b.Name], nonNil(byBackend[b.Name]), memory[b.Name]
		bv.Host = hostOf[b.Name]
		st.Backends = append(st.Backends, bv)
	}
	for _, m := range s.modules() {
		mv := ModuleView{Name: m.Name, Capabilities: m.Capabilities, Tasks: st.Tasks.ByModule[m.Name]}
		if mv.Tasks == nil {
			mv.Tasks = map[string]int{}
		}
		if v, err := s.sys.Query(&pb.ModuleQuery{Module: m.Name, Report: true}); err == nil && len(v.GetReportJson()) > 0 {
			mv.Report = json.RawMessage(v.GetReportJson())
		}
		st.Modules = append(st.Modules, mv)
	}
	st.WAL = s.walStats()
	if s.opts.Health != nil {
		st.Health = s.opts.Health.Health()
	}
	return st
}

// circuits reads the circuit state of backends that report one.
func (s *Server) circuits() map[string]string {
	out := map[string]string{}
	for _, b := range s.opts.Backends {
		if c, ok := b.(interface{ State() string }); ok {
			out[b.Name()] = c.State()
		}
	}
	return out
}

// backendMemory is each backend's local process memory (browsers), by name.
func (s *Server) backendMemory() map[string]int64 {
	out := map[string]int64{}
	for _, b := range s.opts.Backends {
		if mr, ok := gateway.As[gateway.MemoryReporter](b); ok {
			out[b.Name()] = mr.MemoryBytes()
		}
	}
	return out
}

// handleTasks lists tasks, newest first: GET ?module=&state=&limit=.
func (s *Server) handleTasks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k := range q {
		if k != "module" && k != "state" && k != "limit" {
			writeError(w, http.StatusBadRequest, "unknown query parameter %q (use module, state, limit)", k)
			return
		}
	}
	module := q.Get("module")
	var state pb.TaskState
	if v := q.Get("state"); v != "" {
		st, ok := ParseState(v)
		if !ok {
			writeError(w, http.StatusBadRequest, "query parameter \"state\": unknown task state %q (use pending, ready, running, paused, completed, failed or cancelled)", v)
			return
		}
		state = st
	}
	limit := defaultLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLimit {
			writeError(w, http.StatusBadRequest, "query parameter \"limit\": must be a whole number from 1 to %d (is %q)", maxLimit, v)
			return
		}
		limit = n
	}
	match := func(t *pb.Task) bool {
		return (module == "" || t.GetModule() == module) && (state == 0 || t.GetState() == state)
	}
	tasks, _ := s.pageOfTasks(match, 0, limit)
	writeJSON(w, http.StatusOK, tasks)
}

// pageOfTasks returns up to limit matching tasks from offset on, newest
// first, and how many match in all. A first pass inside the scheduler
// keeps only (created, id) of every match, a second copies just the
// chosen tasks, so a large queue is never cloned whole.
func (s *Server) pageOfTasks(match func(*pb.Task) bool, offset, limit int) ([]TaskView, int) {
	type key struct {
		created int64
		id      string
	}
	var keys []key
	s.sys.Tasks(func(t *pb.Task) bool {
		if match(t) {
			keys = append(keys, key{t.GetCreatedAt(), t.GetId()})
		}
		return false
	}, 0)
	slices.SortFunc(keys, func(a, b key) int {
		if c := cmp.Compare(b.created, a.created); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	total := len(keys)
	keys = keys[min(offset, total):]
	if len(keys) > limit {
		keys = keys[:limit]
	}
	want := make(map[string]int, len(keys))
	for i, k := range keys {
		want[k.id] = i
	}
	tasks := s.sys.Tasks(func(t *pb.Task) bool { _, ok := want[t.GetId()]; return ok }, 0)
	slices.SortFunc(tasks, func(a, b *pb.Task) int { return cmp.Compare(want[a.GetId()], want[b.GetId()]) })
	out := make([]TaskView, 0, len(tasks))
	for _, t := range tasks {
		out = append(out, taskView(t, false))
	}
	return out, total
}

func (s *Server) handleTask(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	t, ok := s.sys.Task(id)
	if !ok {
		writeError(w, http.StatusNotFound, "task %q not found (unknown, or finished and forgotten after its retention period)", id)
		return
	}
	d := TaskDetail{TaskView: taskView(t, true)}
	d.Timeline, d.TimelineDropped = s.obs.timeline(id)
	if d.Timeline == nil {
		d.Timeline = []Step{}
	}
	writeJSON(w, http.StatusOK, d)
}

type cancelRequest struct {
	Reason string `json:"reason,omitempty"`
}

// handleCancel serves POST /api/orchestrator/task/{id}/cancel.
func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request) {
	id, ok := strings.CutSuffix(r.PathValue("rest"), "/cancel")
	if !ok || id == "" {
		writeError(w, http.StatusNotFound, "no such endpoint: POST %s (did you mean POST /api/orchestrator/task/{id}/cancel?)", r.URL.Path)
		return
	}
	var req cancelRequest
	if err := decodeBody(w, r, &req, true); err != nil {
		writeError(w, http.StatusBadRequest, "cancel %s: %v", id, err)
		return
	}
	reason := cmp.Or(strings.TrimSpace(req.Reason), "cancelled by the operator (control panel)")
	before, known := s.sys.Task(id)
	err := s.sys.Cancel(id, reason)
	var nf *scheduler.NotFoundError
	switch {
	case errors.As(err, &nf):
		writeError(w, http.StatusNotFound, "task %q not found", id)
		return
	case errors.Is(err, scheduler.ErrFinished):
		writeError(w, http.StatusBadRequest, "task %q is already finished: %v", id, err)
		return
	case err != nil:
		s.logger.Error().Err(err).Str("event", "control.panel.cancel_failed").Str("task_id", id).Msg("cancel")
		writeError(w, http.StatusInternalServerError, "cancel %s: %v", id, err)
		return
	}
	s.logger.Info().Str("event", "control.panel.task_cancelled").Str("task_id", id).Str("reason", reason).Msg("task cancelled")
	status := "cancelled"
	if known && before.GetState() == pb.TaskState_TASK_STATE_RUNNING {
		status = "cancelling"
	}
	writeJSON(w, http.StatusOK, CancelResult{Status: status, TaskID: id})
}

type seedRequest struct {
	Text     string `json:"text"`
	Priority int    `json:"priority"`
	Module   string `json:"module,omitempty"`
}

type commentRequest struct {
	SectionID string `json:"section_id"`
	Text      string `json:"text"`
	Module    string `json:"module,omitempty"`
}

func (s *Server) handleSeed(w http.ResponseWriter, r *http.Request) {
	var req seedRequest
	if err := decodeBody(w, r, &req, false); err != nil {
		writeError(w, http.StatusBadRequest, "add seed: %v", err)
		return
	}
	if err := CheckText("text", req.Text, MaxSeedRunes); err != nil {
		writeError(w, http.StatusBadRequest, "add seed: %v", err)
		return
	}
	module, ok := s.pickModule(w, req.Module, capSeeds, "explorer", "seeds")
	if !ok {
		return
	}
	s.command(w, "seed_added", &pb.ModuleCommand{Module: module,
		Command: &pb.ModuleCommand_AddSeed{AddSeed: &pb.AddSeed{Text: req.Text, Priority: int32(req.Priority)}}})
}

func (s *Server) handleComment(w http.ResponseWriter, r *http.Request) {
	var req commentRequest
	if err := decodeBody(w, r, &req, false); err != nil {
		writeError(w, http.StatusBadRequest, "add comment: %v", err)
		return
	}
	if strings.TrimSpace(req.SectionID) == "" {
		writeError(w, http.StatusBadRequest, "add comment: field \"section_id\" is required")
		return
	}
	if err := CheckText("text", req.Text, MaxCommentRunes); err != nil {
		writeError(w, http.StatusBadRequest, "add comment: %v", err)
		return
	}
	if err := CheckText("section_id", req.SectionID, 200); err != nil {
		writeError(w, http.StatusBadRequest, "add comment: %v", err)
		return
	}
	module, ok := s.pickModule(w, req.Module, capComments, "documenter", "comments")
	if !ok {
		return
	}
	key := commentKey(req.SectionID, req.Text)
	if s.comments.seen(key, s.sys.Clock().Now()) {
		// The same comment again within a minute (a double click, a
		// retried request) is the one already taken.
		writeJSON(w, http.StatusOK, CommandResult{Status: "duplicate", Module: module, Events: []string{}})
		return
	}
	if s.command(w, "comment_added", &pb.ModuleCommand{Module: module,
		Command: &pb.ModuleCommand_AddComment{AddComment: &pb.AddComment{SectionId: req.SectionID, Text: req.Text}}}) {
		s.comments.remember(key, s.sys.Clock().Now())
	}
}

// pickModule finds the module for a capability: the one named, else the
// preferred one, else any that has it. It answers 409 itself when none
// can, naming what is missing.
func (s *Server) pickModule(w http.ResponseWriter, named, c, preferred, what string) (string, bool) {
	if named != "" {
		if !s.moduleConfigured(named) {
			writeError(w, http.StatusConflict, "module %q is not configured in this fano", named)
			return "", false
		}
		if !s.hasCapability(named, c) {
			writeError(w, http.StatusConflict, "module %q does not accept %s", named, what)
			return "", false
		}
		return named, true
	}
	m, ok := s.moduleWith(c, preferred)
	if !ok {
		writeError(w, http.StatusConflict, "no configured module accepts %s (the %s module is not enabled in this fano)", what, preferred)
		return "", false
	}
	return m, true
}

// command sends a command to its module and answers with the events it
// persisted; the module's own refusal (empty text, unknown section) is a
// 400 with its message. It reports whether the command was taken.
func (s *Server) command(w http.ResponseWriter, action string, cmd *pb.ModuleCommand) bool {
	module := cmd.GetModule()
	r, err := s.sys.Command(cmd)
	var ce *actors.CommandError
	switch {
	case errors.Is(err, modules.ErrUnsupportedCommand):
		writeError(w, http.StatusConflict, "module %q cannot do this", module)
		return false
	case errors.As(err, &ce):
		writeError(w, http.StatusBadRequest, "%s", refusal(module, ce.Reason))
		return false
	case err != nil:
		s.logger.Error().Err(err).Str("event", "control."+module+".command_failed").Str("action", action).Msg("module command")
		writeError(w, http.StatusInternalServerError, "%v", err)
		return false
	}
	types := r.GetEventTypes()
	s.logger.Info().Str("event", "control."+module+"."+action).Strs("module_events", types).Msg(action)
	if types == nil {
		types = []string{}
	}
	writeJSON(w, http.StatusOK, CommandResult{Status: "added", Module: module, Events: types})
	return true
}

// refusal is a module's refusal as one sentence naming the module once:
// the module's reason may already begin with its name.
func refusal(module, reason string) string {
	r := strings.TrimSpace(reason)
	for {
		rest, ok := strings.CutPrefix(r, module+": ")
		if !ok {
			break
		}
		r = rest
	}
	if r == "" {
		return "The " + module + " module refused the change."
	}
	if !strings.HasSuffix(r, ".") {
		r += "."
	}
	return "The " + module + " module refused: " + r
}

type pauseRequest struct {
	Reason string `json:"reason,omitempty"`
}

func (s *Server) handlePause(w http.ResponseWriter, r *http.Request) {
	var req pauseRequest
	if err := decodeBody(w, r, &req, true); err != nil {
		writeError(w, http.StatusBadRequest, "pause %s: %v", r.PathValue("name"), err)
		return
	}
	s.pause(w, r.PathValue("name"), cmp.Or(strings.TrimSpace(req.Reason), "paused by the operator (control panel)"), true)
}

func (s *Server) handleResume(w http.ResponseWriter, r *http.Request) {
	var req struct{}
	if err := decodeBody(w, r, &req, true); err != nil {
		writeError(w, http.StatusBadRequest, "resume %s: %v", r.PathValue("name"), err)
		return
	}
	s.pause(w, r.PathValue("name"), "", false)
}

func (s *Server) pause(w http.ResponseWriter, name, reason string, pause bool) {
	err := s.sys.PauseBackend(name, reason, pause)
	switch {
	case errors.Is(err, allocator.ErrUnknownBackend):
		writeError(w, http.StatusNotFound, "backend %q is not configured", name)
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, "backend %s: %v", name, err)
		return
	}
	action := "resumed"
	if pause {
		action = "paused"
	}
	s.logger.Info().Str("event", "control.panel.backend_"+action).Str("backend", name).Str("reason", reason).Msg("backend " + action)
	writeJSON(w, http.StatusOK, BackendResult{Backend: name, Paused: pause})
}

// handleDocument serves the living document as Markdown, or as JSON with
// its section ids (?format=json or Accept: application/json).
func (s *Server) handleDocument(w http.ResponseWriter, r *http.Request) {
	module, ok := s.moduleWith(capDocument, "documenter")
	if !ok {
		writeError(w, http.StatusNotFound, "no document: no configured module renders one (the documenter module is not enabled in this fano)")
		return
	}
	doc := Document{Module: module, Sections: []string{}}
	v, err := s.sys.Query(&pb.ModuleQuery{Module: module, Document: true})
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "document: %v", err)
		return
	}
	doc.Markdown = v.GetDocumentMarkdown()
	doc.Sections = append(doc.Sections, v.GetSectionIds()...)
	if r.URL.Query().Get("format") == "json" || strings.Contains(r.Header.Get("Accept"), "application/json") {
		writeJSON(w, http.StatusOK, doc)
		return
	}
	w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = io.WriteString(w, doc.Markdown)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// BackupResult is the answer to POST /api/wal/backup.
type BackupResult struct {
	Path string `json:"path"`
}

func (s *Server) handleBackup(w http.ResponseWriter, r *http.Request) {
	if s.opts.Backup == nil {
		writeError(w, http.StatusNotImplemented, "this fano takes no backups on demand")
		return
	}
	path, err := s.opts.Backup()
	if err != nil {
		s.logger.Error().Err(err).Str("event", "control.panel.backup_failed").Msg("backup on demand")
		writeError(w, http.StatusInternalServerError, "backup: %v", err)
		return
	}
	writeJSON(w, http.StatusOK, BackupResult{Path: path})
}
