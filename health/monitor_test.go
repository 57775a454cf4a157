package health

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"fano/config"
	"fano/pb"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func healthy(names ...string) []Backend {
	var out []Backend
	for _, n := range names {
		out = append(out, Backend{Name: n, Healthy: true})
	}
	return out
}

func started(id string, at time.Time) *pb.Event {
	return &pb.Event{At: at.UnixNano(), Body: &pb.Event_TaskStarted{TaskStarted: &pb.TaskStarted{TaskId: id, Llm: "a"}}}
}

func paused(id string, at time.Time) *pb.Event {
	return &pb.Event{At: at.UnixNano(), Body: &pb.Event_TaskPaused{TaskPaused: &pb.TaskPaused{TaskId: id, Reason: "preempted"}}}
}

func sample(at time.Time, running ...string) Sample {
	return Sample{At: at, Running: running, Backends: healthy("a", "b"), DiskFree: 50e9}
}

func TestDefaultsAndFromConfigShape(t *testing.T) {
	m := New(Config{})
	c := m.Config()
	require.Equal(t, time.Minute, c.CheckInterval)
	require.Equal(t, 2*time.Hour, c.StuckThreshold)
	require.Equal(t, ActionPause, c.StuckAction)
	require.Equal(t, 30*time.Second, c.ReconnectAfter)
	st := m.Status()
	require.True(t, st.Healthy)
	require.Equal(t, "2h0m0s", st.StuckThreshold)
}

func TestStuckMeasuredFromTheCurrentRunAndHandledOnce(t *testing.T) {
	m := New(Config{StuckThreshold: time.Hour, StuckAction: ActionFail})
	// First run started at t0, paused, started again at t0+50m.
	m.Observe(started("x", t0))
	m.Observe(paused("x", t0.Add(40*time.Minute)))
	m.Observe(started("x", t0.Add(50*time.Minute)))

	p := m.Check(sample(t0.Add(90*time.Minute), "x"))
	require.Empty(t, p.Stuck, "the current run is only 40 minutes old")
	require.True(t, m.Status().Healthy)

	p = m.Check(sample(t0.Add(111*time.Minute), "x"))
	require.Len(t, p.Stuck, 1)
	require.Equal(t, "x", p.Stuck[0].ID)
	require.Equal(t, ActionFail, p.Stuck[0].Action)
	require.Equal(t, 61*time.Minute, p.Stuck[0].For)
	require.Equal(t, AlertStuckTask, p.Alerts[0].Kind)
	require.False(t, m.Status().Healthy)

	p = m.Check(sample(t0.Add(112*time.Minute), "x"))
	require.Empty(t, p.Stuck, "one run is handled once")
	require.Contains(t, m.Status().Issues[0], "task x stuck")

	// A new run of the same task is measured afresh.
	m.Observe(paused("x", t0.Add(113*time.Minute)))
	m.Observe(started("x", t0.Add(114*time.Minute)))
	p = m.Check(sample(t0.Add(115*time.Minute), "x"))
	require.Empty(t, p.Stuck)
	require.True(t, m.Status().Healthy)
}

func TestStuckWithoutSeenStartCountsFromFirstCheck(t *testing.T) {
	m := New(Config{StuckThreshold: time.Hour})
	require.Empty(t, m.Check(sample(t0, "y")).Stuck)
	require.Empty(t, m.Check(sample(t0.Add(time.Hour), "y")).Stuck)
	p := m.Check(sample(t0.Add(time.Hour+time.Second), "y"))
	require.Len(t, p.Stuck, 1)
	require.Equal(t, t0, p.Stuck[0].Since)
	require.Equal(t, ActionPause, p.Stuck[0].Action)
	// It stopped running: forgotten; seen again later, it starts over.
	require.Empty(t, m.Check(sample(t0.Add(2*time.Hour))).Stuck)
	require.Empty(t, m.Check(sample(t0.Add(3*time.Hour), "y")).Stuck)
}

