// Package health is fano's health monitor: every
// check_interval it looks for tasks RUNNING longer than the stuck
// threshold (reported) and the stuck timeout (handled), for the moment no LLM backend is reachable, for free disk
// space below the minimum and for a queue deeper than the maximum, and
// decides what to do about each.
//
// Monitor is the logic, a plain type fed with samples and events on the
// injected clock's time; it decides and never acts. Service runs a Monitor
// on a clock and carries its decisions out through a Target (the running
// actor system): pause or fail stuck tasks, reconnect backends, stop and
// resume the intake of new work, publish alerts.
package health

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"fano/config"
	"fano/pb"
)

// Stuck actions (config orchestrator.recovery.stuck_action).
const (
	ActionPause = config.StuckPause
	ActionFail  = config.StuckFail
)

// Alert kinds.
const (
	AlertNoLLM      = "no_llm"
	AlertLowDisk    = "low_disk"
	AlertDiskError  = "disk_unreadable"
	AlertQueueDepth = "queue_depth"
	AlertStuckTask  = "stuck_task"
)

// Config tunes a Monitor. Zero fields take the defaults, except
// MinFreeBytes and MaxQueueDepth: 0 turns that check off.
type Config struct {
	CheckInterval  time.Duration // default 60 s
	StuckThreshold time.Duration // default 2 h: a run this long is reported stuck
	// StuckTimeout: a run this long is handled (StuckAction); never less
	// than StuckThreshold, which it defaults to.
	StuckTimeout   time.Duration
	StuckAction    string        // ActionPause (default) or ActionFail
	MinFreeBytes   uint64        // free bytes below which no new work starts
	MaxQueueDepth  int           // pending tasks above which to alert
	ReconnectAfter time.Duration // default 30 s: no LLM for this long -> reconnect
	DiskPath       string        // whose file system to watch (the data directory)
}

// FromConfig takes the monitor's settings from fano's config.
func FromConfig(c *config.Config, dataDir string) Config {
	h := c.Orchestrator.Health
	return Config{
		CheckInterval:  time.Duration(h.CheckIntervalSeconds) * time.Second,
		StuckThreshold: time.Duration(h.StuckThresholdHours) * time.Hour,
		StuckTimeout:   time.Duration(c.Orchestrator.Recovery.StuckTaskTimeoutHours) * time.Hour,
		StuckAction:    c.Orchestrator.Recovery.StuckAction,
		MinFreeBytes:   uint64(h.MinDiskSpaceGB * 1e9),
		MaxQueueDepth:  h.MaxQueueDepth,
		ReconnectAfter: time.Duration(h.ReconnectAfterSeconds) * time.Second,
		DiskPath:       dataDir,
	}
}

func (c Config) withDefaults() Config {
	if c.CheckInterval <= 0 {
		c.CheckInterval = time.Minute
	}
	if c.StuckThreshold <= 0 {
		c.StuckThreshold = 2 * time.Hour
	}
	c.StuckTimeout = max(c.StuckTimeout, c.StuckThreshold)
	if c.StuckAction != ActionFail {
		c.StuckAction = ActionPause
	}
	if c.ReconnectAfter <= 0 {
		c.ReconnectAfter = 30 * time.Second
	}
	return c
}

// Sample is what one check reads from the system.
type Sample struct {
	At         time.Time
	Running    []string // ids of the RUNNING tasks
	QueueDepth int      // PENDING and READY tasks
	Backends   []Backend
	DiskFree   uint64
	DiskErr    error // the free space could not be read
	// StorageErr is the WAL write fault going on (nil: writes succeed).
	StorageErr error
}

// Backend is one LLM backend as a check sees it.
type Backend struct {
	Name    string `json:"name"`
	Healthy bool   `json:"healthy"`          // its Health probe passed
	Paused  bool   `json:"paused,omitempty"` // an operator paused it
	Error   string `json:"error,omitempty"`
	// State is what the allocator and the backend know: "ready" (or "")
	// takes work; rate_limited, capped, credentials, login, circuit_open,
	// exhausted... do not, whatever the probe says.
	State string    `json:"state,omitempty"`
	Until time.Time `json:"until,omitzero"`
	// Class is State's row of the condition table (allocator.Describe):
	// rate, quota, transient or person; "" when ready.
	Class  string `json:"class,omitempty"`
	Action string `json:"action,omitempty"`
}

// waitingForQuota: healthy, but a rate or quota window holds it until a
// known time.
func (b Backend) waitingForQuota() bool {
	switch b.Class {
	case "rate", "quota":
		return b.Healthy && !b.Paused
	}
	return false
}

