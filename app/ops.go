package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	"fano/actors"
	"fano/actors/allocator"
	"fano/health"
	"fano/metrics"
	"fano/pb"
	"fano/wal"
)

// Operating fano: the run service that keeps the health monitor, the
// 24-hour metrics, the per-request trace log and the
// console heartbeat; the SIGUSR1 state dump; and the figures `fano status`
// and the control panel show.

// heartbeatEvery is how often `fano run` prints its heartbeat.
const heartbeatEvery = 60 * time.Second

// OpsStatusFile is where a running fano leaves its latest health and
// metrics for `fano status` (the database is locked while it runs).
const OpsStatusFile = "ops-status.json"

// noticeBuffer is how many notices the ops service queues before it
// drops (and counts) them: the subscriber callback must never block.
const noticeBuffer = 8192

// ops is the run service's state.
type ops struct {
	svc     *Services
	rc      *ServiceEnv
	sys     *actors.System
	health  *health.Service
	metrics *metrics.Metrics
	trace   *traceLog
	beat    *heartbeat
	// beatMu makes a heartbeat's taking of the interval's changes and its
	// log line one step: two heartbeats at once (the 60 s loop and a
	// caller) would otherwise log the changes out of order, or one after
	// the other has returned.
	beatMu  sync.Mutex
	started time.Time

	notices     chan actors.Notice
	dropped     atomic.Int64
	unsubscribe func()

	walMu     sync.Mutex
	walStats  *wal.Stats
	walWalked time.Time // when walStats last came from a walk of the log

	stop       chan struct{} // closes the health and heartbeat loops
	finish     chan struct{} // closes the notice consumer (after the system stopped)
	loops      sync.WaitGroup
	consumer   sync.WaitGroup
	once       sync.Once
	finishOnce sync.Once
}

// startOps is the run service: it subscribes to the system's notices and
// starts the health checks and the heartbeat.
func (s *Services) startOps(rc *ServiceEnv) (func(), error) {
	o, err := newOps(rc)
	if err != nil {
		return nil, err
	}
	o.svc = s
	o.start()
	s.ops.Store(o)
	// A fresh file at once: one left by a fano that crashed must not pass
	// for this one's.
	if err := o.writeStatus(rc.Clock.Now()); err != nil {
		rc.Logger.Warn().Err(err).Str("event", "cmd.fano.ops_status_failed").Msg("could not write " + OpsStatusFile)
	}
	return o.close, nil
}

func newOps(rc *ServiceEnv) (*ops, error) {
	o := &ops{
		rc: rc, sys: rc.Sys, metrics: metrics.New(metrics.DefaultWindow), started: rc.Clock.Now(),
		notices: make(chan actors.Notice, noticeBuffer),
		stop:    make(chan struct{}), finish: make(chan struct{}),
	}
	tr, err := openTrace(filepath.Join(rc.DataDir, "logs", "trace.log"))
	if err != nil {
		return nil, err
	}
	o.trace = tr
	o.beat = newHeartbeat(o.started)
	if rc.Sys.Report() != nil {
		o.metrics.Recovered(o.started) // the start's; restarted actors publish theirs
	}
	o.health = health.NewService(health.FromConfig(rc.Cfg, rc.DataDir), health.ServiceOptions{
		Clock: rc.Clock, Target: sysTarget{sys: rc.Sys}, Disk: rc.Disk, Logger: rc.Logger,
		Storage:    func() error { _, err := rc.Sys.StorageFault(); return err },
		IntakeHeld: rc.IntakeHeld,
	})
	return o, nil
}

func (o *ops) start() {
	o.unsubscribe = o.sys.Subscribe(func(n actors.Notice) {
		select {
		case o.notices <- n:
		default:
			o.dropped.Add(1)
		}
	})
	o.consumer.Add(1)
	go o.consume()
	o.health.Start()
	t := o.rc.Clock.NewTicker(heartbeatEvery)
	o.loops.Add(1)
	go func() {
		defer o.loops.Done()
		defer t.Stop()
		for {
			select {
			case <-t.Chan():
				o.heartbeat()
			case <-o.stop:
				return
			}
		}
	}()
}

