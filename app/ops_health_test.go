package app

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"fano/actors"
	"fano/gateway"
	"fano/gateway/sim"
	"fano/health"
	"fano/modules/probe"
	"fano/pb"
)

// healthService starts a health service on o's clock and system, fed with
// the scheduler's events as `fano run` feeds it.
func healthService(t *testing.T, o *opsSys, cfg health.Config, disk health.DiskUsage) (*health.Service, chan health.Status) {
	t.Helper()
	checks := make(chan health.Status, 100)
	svc := health.NewService(cfg, health.ServiceOptions{
		Clock: o.clock, Target: sysTarget{sys: o.sys}, Disk: disk,
		Logger:  zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
		OnCheck: func(s health.Status) { checks <- s },
	})
	unsub := o.sys.Subscribe(func(n actors.Notice) {
		if n.Owner == "scheduler" && n.Event != nil {
			svc.Observe(n.Event)
		}
	})
	svc.Start()
	t.Cleanup(func() { unsub(); svc.Stop() })
	waitCheck(t, checks, "the first check, at start", func(s health.Status) bool { return s.Checks == 1 })
	return svc, checks
}

func waitCheck(t *testing.T, checks chan health.Status, what string, ok func(health.Status) bool) health.Status {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case s := <-checks:
			if ok(s) {
				return s
			}
		case <-deadline:
			t.Fatalf("no health status with %s", what)
		}
	}
}

// A call that hangs for longer than the stuck threshold: the monitor
// cancels it for real and pauses the task until the next check, then the
// task runs again.
func TestHealthStuckTaskPaused(t *testing.T) {
	o := startOpsSys(t, opsSysConfig{timeoutRate: 1, probe: probe.Config{Questions: []string{"q"}, Turns: 1}})
	o.waitTask("probe/exploration/q0000", "request in flight", awaitingAnswer)
	disk := &fakeDisk{}
	disk.free.Store(100e9)
	svc, checks := healthService(t, o, health.Config{CheckInterval: time.Minute, StuckThreshold: time.Hour, StuckAction: health.ActionPause}, disk.usage)

	// The first check (at start) saw the run; 61 minutes later it is stuck.
	o.clock.Advance(61 * time.Minute)
	st := waitCheck(t, checks, "stuck task handled", func(s health.Status) bool { return s.StuckHandled == 1 })
	require.Equal(t, "executor", st.RecentStuck[0].Outcome, "the executor stopped at a safe point")
	require.Equal(t, "pause", st.RecentStuck[0].Action)

	id := "probe/exploration/q0000"
	tk, ok := o.sys.Task(id)
	require.True(t, ok)
	require.Equal(t, pb.TaskState_TASK_STATE_PAUSED, tk.State)
	require.True(t, strings.HasPrefix(tk.PauseReason, "stuck: running for 1h1m"), tk.PauseReason)
	require.Equal(t, o.clock.Now().Add(time.Minute).UnixNano(), tk.NotBefore, "paused until the next check")
	require.False(t, tk.Conversation.GetAwaitingResponse(), "the hung call was cancelled and recorded")
	require.True(t, o.sys.Accepting(), "intake is back after the pause")
	o.waitNotice("stuck alert", isUpdate("alert", health.AlertStuckTask))
	o.waitNotice("cancelled request", isEvent("scheduler", func(e *pb.Event) bool {
		return e.GetLlmRequestFailed().GetKind() == "cancelled"
	}))

	// After the pause it runs again (and hangs again: the sim still does).
	o.clock.Advance(time.Minute + time.Second)
	o.sys.Tick()
	o.waitNotice("resumed", isEvent("scheduler", func(e *pb.Event) bool { return e.GetTaskResumed().GetTaskId() == id }))
	o.waitNotice("started again", isEvent("scheduler", func(e *pb.Event) bool { return e.GetTaskStarted().GetTaskId() == id }))
	require.Equal(t, 1, svc.Status().StuckHandled)
}

// With stuck_action fail the task ends FAILED and its module is told.
func TestHealthStuckTaskFailed(t *testing.T) {
	o := startOpsSys(t, opsSysConfig{timeoutRate: 1, probe: probe.Config{Questions: []string{"q"}, Turns: 1}})
	o.waitTask("probe/exploration/q0000", "request in flight", awaitingAnswer)
	disk := &fakeDisk{}
	disk.free.Store(100e9)
	_, checks := healthService(t, o, health.Config{CheckInterval: time.Minute, StuckThreshold: time.Hour, StuckAction: health.ActionFail}, disk.usage)

	o.clock.Advance(2 * time.Hour) // the first check, at start, saw the run
	st := waitCheck(t, checks, "stuck task handled", func(s health.Status) bool { return s.StuckHandled == 1 })
	require.Equal(t, "executor", st.RecentStuck[0].Outcome)

	tk, _ := o.sys.Task("probe/exploration/q0000")
	require.Equal(t, pb.TaskState_TASK_STATE_FAILED, tk.State)
	require.Contains(t, tk.Error, "stuck: running for 2h")
	o.waitNotice("module told", isEvent("module/probe", func(e *pb.Event) bool {
		return e.GetModuleEvent().GetType() == "question_failed"
	}))
	// Nothing runs it again.
	o.sys.Tick()
	tk, _ = o.sys.Task("probe/exploration/q0000")
	require.Equal(t, pb.TaskState_TASK_STATE_FAILED, tk.State)
}