func TestLowDiskStopsThenResumesIntake(t *testing.T) {
	m := New(Config{MinFreeBytes: 1e9})
	s := sample(t0)
	s.DiskFree = 2e9
	p := m.Check(s)
	require.False(t, p.StopIntake)
	require.Empty(t, p.Alerts)

	s.At, s.DiskFree = t0.Add(time.Minute), 5e8
	p = m.Check(s)
	require.True(t, p.StopIntake)
	require.Len(t, p.Alerts, 1)
	require.Equal(t, AlertLowDisk, p.Alerts[0].Kind)
	require.False(t, p.Alerts[0].Resolved)
	st := m.Status()
	require.True(t, st.IntakeStopped)
	require.False(t, st.Healthy)
	require.Contains(t, st.Issues[0], "low disk space")

	s.At = t0.Add(2 * time.Minute)
	p = m.Check(s)
	require.False(t, p.StopIntake, "stopped once")
	require.Empty(t, p.Alerts, "alerted once")

	s.At, s.DiskFree = t0.Add(3*time.Minute), 1e9
	p = m.Check(s)
	require.True(t, p.ResumeIntake)
	require.True(t, p.Alerts[0].Resolved)
	require.False(t, m.Status().IntakeStopped)
	require.True(t, m.Status().Healthy)
}

// A run that started with work held back (the disk was low before the
// start): the first reading lets work start if space is fine, silently;
// if it is still low it raises the alert once and space coming back lets
// work start, as for a disk that filled while running.
func TestIntakeHeldAtStart(t *testing.T) {
	m := New(Config{MinFreeBytes: 1e9})
	m.intakeHeld = true
	s := sample(t0)
	s.DiskFree = 2e9
	p := m.Check(s)
	require.True(t, p.ResumeIntake, "space is fine by the first check")
	require.Empty(t, p.Alerts)
	s.At = t0.Add(time.Minute)
	require.False(t, m.Check(s).ResumeIntake, "once")

	m = New(Config{MinFreeBytes: 1e9})
	m.intakeHeld = true
	s.At, s.DiskFree = t0, 5e8
	p = m.Check(s)
	require.False(t, p.ResumeIntake)
	require.Len(t, p.Alerts, 1)
	require.Equal(t, AlertLowDisk, p.Alerts[0].Kind)
	s.At, s.DiskFree = t0.Add(time.Minute), 2e9
	p = m.Check(s)
	require.True(t, p.ResumeIntake)
	require.True(t, p.Alerts[0].Resolved)

	m = New(Config{MinFreeBytes: 1e9})
	m.intakeHeld = true
	s.At, s.DiskErr = t0, errors.New("statfs: gone")
	require.False(t, m.Check(s).ResumeIntake, "held until a reading says space is fine")
	s.At, s.DiskErr = t0.Add(time.Minute), nil
	require.True(t, m.Check(s).ResumeIntake)
}

func TestDiskUnreadableIsAnIssueNotAStop(t *testing.T) {
	m := New(Config{MinFreeBytes: 1e9})
	s := sample(t0)
	s.DiskErr = errors.New("statfs: permission denied")
	p := m.Check(s)
	require.False(t, p.StopIntake)
	require.Equal(t, AlertDiskError, p.Alerts[0].Kind)
	require.Contains(t, m.Status().DiskError, "permission denied")
	s.DiskErr, s.DiskFree = nil, 2e9
	p = m.Check(s)
	require.True(t, p.Alerts[0].Resolved)
	require.True(t, m.Status().Healthy)
}

func TestQueueDepthAlertsOnceAndClears(t *testing.T) {
	m := New(Config{MaxQueueDepth: 10})
	s := sample(t0)
	s.QueueDepth = 10
	require.Empty(t, m.Check(s).Alerts)
	s.QueueDepth = 11
	p := m.Check(s)
	require.Equal(t, AlertQueueDepth, p.Alerts[0].Kind)
	require.Empty(t, m.Check(s).Alerts)
	require.Equal(t, 11, m.Status().QueueDepth)
	s.QueueDepth = 3
	p = m.Check(s)
	require.True(t, p.Alerts[0].Resolved)
}