// close stops the checks and the heartbeat. A run calls it before the
// system stops, and the shutdown's own events (requests cancelled, tasks
// paused) still reach the trace log: the notice consumer runs on until
// Services.Finish (after the system stopped) or, at the latest, a few
// seconds later.
func (o *ops) close() {
	o.once.Do(func() {
		close(o.stop)
		o.health.Stop()
		o.loops.Wait()
		_ = os.Remove(filepath.Join(o.rc.DataDir, OpsStatusFile)) // status reads the WAL once fano stopped
		go func() {
			select {
			case <-o.finish:
			case <-time.After(5 * time.Second):
				o.finishNow()
			}
		}()
	})
}

// finishNow ends the notice consumer and closes the trace log.
func (o *ops) finishNow() {
	o.finishOnce.Do(func() {
		o.unsubscribe()
		close(o.finish)
		o.consumer.Wait()
		o.trace.close()
		if o.svc != nil {
			o.svc.ops.CompareAndSwap(o, nil)
		}
	})
}

// consume hands every notice to the metrics, the health monitor, the trace
// log and the heartbeat, in the order the actors applied them.
func (o *ops) consume() {
	defer o.consumer.Done()
	for {
		select {
		case n := <-o.notices:
			o.handle(n)
			if len(o.notices) == 0 {
				o.flushTrace() // a burst of notices is one write
			}
		case <-o.finish:
			for {
				select {
				case n := <-o.notices:
					o.handle(n)
				default:
					o.flushTrace()
					return
				}
			}
		}
	}
}

func (o *ops) handle(n actors.Notice) {
	if n.Update != nil {
		o.metrics.ObserveUpdate(n.Update)
		return
	}
	e := n.Event
	if e == nil {
		return
	}
	o.metrics.Observe(n.Owner, e)
	if n.Owner == "scheduler" {
		o.health.Observe(e)
		o.beat.observe(e)
		if r := e.GetLlmRequestStarted(); r != nil {
			o.rc.Logger.Debug().Str("event", "cmd.fano.llm_request").Str("task", r.TaskId).Str("llm", r.Llm).
				Int32("turn", r.Turn).Int("prompt_bytes", len(r.Prompt)).Msg("request sent")
		}
		if err := o.trace.observe(e); err != nil {
			o.rc.Logger.Warn().Err(err).Str("event", "cmd.fano.trace_failed").Msg("trace log")
		}
	}
}

func (o *ops) flushTrace() {
	if err := o.trace.flush(); err != nil {
		o.rc.Logger.Warn().Err(err).Str("event", "cmd.fano.trace_failed").Msg("trace log")
	}
}

// snapshot returns the 24-hour metrics with gauges read now.
func (o *ops) snapshot() metrics.Snapshot {
	o.metrics.SetGauges(o.gauges())
	if d := o.dropped.Swap(0); d > 0 {
		o.metrics.Dropped(d)
	}
	return o.metrics.Snapshot(o.rc.Clock.Now())
}