// available: only a backend that can take work now counts.
func (b Backend) available() bool {
	return b.Healthy && !b.Paused && (b.State == "" || b.State == "ready" || b.State == "busy")
}

// StuckTask is a run that lasted longer than the threshold.
type StuckTask struct {
	ID      string        `json:"id"`
	Since   time.Time     `json:"since"`
	For     time.Duration `json:"for_ns"`
	Action  string        `json:"action"`            // pause | fail
	Outcome string        `json:"outcome,omitempty"` // how it ended, once handled
	Error   string        `json:"error,omitempty"`
}

// Alert is a condition raised or resolved, for people and the panel.
type Alert struct {
	Kind     string            `json:"kind"`
	Resolved bool              `json:"resolved"`
	Message  string            `json:"message"`
	Data     map[string]string `json:"data,omitempty"`
}

// Plan is what a check decided; Service carries it out.
type Plan struct {
	Stuck        []StuckTask
	StopIntake   bool // free disk fell below the minimum
	ResumeIntake bool // it came back
	Reconnect    bool // arm a reconnect ReconnectAfter from now
	Alerts       []Alert
}

// Status is the monitor's latest view: what `fano status` and the
// control panel show. It is plain data, safe to copy and encode as JSON.
type Status struct {
	Healthy       bool      `json:"healthy"`
	CheckedAt     time.Time `json:"checked_at"`
	Checks        int       `json:"checks"`
	Issues        []string  `json:"issues"`
	CheckInterval string    `json:"check_interval"`

	LLMsAvailable int       `json:"llms_available"`
	LLMsTotal     int       `json:"llms_total"`
	Backends      []Backend `json:"backends"`
	NoLLMSince    time.Time `json:"no_llm_since,omitempty"`
	Reconnects    int       `json:"reconnects"`
	LastReconnect time.Time `json:"last_reconnect,omitempty"`
	// ReconnectResult says what the last reconnect found.
	ReconnectResult string `json:"reconnect_result,omitempty"`

	StuckThreshold string      `json:"stuck_threshold"`
	StuckTimeout   string      `json:"stuck_timeout"`
	StuckAction    string      `json:"stuck_action"`
	StuckHandled   int         `json:"stuck_handled"`
	RecentStuck    []StuckTask `json:"recent_stuck,omitempty"` // newest last, at most 20

	QueueDepth    int `json:"queue_depth"`
	MaxQueueDepth int `json:"max_queue_depth"`

	// Blocked lists what keeps fano from doing any work now: free disk
	// below the minimum, WAL writes failing, no LLM backend able to take
	// work. Empty: fano can work (it is ready). /healthz answers 503
	// with these reasons while there are any.
	Blocked []string `json:"blocked"`

	DiskFreeBytes    uint64 `json:"disk_free_bytes"`
	MinDiskFreeBytes uint64 `json:"min_disk_free_bytes"`
	DiskError        string `json:"disk_error,omitempty"`
	// IntakeStopped: the monitor stopped new work for low disk space.
	IntakeStopped bool `json:"intake_stopped"`
}

// Monitor decides, check by check, what the system's health requires. It
// keeps only what it needs to decide on transitions: which conditions are
// raised, when each running task's current run began, which stuck runs it
// already handled. Not safe for concurrent use (Service serializes it).
type Monitor struct {
	cfg Config

	runSince  map[string]time.Time // task id -> start of its current run (from TaskStarted)
	firstSeen map[string]time.Time // running ids whose start we did not see -> first check that saw them
	handled   map[string]time.Time // task id -> the run start already handled

	lowDisk, diskErr, queueHigh, noLLM bool
	// Why work is blocked, by cause ("" while it is not): see Status.Blocked.
	blockedDisk, blockedStorage, blockedLLM string
	reconnectArmed                          bool
	// intakeHeld: new work was held back before the first reading (see
	// ServiceOptions.IntakeHeld); cleared by the first reading.
	intakeHeld bool

	status Status
}

// New returns a Monitor with no check done yet.
func New(cfg Config) *Monitor {
	cfg = cfg.withDefaults()
	return &Monitor{
		cfg:       cfg,
		runSince:  map[string]time.Time{},
		firstSeen: map[string]time.Time{},
		handled:   map[string]time.Time{},
		status: Status{
			Healthy: true, Issues: []string{}, Blocked: []string{}, CheckInterval: cfg.CheckInterval.String(),
			StuckThreshold: cfg.StuckThreshold.String(), StuckTimeout: cfg.StuckTimeout.String(), StuckAction: cfg.StuckAction,
			MaxQueueDepth: cfg.MaxQueueDepth, MinDiskFreeBytes: cfg.MinFreeBytes,
		},
	}
}