func TestNoLLMArmsOneReconnectPerCheck(t *testing.T) {
	m := New(Config{})
	down := []Backend{{Name: "a", Error: "login required"}, {Name: "b", Healthy: true, Paused: true}}
	s := Sample{At: t0, Backends: down, DiskFree: 50e9}
	p := m.Check(s)
	require.True(t, p.Reconnect)
	require.Equal(t, AlertNoLLM, p.Alerts[0].Kind)
	require.Contains(t, p.Alerts[0].Message, "a: login required")
	require.Contains(t, p.Alerts[0].Message, "b: paused")
	st := m.Status()
	require.Equal(t, 0, st.LLMsAvailable)
	require.Equal(t, t0, st.NoLLMSince)

	s.At = t0.Add(10 * time.Second)
	require.False(t, m.Check(s).Reconnect, "a reconnect is already armed")

	require.Nil(t, m.Reconnected(t0.Add(30*time.Second), down))
	st = m.Status()
	require.Equal(t, 1, st.Reconnects)
	require.Contains(t, st.ReconnectResult, "still no LLM")

	s.At = t0.Add(time.Minute)
	require.True(t, m.Check(s).Reconnect, "armed again after the last one ran")

	alerts := m.Reconnected(t0.Add(90*time.Second), healthy("a", "b"))
	require.Len(t, alerts, 1)
	require.True(t, alerts[0].Resolved)
	st = m.Status()
	require.True(t, st.Healthy)
	require.Equal(t, 2, st.LLMsAvailable)
	require.True(t, st.NoLLMSince.IsZero())

	p = m.Check(Sample{At: t0.Add(2 * time.Minute), Backends: healthy("a", "b"), DiskFree: 50e9})
	require.False(t, p.Reconnect)
	require.Empty(t, p.Alerts, "already resolved by the reconnect")
}

func TestNoBackendsIsNotNoLLM(t *testing.T) {
	m := New(Config{})
	p := m.Check(Sample{At: t0, DiskFree: 50e9})
	require.False(t, p.Reconnect)
	require.True(t, m.Status().Healthy)
}

// Only backends that can take work now count: a rate-limited or
// credential-less backend passes its probe but is not available.
func TestOnlyBackendsThatCanTakeWorkCount(t *testing.T) {
	at := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	m := New(Config{})
	first := m.Check(Sample{At: at, Backends: []Backend{
		{Name: "a", Healthy: true, State: "rate_limited", Class: "rate", Until: at.Add(time.Minute)},
		{Name: "b", Healthy: true, State: "credentials", Class: "person", Action: "fix the API key of b, then: fano backend resume b"},
	}})
	st := m.Status()
	require.Equal(t, 0, st.LLMsAvailable)
	require.Equal(t, 2, st.LLMsTotal)
	require.Empty(t, first.Alerts, "waiting for quota is full use, not a fault")
	require.False(t, first.Reconnect)
	require.Equal(t, []string{"b waits on a person (credentials): fix the API key of b, then: fano backend resume b"}, st.Issues,
		"the only issue: b waits on a person, and says for what")
	plan := m.Check(Sample{At: at.Add(time.Minute), Backends: []Backend{
		{Name: "a", Healthy: true, State: "login", Class: "person"},
		{Name: "b", Healthy: true, State: "credentials", Class: "person"},
	}})
	require.False(t, m.Status().Healthy, "no backend can work and none waits for quota")
	require.True(t, plan.Reconnect)
	m.Check(Sample{At: at.Add(2 * time.Minute), Backends: []Backend{
		{Name: "a", Healthy: true, State: "ready"},
		{Name: "b", Healthy: true, State: "credentials"},
	}})
	require.Equal(t, 1, m.Status().LLMsAvailable)
}