// gauges reads the figures of the moment from the running system.
func (o *ops) gauges() metrics.Gauges {
	now := o.rc.Clock.Now()
	g := metrics.Gauges{QueueDepth: map[string]int{}, Running: map[string]int{}, Paused: map[string]int{},
		StartedAt: o.started, UptimeSeconds: now.Sub(o.started).Seconds()}
	for module, byState := range o.sys.Counts() {
		g.QueueDepth[module] = byState[pb.TaskState_TASK_STATE_PENDING] + byState[pb.TaskState_TASK_STATE_READY]
		g.Running[module] = byState[pb.TaskState_TASK_STATE_RUNNING]
		g.Paused[module] = byState[pb.TaskState_TASK_STATE_PAUSED]
	}
	oldest := int64(0)
	for _, t := range o.sys.Tasks(func(t *pb.Task) bool { return t.State == pb.TaskState_TASK_STATE_PENDING }, 0) {
		if oldest == 0 || t.CreatedAt < oldest {
			oldest = t.CreatedAt
		}
	}
	if oldest != 0 {
		g.OldestPendingSeconds = math.Max(0, now.Sub(time.Unix(0, oldest)).Seconds())
	}
	for _, q := range o.sys.Quotas() {
		g.Quotas = append(g.Quotas, metrics.Quota{Backend: q.Name, HourlyUsed: q.HourlyUsed, HourlyLimit: q.HourlyLimit,
			Usable: q.Usable, DeepUsed: q.DeepUsed, DeepLimit: q.DeepLimit, Available: q.Available, Paused: q.Paused})
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	g.MemoryMB = float64(ms.Sys) / (1 << 20)
	g.HeapMB = float64(ms.HeapAlloc) / (1 << 20)
	g.Goroutines = runtime.NumGoroutine()
	g.DiskFreeBytes, g.DiskUsagePercent = diskFigures(o.rc.DataDir)
	o.walMu.Lock()
	if o.walStats != nil {
		g.WALSizeMB = float64(o.walStats.Bytes) / (1 << 20)
		g.WALEntries = o.walStats.Entries
	}
	o.walMu.Unlock()
	return g
}

// walWalkEvery spaces the walks of the log for its entry count: a walk
// reads every block, and the log holds weeks of them; in between a
// heartbeat reads only the file's size.
const walWalkEvery = 15 * time.Minute

// refreshWAL reads the WAL's figures at a heartbeat: its size every time,
// its entries from a walk at most every walWalkEvery.
func (o *ops) refreshWAL(now time.Time) {
	log := o.sys.Log()
	o.walMu.Lock()
	defer o.walMu.Unlock()
	if o.walStats != nil && now.Sub(o.walWalked) < walWalkEvery {
		if size, err := log.Size(); err == nil {
			o.walStats.Bytes = size
		}
		return
	}
	if st, err := log.Stats(); err == nil {
		o.walStats, o.walWalked = &st, now
	}
}

// heartbeat prints the console heartbeat and refreshes ops-status.json;
// it returns the line it logged.
func (o *ops) heartbeat() string {
	o.beatMu.Lock()
	defer o.beatMu.Unlock()
	now := o.rc.Clock.Now()
	o.refreshWAL(now)
	counts := o.sys.Counts()
	var nextResume time.Time
	paused := 0
	for _, byState := range counts {
		paused += byState[pb.TaskState_TASK_STATE_PAUSED]
	}
	if paused > 0 { // listing tasks decodes the finished ones kept in memory: only when it can find one
		for _, t := range o.sys.Tasks(func(t *pb.Task) bool { return t.State == pb.TaskState_TASK_STATE_PAUSED && t.NotBefore > 0 }, 0) {
			if at := time.Unix(0, t.NotBefore); nextResume.IsZero() || at.Before(nextResume) {
				nextResume = at
			}
		}
	}
	line, changed := o.beat.line(now, counts, nextResume, o.rc.UntilIdle)
	o.rc.Logger.Info().Str("event", "cmd.fano.heartbeat").Bool("changed", changed).Msg(line)
	if err := o.writeStatus(now); err != nil {
		o.rc.Logger.Warn().Err(err).Str("event", "cmd.fano.ops_status_failed").Msg("could not write " + OpsStatusFile)
	}
	return line
}

// OpsStatus is what a running fano leaves in ops-status.json.
type OpsStatus struct {
	PID       int              `json:"pid"`
	WrittenAt time.Time        `json:"written_at"`
	Health    health.Status    `json:"health"`
	Metrics   metrics.Snapshot `json:"metrics"`
}

func (o *ops) writeStatus(now time.Time) error {
	st := OpsStatus{PID: os.Getpid(), WrittenAt: now.UTC(), Health: o.health.Status(), Metrics: o.snapshot()}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(o.rc.DataDir, OpsStatusFile)
	if o.rc.Log != nil && !o.rc.Log.Syncs() {
		// A WAL that does not wait for the disk (fano simulate, tests):
		// the status beside it need not either. Its fsyncs, once a
		// minute of the simulated clock, were a quarter of a fortnight's
		// wall time.
		return replaceFile(path, append(data, '\n'))
	}
	return actors.WriteFileAtomic(path, append(data, '\n'), 0o644)
}

// replaceFile replaces path with data by a rename, as WriteFileAtomic
// does, without waiting for the disk.
func replaceFile(path string, data []byte) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// panelOps is the control panel's health source: the monitor's status with
// the 24-hour metrics beside it.
type panelOps struct{ o *ops }

// opsView is the JSON the panel shows under "health".
type opsView struct {
	health.Status
	Metrics metrics.Snapshot `json:"metrics_24h"`
}

func (p panelOps) Health() any {
	return opsView{Status: p.o.health.Status(), Metrics: p.o.snapshot()}
}

// HealthStatus returns the health monitor's status of this run.
func (s *Services) HealthStatus() (health.Status, bool) {
	o := s.ops.Load()
	if o == nil {
		return health.Status{}, false
	}
	return o.health.Status(), true
}

// MetricsSnapshot returns the 24-hour metrics of this run.
func (s *Services) MetricsSnapshot() (metrics.Snapshot, bool) {
	o := s.ops.Load()
	if o == nil {
		return metrics.Snapshot{}, false
	}
	return o.snapshot(), true
}

// collector is a Prometheus collector of the 24-hour metrics of this
// run, for the panel's /metrics registry.
func (s *Services) collector() *metrics.Collector {
	return metrics.NewCollector(func() metrics.Snapshot {
		snap, _ := s.MetricsSnapshot()
		return snap
	})
}

// panelHealth is the panel's health source: the ops service's status
// while it runs, read at each request.
type panelHealth struct{ s *Services }

// Blocked is what keeps fano from doing any work, as the health
// monitor's last check found (control.Readiness).
func (p panelHealth) Blocked() []string {
	o := p.s.ops.Load()
	if o == nil {
		return nil
	}
	return o.health.Status().Blocked
}

func (p panelHealth) Health() any {
	o := p.s.ops.Load()
	if o == nil {
		return nil
	}
	return panelOps{o}.Health()
}

// sysTarget adapts *actors.System to health.Target.
type sysTarget struct{ sys *actors.System }

func (t sysTarget) Running() []string {
	var ids []string
	for _, tk := range t.sys.Tasks(func(tk *pb.Task) bool { return tk.State == pb.TaskState_TASK_STATE_RUNNING }, 0) {
		ids = append(ids, tk.Id)
	}
	return ids
}

func (t sysTarget) QueueDepth() int {
	n := 0
	for _, byState := range t.sys.Counts() {
		n += byState[pb.TaskState_TASK_STATE_PENDING] + byState[pb.TaskState_TASK_STATE_READY]
	}
	return n
}

func (t sysTarget) backends(hs []actors.BackendHealth) []health.Backend {
	quotas := map[string]allocator.BackendStatus{}
	for _, q := range t.sys.Quotas() {
		quotas[q.Name] = q
	}
	out := make([]health.Backend, len(hs))
	for i, h := range hs {
		q := quotas[h.Name]
		out[i] = health.Backend{Name: h.Name, Healthy: h.Healthy, Paused: q.Paused, Error: h.Error, State: q.State, Until: q.Until, Class: q.Class, Action: q.Action}
	}
	return out
}

func (t sysTarget) Backends(ctx context.Context) []health.Backend {
	return t.backends(t.sys.BackendHealth(ctx))
}

func (t sysTarget) Reconnect(ctx context.Context, names []string) []health.Backend {
	t.sys.ReconnectBackends(ctx, names)
	return t.backends(t.sys.BackendHealth(ctx))
}

func (t sysTarget) SetAccepting(on bool) { t.sys.SetAccepting(on) }

func (t sysTarget) StopStuck(ctx context.Context, id string, fail bool, reason string, resumeAt time.Time) (string, error) {
	out, err := t.sys.StopStuckTask(ctx, id, fail, reason, resumeAt)
	return string(out), err
}

func (t sysTarget) Alert(kind string, a health.Alert) {
	data := map[string]string{"kind": a.Kind, "message": a.Message, "resolved": fmt.Sprint(a.Resolved)}
	for k, v := range a.Data {
		if _, taken := data[k]; !taken {
			data[k] = v
		}
	}
	t.sys.Publish(&pb.StateUpdate{Component: "health", UpdateType: kind, Data: data})
}

// diskFigures returns the free bytes and the used share (percent) of the
// file system holding path; zeros when it cannot be read.
func diskFigures(path string) (free uint64, usedPercent float64) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil || st.Blocks == 0 {
		return 0, 0
	}
	free = st.Bavail * uint64(st.Bsize)
	used := float64(st.Blocks-st.Bfree) / float64(st.Blocks) * 100
	return free, used
}