// Config returns the effective configuration.
func (m *Monitor) Config() Config { return m.cfg }

// Observe follows the scheduler's task events so that a run's length is
// measured from its own start (a task's started_at is its first start
// ever, and a resumed task starts again).
func (m *Monitor) Observe(e *pb.Event) {
	switch b := e.GetBody().(type) {
	case *pb.Event_TaskStarted:
		id := b.TaskStarted.GetTaskId()
		m.runSince[id] = time.Unix(0, e.GetAt()).UTC()
		delete(m.firstSeen, id)
	case *pb.Event_TaskPaused:
		m.ended(b.TaskPaused.GetTaskId())
	case *pb.Event_TaskCompleted:
		m.ended(b.TaskCompleted.GetTaskId())
	case *pb.Event_TaskFailed:
		m.ended(b.TaskFailed.GetTaskId())
	case *pb.Event_TaskCancelled:
		m.ended(b.TaskCancelled.GetTaskId())
	case *pb.Event_TaskRetryScheduled:
		m.ended(b.TaskRetryScheduled.GetTaskId())
	case *pb.Event_TaskRequeued:
		m.ended(b.TaskRequeued.GetTaskId())
	case *pb.Event_TaskForgotten:
		for _, id := range b.TaskForgotten.IDs() {
			m.ended(id)
		}
	}
}

func (m *Monitor) ended(id string) {
	delete(m.runSince, id)
	delete(m.firstSeen, id)
	delete(m.handled, id)
}