func TestWALWriteFaultIsUnhealthy(t *testing.T) {
	m := New(Config{MinFreeBytes: 1e9})
	s := sample(t0)
	s.DiskFree = 2e9
	s.StorageErr = errors.New("write fano.db: no space left on device")
	m.Check(s)
	st := m.Status()
	require.False(t, st.Healthy)
	require.Contains(t, strings.Join(st.Issues, "\n"), "WAL writes fail")
	s.At, s.StorageErr = t0.Add(time.Minute), nil
	m.Check(s)
	require.True(t, m.Status().Healthy)
}

// A run past the stuck threshold is reported (an issue, unhealthy) but
// handled only past the stuck timeout (recovery.stuck_task_timeout_hours).
func TestStuckReportedAtThresholdHandledAtTimeout(t *testing.T) {
	m := New(Config{StuckThreshold: time.Hour, StuckTimeout: 3 * time.Hour, StuckAction: ActionFail})
	m.Observe(started("x", t0))

	p := m.Check(sample(t0.Add(2*time.Hour), "x"))
	require.Empty(t, p.Stuck, "past the threshold, before the timeout: reported only")
	require.Empty(t, p.Alerts)
	require.False(t, m.Status().Healthy)
	require.Contains(t, m.Status().Issues[0], "task x stuck")

	p = m.Check(sample(t0.Add(3*time.Hour+time.Minute), "x"))
	require.Len(t, p.Stuck, 1)
	require.Equal(t, ActionFail, p.Stuck[0].Action)
	require.Equal(t, AlertStuckTask, p.Alerts[0].Kind)
	require.Equal(t, "3h0m0s", m.Status().StuckTimeout)
}

// The config's two stuck settings reach the monitor; a timeout below the
// threshold (refused by config validation) is raised to it.
func TestStuckTimeoutFromConfig(t *testing.T) {
	c := config.New()
	c.Orchestrator.Health.StuckThresholdHours = 2
	c.Orchestrator.Recovery.StuckTaskTimeoutHours = 5
	got := FromConfig(c, "/data")
	require.Equal(t, 2*time.Hour, got.StuckThreshold)
	require.Equal(t, 5*time.Hour, got.StuckTimeout)
	require.Equal(t, 2*time.Hour, New(Config{StuckThreshold: 2 * time.Hour, StuckTimeout: time.Hour}).Config().StuckTimeout)
}

// Blocked lists what keeps fano from any work (low disk, failing WAL
// writes, no LLM able to take work) and nothing else: a stuck task or a
// deep queue is an issue, not a block, and every backend waiting for its
// quota is full use.
func TestBlockedIsWhatStopsAllWork(t *testing.T) {
	m := New(Config{MinFreeBytes: 1e9, MaxQueueDepth: 1, StuckThreshold: time.Hour})
	m.Observe(started("x", t0))
	s := sample(t0.Add(2*time.Hour), "x")
	s.QueueDepth = 5
	m.Check(s)
	require.False(t, m.Status().Healthy)
	require.Empty(t, m.Status().Blocked, "a stuck task and a deep queue do not stop work")

	s = sample(t0.Add(3 * time.Hour))
	s.Backends = []Backend{{Name: "a", Healthy: true, State: "rate_limited", Class: "rate"}}
	m.Check(s)
	require.Empty(t, m.Status().Blocked, "waiting for quota is full use")

	s = sample(t0.Add(4 * time.Hour))
	s.DiskFree = 1e6
	s.StorageErr = errors.New("no space left on device")
	s.Backends = []Backend{{Name: "a", Error: "connection refused"}}
	m.Check(s)
	b := m.Status().Blocked
	require.Len(t, b, 3, "%q", b)
	require.Contains(t, b[0], "below the minimum")
	require.Contains(t, b[0], "min_disk_space_gb")
	require.Contains(t, b[1], "no space left on device")
	require.Contains(t, b[2], "no LLM backend can take work (a: ")

	m.Reconnected(t0.Add(4*time.Hour+time.Minute), healthy("a"))
	require.Len(t, m.Status().Blocked, 2, "the LLM is back")
	m.Check(sample(t0.Add(5 * time.Hour)))
	require.Empty(t, m.Status().Blocked)
	require.NotNil(t, m.Status().Blocked, "an empty list, not null, in JSON")
}