// traceLog writes logs/trace.log: one JSON line per LLM request when it
// ends (answered, failed or cancelled), with sizes and times, never the
// prompt, the answer or an error text (which could quote either). Not
// safe for concurrent use: the ops consumer is its only caller. Lines
// wait in buf until flush (the consumer flushes when it has no notice
// waiting): a run of 20,000 requests a few seconds long is not 20,000
// writes.
type traceLog struct {
	f       *os.File
	pending map[string]traceStart // task id -> its request in flight
	buf     []byte                // whole lines not written yet
}

type traceStart struct {
	at      time.Time
	backend string
	turn    int32
	deep    bool
	resend  bool
	prompt  int
}

// traceLine is one line of trace.log.
type traceLine struct {
	Time             time.Time `json:"time"`
	Backend          string    `json:"backend"`
	Task             string    `json:"task"`
	Module           string    `json:"module"`
	TaskType         string    `json:"task_type"`
	Turn             int32     `json:"turn"`
	Deep             bool      `json:"deep,omitempty"`
	Resend           bool      `json:"resend,omitempty"`
	Outcome          string    `json:"outcome"` // ok | rate_limited | transient | permanent | unavailable | cancelled | interrupted
	DurationMS       float64   `json:"duration_ms"`
	PromptBytes      int       `json:"prompt_bytes"`
	AnswerBytes      int       `json:"answer_bytes"`
	PromptTokens     int64     `json:"prompt_tokens,omitempty"`
	CompletionTokens int64     `json:"completion_tokens,omitempty"`
}