// Check evaluates one sample and returns the plan. Conditions alert once
// when they arise and once when they clear; a stuck run is handled once.
func (m *Monitor) Check(s Sample) Plan {
	var p Plan
	var issues []string
	now := s.At
	st := &m.status
	st.Checks++
	st.CheckedAt = now

	// Stuck tasks: RUNNING longer than the threshold (an issue) or the
	// timeout (handled), measured from the start of the current run (or
	// from the first check that saw it, when the monitor started after the
	// run did).
	running := map[string]bool{}
	for _, id := range s.Running {
		running[id] = true
		since, ok := m.runSince[id]
		if !ok {
			if since, ok = m.firstSeen[id]; !ok {
				since = now
				m.firstSeen[id] = now
			}
		}
		d := now.Sub(since)
		if d <= m.cfg.StuckThreshold {
			continue
		}
		issues = append(issues, fmt.Sprintf("task %s stuck: running for %s (threshold %s)", id, round(d), m.cfg.StuckThreshold))
		if d <= m.cfg.StuckTimeout {
			continue
		}
		if h, done := m.handled[id]; done && h.Equal(since) {
			continue
		}
		m.handled[id] = since
		p.Stuck = append(p.Stuck, StuckTask{ID: id, Since: since, For: d, Action: m.cfg.StuckAction})
		p.Alerts = append(p.Alerts, Alert{Kind: AlertStuckTask,
			Message: fmt.Sprintf("task %s has been running for %s; %s it", id, round(d), verb(m.cfg.StuckAction)),
			Data:    map[string]string{"task_id": id, "action": m.cfg.StuckAction, "running_for": round(d).String()}})
	}
	for id := range m.firstSeen {
		if !running[id] {
			delete(m.firstSeen, id)
		}
	}

	// LLM connectivity.
	st.Backends = append([]Backend(nil), s.Backends...)
	st.LLMsTotal = len(s.Backends)
	st.LLMsAvailable = 0
	var down []string
	for _, b := range s.Backends {
		if b.available() {
			st.LLMsAvailable++
		} else {
			down = append(down, b.Name+": "+reasonOf(b))
		}
	}
	// Every backend waiting for its quota (rate limited, capped, the
	// hour's budget spent) is fano working at full use, not a fault: no
	// alert, no reconnect.
	waiting := false
	for _, b := range s.Backends {
		waiting = waiting || b.waitingForQuota()
	}
	noLLM := st.LLMsTotal > 0 && st.LLMsAvailable == 0 && !waiting
	switch {
	case noLLM && !m.noLLM:
		m.noLLM = true
		st.NoLLMSince = now
		p.Alerts = append(p.Alerts, Alert{Kind: AlertNoLLM,
			Message: fmt.Sprintf("no LLM available (%s); reconnecting in %s", strings.Join(down, "; "), m.cfg.ReconnectAfter)})
	case !noLLM && m.noLLM:
		m.noLLM = false
		p.Alerts = append(p.Alerts, Alert{Kind: AlertNoLLM, Resolved: true,
			Message: fmt.Sprintf("%d of %d LLMs available again after %s", st.LLMsAvailable, st.LLMsTotal, round(now.Sub(st.NoLLMSince)))})
		st.NoLLMSince = time.Time{}
	}
	m.blockedLLM = ""
	// A backend that waits on a person is an issue until they act: it
	// names what to do (the one alert was raised where it was recorded).
	for _, b := range s.Backends {
		if b.Class == "person" && b.Action != "" {
			issues = append(issues, fmt.Sprintf("%s waits on a person (%s): %s", b.Name, b.State, b.Action))
		}
	}
	if noLLM {
		m.blockedLLM = fmt.Sprintf("no LLM backend can take work (%s)", strings.Join(down, "; "))
		issues = append(issues, fmt.Sprintf("no LLMs available (%d configured)", st.LLMsTotal))
		if !m.reconnectArmed {
			m.reconnectArmed = true
			p.Reconnect = true
		}
	}

	// Disk space.
	st.DiskError = ""
	if s.DiskErr != nil {
		st.DiskError = s.DiskErr.Error()
		issues = append(issues, "free disk space unknown: "+st.DiskError)
		if !m.diskErr {
			m.diskErr = true
			p.Alerts = append(p.Alerts, Alert{Kind: AlertDiskError, Message: "cannot read free disk space: " + st.DiskError})
		}
	} else {
		if m.diskErr {
			m.diskErr = false
			p.Alerts = append(p.Alerts, Alert{Kind: AlertDiskError, Resolved: true, Message: "free disk space readable again"})
		}
		st.DiskFreeBytes = s.DiskFree
		low := m.cfg.MinFreeBytes > 0 && s.DiskFree < m.cfg.MinFreeBytes
		switch {
		case low && !m.lowDisk:
			m.lowDisk = true
			p.StopIntake = true
			p.Alerts = append(p.Alerts, Alert{Kind: AlertLowDisk,
				Message: fmt.Sprintf("free disk space %s is below the minimum %s: no new work starts until space returns", bytesOf(s.DiskFree), bytesOf(m.cfg.MinFreeBytes)),
				Data:    map[string]string{"free_bytes": fmt.Sprint(s.DiskFree), "min_bytes": fmt.Sprint(m.cfg.MinFreeBytes)}})
		case !low && m.intakeHeld:
			p.ResumeIntake = true // held at the start, and space is fine now
		case !low && m.lowDisk:
			m.lowDisk = false
			p.ResumeIntake = true
			p.Alerts = append(p.Alerts, Alert{Kind: AlertLowDisk, Resolved: true,
				Message: fmt.Sprintf("free disk space %s is back above the minimum %s: new work starts again", bytesOf(s.DiskFree), bytesOf(m.cfg.MinFreeBytes)),
				Data:    map[string]string{"free_bytes": fmt.Sprint(s.DiskFree), "min_bytes": fmt.Sprint(m.cfg.MinFreeBytes)}})
		}
		m.intakeHeld = false
		m.blockedDisk = ""
		if low {
			issues = append(issues, fmt.Sprintf("low disk space: %s free, minimum %s", bytesOf(s.DiskFree), bytesOf(m.cfg.MinFreeBytes)))
			m.blockedDisk = fmt.Sprintf("free disk space %s is below the minimum %s (orchestrator.health.min_disk_space_gb): no new work starts",
				bytesOf(s.DiskFree), bytesOf(m.cfg.MinFreeBytes))
		}
	}
	st.IntakeStopped = m.lowDisk

	// Queue depth.
	st.QueueDepth = s.QueueDepth
	high := m.cfg.MaxQueueDepth > 0 && s.QueueDepth > m.cfg.MaxQueueDepth
	switch {
	case high && !m.queueHigh:
		m.queueHigh = true
		p.Alerts = append(p.Alerts, Alert{Kind: AlertQueueDepth,
			Message: fmt.Sprintf("queue depth %d is above the maximum %d", s.QueueDepth, m.cfg.MaxQueueDepth),
			Data:    map[string]string{"depth": fmt.Sprint(s.QueueDepth), "max": fmt.Sprint(m.cfg.MaxQueueDepth)}})
	case !high && m.queueHigh:
		m.queueHigh = false
		p.Alerts = append(p.Alerts, Alert{Kind: AlertQueueDepth, Resolved: true,
			Message: fmt.Sprintf("queue depth %d is back within the maximum %d", s.QueueDepth, m.cfg.MaxQueueDepth)})
	}
	if high {
		issues = append(issues, fmt.Sprintf("high queue depth (%d, maximum %d)", s.QueueDepth, m.cfg.MaxQueueDepth))
	}

	m.blockedStorage = ""
	if s.StorageErr != nil {
		issues = append(issues, fmt.Sprintf("WAL writes fail (%v): no new work starts until they succeed", s.StorageErr))
		m.blockedStorage = fmt.Sprintf("WAL writes fail (%v): no work is done until they succeed", s.StorageErr)
	}
	m.setBlocked()

	sort.Strings(issues)
	if issues == nil {
		issues = []string{}
	}
	st.Issues = issues
	st.Healthy = len(issues) == 0
	return p
}