// Free disk below the minimum: new work stops (a submitted task waits),
// an alert goes out; when space returns, work starts again.
func TestHealthLowDiskStopsAndResumesWork(t *testing.T) {
	o := startOpsSys(t, opsSysConfig{probe: probe.Config{NoPropose: true}})
	disk := &fakeDisk{}
	disk.free.Store(500e6)
	svc, _ := healthService(t, o, health.Config{CheckInterval: time.Minute, MinFreeBytes: 1e9}, disk.usage)

	st := svc.CheckNow(context.Background())
	require.True(t, st.IntakeStopped)
	require.False(t, st.Healthy)
	require.False(t, o.sys.Accepting())
	o.waitNotice("low disk alert", isUpdate("alert", health.AlertLowDisk))

	task := &pb.Task{Id: "probe/exploration/d1", Module: probe.Name, TaskType: probe.TaskType, Subject: "d1",
		MaxRequests: 1, Context: map[string]string{"question": "disk"}}
	r, err := o.sys.Submit(task)
	require.NoError(t, err)
	require.True(t, r.Accepted)
	o.sys.Tick()
	tk, _ := o.sys.Task(task.Id) // answered after the tick's dispatch: nothing started
	require.Equal(t, pb.TaskState_TASK_STATE_PENDING, tk.State)
	require.Equal(t, 0, o.sys.Running())

	disk.free.Store(3e9)
	st = svc.CheckNow(context.Background())
	require.False(t, st.IntakeStopped)
	require.True(t, st.Healthy)
	require.True(t, o.sys.Accepting())
	n := o.waitNotice("resolved alert", isUpdate("alert", health.AlertLowDisk))
	require.Equal(t, "true", n.Update.Data["resolved"])
	o.waitNotice("task completed", isEvent("scheduler", func(e *pb.Event) bool { return e.GetTaskCompleted().GetTaskId() == task.Id }))
}

// reconnecting is a sim backend with a Reconnect: a relaunch that clears
// its login wall, as a browser backend's would.
type reconnecting struct {
	*sim.Backend
	calls atomic.Int32
}

func (r *reconnecting) Reconnect(context.Context) error {
	r.calls.Add(1)
	r.SetUnavailable("")
	return nil
}

// No LLM available: an alert, then 30 s later (on the clock) a reconnect
// that brings the backends back.
func TestHealthNoLLMReconnects(t *testing.T) {
	var wrapped []*reconnecting
	o := startOpsSys(t, opsSysConfig{backends: []string{"alpha", "beta"}, probe: probe.Config{NoPropose: true},
		wrap: func(s *sim.Backend) gateway.Backend {
			r := &reconnecting{Backend: s}
			wrapped = append(wrapped, r)
			return r
		}})
	for _, s := range o.sims {
		s.SetUnavailable("login required")
	}
	disk := &fakeDisk{}
	disk.free.Store(100e9)
	svc, checks := healthService(t, o, health.Config{CheckInterval: time.Minute, ReconnectAfter: 30 * time.Second}, disk.usage)

	st := svc.CheckNow(context.Background())
	require.Equal(t, 0, st.LLMsAvailable)
	require.Equal(t, 2, st.LLMsTotal)
	require.Contains(t, st.Issues, "no LLMs available (2 configured)")
	require.Contains(t, st.Backends[0].Error, "login required")
	o.waitNotice("no-LLM alert", isUpdate("alert", health.AlertNoLLM))

	o.clock.Advance(29 * time.Second)
	require.Equal(t, 0, svc.Status().Reconnects, "not before 30 s")
	require.Zero(t, wrapped[0].calls.Load())
	o.clock.Advance(time.Second)
	st = waitCheck(t, checks, "a reconnect", func(s health.Status) bool { return s.Reconnects == 1 })
	require.Equal(t, 2, st.LLMsAvailable)
	require.True(t, st.Healthy)
	require.Equal(t, "2 of 2 LLMs available", st.ReconnectResult)
	require.EqualValues(t, 1, wrapped[0].calls.Load())
	require.EqualValues(t, 1, wrapped[1].calls.Load())
	o.waitNotice("reconnect update", isUpdate("reconnect", health.AlertNoLLM))
	require.NoError(t, wrapped[0].Health(context.Background()))
}

// Backends without Reconnect are probed again; while they stay down, a
// reconnect is tried again after each check, and once the person acted
// the backend's re-check brings it back.
func TestHealthNoLLMStillDownTriesAgain(t *testing.T) {
	o := startOpsSys(t, opsSysConfig{probe: probe.Config{NoPropose: true}})
	o.sims[0].SetUnavailable("login required")
	disk := &fakeDisk{}
	disk.free.Store(100e9)
	_, checks := healthService(t, o, health.Config{CheckInterval: time.Minute, ReconnectAfter: 30 * time.Second}, disk.usage)

	o.clock.Advance(30 * time.Second) // the check at start armed a reconnect
	st := waitCheck(t, checks, "a reconnect", func(s health.Status) bool { return s.Reconnects == 1 })
	require.Contains(t, st.ReconnectResult, "still no LLM available")
	require.False(t, st.Healthy)

	// The person logs in. A login wall is a person's condition: fano
	// sees it gone at the backend's next re-check (every 5 minutes), and
	// the check after that is healthy again.
	o.sims[0].SetUnavailable("")
	back := false
	// The backend is parked at a tick of the first minute or two (when
	// its login wall is first seen), its re-check is 5 minutes after
	// that and runs in the background: 9 minutes are the re-check and
	// one check past the latest park.
	for i := 0; i < 9 && !back; i++ {
		o.clock.Advance(time.Minute)
		n := st.Checks
		st = waitCheck(t, checks, "the minute's check", func(s health.Status) bool { return s.Checks > n })
		back = st.LLMsAvailable == 1
	}
	require.True(t, back, "available again within the re-check and one check")
	require.True(t, st.Healthy)
	o.waitNotice("resolved", func(n actors.Notice) bool {
		return isUpdate("alert", health.AlertNoLLM)(n) && n.Update.Data["resolved"] == "true"
	})
}