func openTrace(path string) (*traceLog, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("trace log: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("trace log: %w", err)
	}
	return &traceLog{f: f, pending: map[string]traceStart{}}, nil
}

func (t *traceLog) close() {
	if t.f != nil {
		_ = t.flush()
		_ = t.f.Close()
		t.f = nil
	}
}

// flush writes the waiting lines in one write (O_APPEND keeps them whole).
func (t *traceLog) flush() error {
	if t.f == nil || len(t.buf) == 0 {
		return nil
	}
	_, err := t.f.Write(t.buf)
	t.buf = t.buf[:0]
	return err
}

// observe pairs request starts with their ends and writes a line per end.
func (t *traceLog) observe(e *pb.Event) error {
	at := time.Unix(0, e.At).UTC()
	switch b := e.Body.(type) {
	case *pb.Event_LlmRequestStarted:
		r := b.LlmRequestStarted
		t.pending[r.TaskId] = traceStart{at: at, backend: r.Llm, turn: r.Turn, deep: r.DeepMode, resend: r.Resend, prompt: len(r.Prompt)}
	case *pb.Event_LlmResponseReceived:
		r := b.LlmResponseReceived
		st := t.take(r.TaskId, r.Llm, r.Turn, at)
		return t.write(st, traceLine{Time: at, Backend: r.Llm, Task: r.TaskId, Turn: r.Turn, Outcome: "ok",
			DurationMS: float64(r.DurationNs) / 1e6, AnswerBytes: len(r.Content),
			PromptTokens: r.PromptTokens, CompletionTokens: r.CompletionTokens})
	case *pb.Event_LlmRequestFailed:
		r := b.LlmRequestFailed
		st := t.take(r.TaskId, r.Llm, r.Turn, at)
		kind := r.Kind
		if kind == "" {
			kind = "failed"
		}
		return t.write(st, traceLine{Time: at, Backend: r.Llm, Task: r.TaskId, Turn: r.Turn, Outcome: kind,
			DurationMS: float64(at.Sub(st.at)) / 1e6})
	case *pb.Event_TaskForgotten:
		for _, id := range b.TaskForgotten.IDs() {
			delete(t.pending, id)
		}
	}
	return nil
}

func (t *traceLog) take(task, backend string, turn int32, at time.Time) traceStart {
	st, ok := t.pending[task]
	delete(t.pending, task)
	if !ok {
		return traceStart{at: at, backend: backend, turn: turn}
	}
	return st
}

func (t *traceLog) write(st traceStart, l traceLine) error {
	if t.f == nil {
		return nil
	}
	l.Module, l.TaskType = splitTaskID(l.Task)
	l.Deep, l.Resend, l.PromptBytes = st.deep, st.resend, st.prompt
	if l.DurationMS < 0 {
		l.DurationMS = 0
	}
	buf, err := l.appendJSON(t.buf)
	if err != nil {
		return err
	}
	t.buf = append(buf, '\n')
	if len(t.buf) >= 64<<10 {
		return t.flush()
	}
	return nil
}