// Reconnected records the result of a reconnect the last plan armed.
// It returns the alert to publish when LLMs came back.
func (m *Monitor) Reconnected(at time.Time, backends []Backend) []Alert {
	m.reconnectArmed = false
	st := &m.status
	st.Reconnects++
	st.LastReconnect = at
	n := 0
	var down []string
	for _, b := range backends {
		if b.available() {
			n++
		} else {
			down = append(down, b.Name+": "+reasonOf(b))
		}
	}
	if n == 0 {
		st.ReconnectResult = fmt.Sprintf("still no LLM available (%s)", strings.Join(down, "; "))
		return nil
	}
	st.ReconnectResult = fmt.Sprintf("%d of %d LLMs available", n, len(backends))
	st.Backends = append([]Backend(nil), backends...)
	st.LLMsAvailable = n
	if !m.noLLM {
		return nil
	}
	m.noLLM = false
	m.blockedLLM = ""
	m.setBlocked()
	since := st.NoLLMSince
	st.NoLLMSince = time.Time{}
	var issues []string
	for _, s := range st.Issues {
		if !strings.HasPrefix(s, "no LLMs available") && !answeredPerson(s, backends) {
			issues = append(issues, s)
		}
	}
	if issues == nil {
		issues = []string{}
	}
	st.Issues = issues
	st.Healthy = len(issues) == 0
	return []Alert{{Kind: AlertNoLLM, Resolved: true,
		Message: fmt.Sprintf("reconnected: %d of %d LLMs available after %s", n, len(backends), round(at.Sub(since)))}}
}

// answeredPerson: issue is a backend's wait on a person, and the
// reconnect found that backend available again.
func answeredPerson(issue string, backends []Backend) bool {
	for _, b := range backends {
		if b.available() && strings.HasPrefix(issue, b.Name+" waits on a person") {
			return true
		}
	}
	return false
}

// setBlocked sets Status.Blocked from the causes raised.
func (m *Monitor) setBlocked() {
	b := []string{}
	for _, r := range []string{m.blockedDisk, m.blockedStorage, m.blockedLLM} {
		if r != "" {
			b = append(b, r)
		}
	}
	m.status.Blocked = b
}

// StuckDone records how a stuck run's handling ended.
func (m *Monitor) StuckDone(t StuckTask) {
	m.status.StuckHandled++
	m.status.RecentStuck = append(m.status.RecentStuck, t)
	if n := len(m.status.RecentStuck); n > 20 {
		m.status.RecentStuck = append([]StuckTask(nil), m.status.RecentStuck[n-20:]...)
	}
}

// Status returns a copy of the latest view.
func (m *Monitor) Status() Status {
	st := m.status
	st.Issues = append([]string(nil), st.Issues...)
	st.Blocked = append([]string{}, st.Blocked...)
	st.Backends = append([]Backend(nil), st.Backends...)
	st.RecentStuck = append([]StuckTask(nil), st.RecentStuck...)
	return st
}

func reasonOf(b Backend) string {
	switch {
	case b.Paused:
		return "paused"
	case b.Error != "":
		return b.Error
	case !b.Healthy:
		return "unhealthy"
	case !b.available():
		if !b.Until.IsZero() {
			return b.State + " until " + b.Until.UTC().Format(time.RFC3339)
		}
		return b.State
	}
	return "ok"
}

func verb(action string) string {
	if action == ActionFail {
		return "failing"
	}
	return "pausing"
}

func round(d time.Duration) time.Duration {
	if d >= time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

// bytesOf prints a byte count the way disk sizes are printed (GB = 1e9).
func bytesOf(n uint64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%d bytes", n)
}