func splitTaskID(id string) (module, taskType string) {
	module, rest, ok := strings.Cut(id, "/")
	if !ok {
		return id, ""
	}
	taskType, _, _ = strings.Cut(rest, "/")
	return module, taskType
}

// heartbeat builds the console heartbeat: a change summary when something
// happened since the last beat, one short idle line otherwise. Safe for
// concurrent use (the ops consumer observes, the heartbeat loop prints).
type heartbeat struct {
	mu         sync.Mutex
	start      time.Time
	lastChange time.Time
	lastCounts stateTotals
	d          beatDelta // since the last beat
	finished   int64     // tasks finished since start (for the ETA)
}

type beatDelta struct {
	completed, failed, cancelled, submitted int
	requests, answers, failures, rateLimits int
}

type stateTotals struct{ waiting, running, paused, done int }

func newHeartbeat(start time.Time) *heartbeat {
	return &heartbeat{start: start, lastChange: start}
}

func (h *heartbeat) observe(e *pb.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch b := e.Body.(type) {
	case *pb.Event_TaskSubmitted:
		h.d.submitted++
	case *pb.Event_TaskCompleted:
		h.d.completed++
		h.finished++
	case *pb.Event_TaskFailed:
		h.d.failed++
		h.finished++
	case *pb.Event_TaskCancelled:
		h.d.cancelled++
		h.finished++
	case *pb.Event_LlmRequestStarted:
		h.d.requests++
	case *pb.Event_LlmResponseReceived:
		h.d.answers++
	case *pb.Event_LlmRequestFailed:
		if b.LlmRequestFailed.Kind == "rate_limited" {
			h.d.rateLimits++
		}
		h.d.failures++
	}
}

func totals(counts map[string]map[pb.TaskState]int) stateTotals {
	var t stateTotals
	for _, byState := range counts {
		t.waiting += byState[pb.TaskState_TASK_STATE_PENDING] + byState[pb.TaskState_TASK_STATE_READY]
		t.running += byState[pb.TaskState_TASK_STATE_RUNNING]
		t.paused += byState[pb.TaskState_TASK_STATE_PAUSED]
		t.done += byState[pb.TaskState_TASK_STATE_COMPLETED] + byState[pb.TaskState_TASK_STATE_FAILED] + byState[pb.TaskState_TASK_STATE_CANCELLED]
	}
	return t
}

// line returns the heartbeat text and whether anything changed since the
// last beat; it starts the next interval.
func (h *heartbeat) line(now time.Time, counts map[string]map[pb.TaskState]int, nextResume time.Time, eta bool) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cur := totals(counts)
	d := h.d
	h.d = beatDelta{}
	changed := d != (beatDelta{}) || cur != h.lastCounts
	h.lastCounts = cur
	now = now.UTC()
	state := fmt.Sprintf("%d running, %d waiting, %d paused", cur.running, cur.waiting, cur.paused)
	if !changed {
		idle := fmt.Sprintf("idle %s: %s", now.Sub(h.lastChange).Round(time.Second), state)
		if cur.paused > 0 && !nextResume.IsZero() {
			idle += fmt.Sprintf(" (next resume %s)", nextResume.UTC().Format(time.TimeOnly))
		}
		return idle, false
	}
	h.lastChange = now
	var parts []string
	add := func(n int, what string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("+%d %s", n, what))
		}
	}
	add(d.completed, "completed")
	add(d.failed, "failed")
	add(d.cancelled, "cancelled")
	add(d.submitted, "new tasks")
	if d.requests > 0 || d.answers > 0 || d.failures > 0 {
		req := fmt.Sprintf("%d requests, %d answers", d.requests, d.answers)
		if d.failures > 0 {
			req += fmt.Sprintf(", %d failed", d.failures)
			if d.rateLimits > 0 {
				req += fmt.Sprintf(" (%d rate limited)", d.rateLimits)
			}
		}
		parts = append(parts, req)
	}
	if len(parts) == 0 {
		parts = append(parts, "state changed")
	}
	s := strings.Join(parts, ", ") + "; now " + state
	if eta {
		s += "; " + h.eta(now, cur)
	}
	return s, true
}

// eta estimates when the work left is done at the pace since start. The
// modules may still add work, so it is a lower bound.
func (h *heartbeat) eta(now time.Time, cur stateTotals) string {
	left := cur.waiting + cur.running + cur.paused
	if left == 0 {
		return "no work left"
	}
	elapsed := now.Sub(h.start)
	if h.finished == 0 || elapsed <= 0 {
		return fmt.Sprintf("eta unknown (%d tasks left, none finished yet)", left)
	}
	rate := float64(h.finished) / elapsed.Seconds() // tasks per second
	est := time.Duration(float64(left) / rate * float64(time.Second))
	return fmt.Sprintf("eta ~%s (%d tasks left at %.1f/min)", roundETA(est), left, rate*60)
}

func roundETA(d time.Duration) time.Duration {
	switch {
	case d >= time.Hour:
		return d.Round(time.Minute)
	case d >= time.Minute:
		return d.Round(10 * time.Second)
	}
	return d.Round(time.Second)
}

// DumpState writes what SIGUSR1 asks for to logs/stacks-<time>.txt: every
// goroutine's stack first (it needs nothing from the actors, so a wedged
// actor cannot stop it), then each actor's mailbox depth (read without
// sending a message), then a task summary from the scheduler, which is
// given at most two seconds.
func DumpState(dataDir string, sys *actors.System) (string, error) {
	path := filepath.Join(dataDir, "logs", "stacks-"+time.Now().UTC().Format("20060102T150405.000Z")+".txt")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fmt.Fprintf(f, "fano state dump, pid %d, %s\n\n== goroutines ==\n", os.Getpid(), time.Now().UTC().Format(time.RFC3339Nano))
	if err := pprof.Lookup("goroutine").WriteTo(f, 2); err != nil {
		return "", err
	}
	if sys != nil {
		writeMailboxes(f, sys.Mailboxes())
		writeTaskSummary(f, sys, 2*time.Second)
	}
	return path, f.Sync()
}

func writeMailboxes(w io.Writer, boxes []actors.MailboxDepth) {
	fmt.Fprintf(w, "\n== mailboxes (user messages waiting) ==\n")
	for _, b := range boxes {
		fmt.Fprintf(w, "%6d  %s\n", b.Depth, b.Actor)
	}
}

func writeTaskSummary(w io.Writer, sys *actors.System, wait time.Duration) {
	fmt.Fprintf(w, "\n== tasks ==\n")
	type summary struct {
		counts  map[string]map[pb.TaskState]int
		running []*pb.Task
	}
	done := make(chan summary, 1)
	go func() {
		var s summary
		s.counts = sys.Counts()
		s.running = sys.Tasks(func(t *pb.Task) bool { return t.State == pb.TaskState_TASK_STATE_RUNNING }, 0)
		done <- s
	}()
	select {
	case s := <-done:
		modules := make([]string, 0, len(s.counts))
		for m := range s.counts {
			modules = append(modules, m)
		}
		sort.Strings(modules)
		for _, m := range modules {
			var parts []string
			for st := pb.TaskState_TASK_STATE_PENDING; st <= pb.TaskState_TASK_STATE_CANCELLED; st++ {
				if n := s.counts[m][st]; n > 0 {
					parts = append(parts, fmt.Sprintf("%s %d", strings.TrimPrefix(st.String(), "TASK_STATE_"), n))
				}
			}
			fmt.Fprintf(w, "%s: %s\n", m, strings.Join(parts, ", "))
		}
		fmt.Fprintf(w, "running: %d (executors: %d)\n", len(s.running), sys.Running())
		for _, t := range s.running {
			fmt.Fprintf(w, "  %s on %s, %d requests, awaiting answer: %v, updated %s\n", t.Id, t.LlmAssigned, t.RequestCount,
				t.Conversation.GetAwaitingResponse(), time.Unix(0, t.UpdatedAt).UTC().Format(time.RFC3339))
		}
	case <-time.After(wait):
		fmt.Fprintf(w, "the scheduler did not answer within %s (see its mailbox depth above)\n", wait)
	}
}

// OpsSection is what `fano status` shows of health and metrics: read from
// ops-status.json while fano runs, from the WAL (metrics only) when not.
type OpsSection struct {
	Source  string            `json:"source"` // "running" | "wal"
	AsOf    time.Time         `json:"as_of"`
	Health  *health.Status    `json:"health,omitempty"`
	Metrics *metrics.Snapshot `json:"metrics"`
}

// ReadOpsStatus returns the section for `fano status`. With log == nil
// (fano runs and holds the database) it reads what the running process
// wrote at its last heartbeat; otherwise it replays the last 24 hours of
// the WAL into fresh metrics.
func ReadOpsStatus(dataDir string, log *wal.Log, now time.Time) (*OpsSection, error) {
	if log == nil {
		data, err := os.ReadFile(filepath.Join(dataDir, OpsStatusFile))
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil // started less than a heartbeat ago
		}
		if err != nil {
			return nil, err
		}
		var st OpsStatus
		if err := json.Unmarshal(data, &st); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dataDir, OpsStatusFile), err)
		}
		return &OpsSection{Source: "running", AsOf: st.WrittenAt, Health: &st.Health, Metrics: &st.Metrics}, nil
	}
	m, err := metricsFromWAL(log, now)
	if err != nil {
		return nil, err
	}
	snap := m.Snapshot(now)
	return &OpsSection{Source: "wal", AsOf: now.UTC(), Metrics: &snap}, nil
}

// metricsFromWAL feeds the events of the last window of the WAL to fresh
// metrics. Entries older than the window are skipped before decoding.
func metricsFromWAL(log *wal.Log, now time.Time) (*metrics.Metrics, error) {
	m := metrics.New(metrics.DefaultWindow)
	from := now.Add(-m.Window())
	err := log.Replay(1, func(ent wal.Entry) error {
		if ent.Time.Before(from) || ent.Owner == actors.OwnerEffects {
			return nil
		}
		var e pb.Event
		if err := proto.Unmarshal(ent.Payload, &e); err != nil {
			return fmt.Errorf("wal entry %d (%s): %w", ent.Seq, ent.Type, err)
		}
		m.Observe(ent.Owner, &e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("metrics from the WAL: %w", err)
	}
	return m, nil
}

// PrintOps prints the status section for people.
func PrintOps(w io.Writer, s *OpsSection) {
	if s == nil {
		return
	}
	if h := s.Health; h != nil {
		state := "healthy"
		if !h.Healthy {
			state = "unhealthy: " + strings.Join(h.Issues, "; ")
		}
		fmt.Fprintf(w, "health (as of %s): %s\n", s.AsOf.Format(time.RFC3339), state)
		fmt.Fprintf(w, "  llms available %d/%d, queue depth %d, disk free %.2f GB, stuck handled %d, reconnects %d\n",
			h.LLMsAvailable, h.LLMsTotal, h.QueueDepth, float64(h.DiskFreeBytes)/1e9, h.StuckHandled, h.Reconnects)
	}
	if m := s.Metrics; m != nil {
		fmt.Fprintf(w, "last %s (from %s): %d tasks completed, %d failed; %d LLM requests, %d rate limits\n",
			m.Window, s.Source, metrics.Total(m.TasksCompleted), metrics.Total(m.TasksFailed),
			metrics.Total(m.LLMRequests), metrics.Total(m.LLMRateLimitsHit))
		backends := make([]string, 0, len(m.LLMRequests))
		for b := range m.LLMRequests {
			backends = append(backends, b)
		}
		sort.Strings(backends)
		for _, b := range backends {
			fmt.Fprintf(w, "  %-16s %5d requests, avg %.2fs, %d rate limits, quota used %d\n", b, m.LLMRequests[b],
				m.LLMAvgResponseSeconds[b], m.LLMRateLimitsHit[b], m.QuotaUsed[b])
		}
	}
}

// LiveOpsSection reads the panel's "health" (an opsView) as the section
// `fano status` shows; nil when the panel has none.
func LiveOpsSection(h any) *OpsSection {
	if h == nil {
		return nil
	}
	data, err := json.Marshal(h)
	if err != nil {
		return nil
	}
	var v opsView
	if json.Unmarshal(data, &v) != nil {
		return nil
	}
	return &OpsSection{Source: "running", AsOf: v.CheckedAt, Health: &v.Status, Metrics: &v.Metrics}
}

// PrintLiveHealth prints the health and 24-hour figures that a running
// fano's panel returns under "health" (decoded as generic JSON).
func PrintLiveHealth(w io.Writer, h any) {
	PrintOps(w, LiveOpsSection(h))
}
