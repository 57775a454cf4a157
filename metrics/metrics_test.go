package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"fano/pb"
)

var t0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

func ev(at time.Time, body any) *pb.Event {
	e := &pb.Event{At: at.UnixNano()}
	switch b := body.(type) {
	case *pb.TaskSubmitted:
		e.Body = &pb.Event_TaskSubmitted{TaskSubmitted: b}
	case *pb.TaskStarted:
		e.Body = &pb.Event_TaskStarted{TaskStarted: b}
	case *pb.LLMRequestStarted:
		e.Body = &pb.Event_LlmRequestStarted{LlmRequestStarted: b}
	case *pb.LLMResponseReceived:
		e.Body = &pb.Event_LlmResponseReceived{LlmResponseReceived: b}
	case *pb.LLMRequestFailed:
		e.Body = &pb.Event_LlmRequestFailed{LlmRequestFailed: b}
	case *pb.TaskCompleted:
		e.Body = &pb.Event_TaskCompleted{TaskCompleted: b}
	case *pb.TaskFailed:
		e.Body = &pb.Event_TaskFailed{TaskFailed: b}
	case *pb.TaskPaused:
		e.Body = &pb.Event_TaskPaused{TaskPaused: b}
	case *pb.QuotaUsed:
		e.Body = &pb.Event_QuotaUsed{QuotaUsed: b}
	case *pb.ModuleEvent:
		e.Body = &pb.Event_ModuleEvent{ModuleEvent: b}
	default:
		panic("unknown body")
	}
	return e
}

// feed runs one task through a request cycle at t.
func feed(m *Metrics, id, backend string, t time.Time, latency time.Duration, ok bool) {
	parts := strings.SplitN(id, "/", 3)
	m.Observe("scheduler", ev(t, &pb.TaskSubmitted{Task: &pb.Task{Id: id, Module: parts[0], TaskType: parts[1]}}))
	m.Observe("scheduler", ev(t.Add(10*time.Second), &pb.TaskStarted{TaskId: id, Llm: backend}))
	m.Observe("allocator", ev(t.Add(10*time.Second), &pb.QuotaUsed{Backend: backend, TaskId: id}))
	m.Observe("scheduler", ev(t.Add(10*time.Second), &pb.LLMRequestStarted{TaskId: id, Llm: backend, DeepMode: true}))
	if ok {
		m.Observe("scheduler", ev(t.Add(10*time.Second+latency), &pb.LLMResponseReceived{TaskId: id, Llm: backend, DurationNs: int64(latency), PromptTokens: 5, CompletionTokens: 7}))
		m.Observe("scheduler", ev(t.Add(11*time.Second+latency), &pb.TaskCompleted{TaskId: id}))
	} else {
		m.Observe("scheduler", ev(t.Add(10*time.Second+latency), &pb.LLMRequestFailed{TaskId: id, Llm: backend, Kind: "rate_limited"}))
		m.Observe("scheduler", ev(t.Add(11*time.Second+latency), &pb.TaskPaused{TaskId: id, Reason: "rate_limited"}))
		m.Observe("scheduler", ev(t.Add(12*time.Second+latency), &pb.TaskFailed{TaskId: id}))
	}
}

func TestCountsAndAveragesOverTheWindow(t *testing.T) {
	m := New(0)
	require.Equal(t, DefaultWindow, m.Window())
	feed(m, "explorer/exploration/a", "chatgpt", t0, 2*time.Second, true)
	feed(m, "explorer/critique/b", "chatgpt", t0.Add(time.Hour), 4*time.Second, true)
	feed(m, "documenter/review_section/c", "gemini", t0.Add(2*time.Hour), time.Second, false)
	m.Observe("module/explorer", ev(t0.Add(3*time.Hour), &pb.ModuleEvent{Module: "explorer", Type: "insight_blessed"}))
	m.ObserveUpdate(&pb.StateUpdate{Component: "health", UpdateType: "alert", At: t0.Add(3 * time.Hour).UnixNano(),
		Data: map[string]string{"kind": "low_disk", "resolved": "false"}})
	m.ObserveUpdate(&pb.StateUpdate{Component: "health", UpdateType: "alert", At: t0.Add(3 * time.Hour).UnixNano(),
		Data: map[string]string{"kind": "low_disk", "resolved": "true"}})

	s := m.Snapshot(t0.Add(4 * time.Hour))
	require.Equal(t, map[string]int64{"explorer": 2}, s.TasksCompleted)
	require.Equal(t, map[string]int64{"explorer/exploration": 1, "explorer/critique": 1}, s.TasksCompletedByType)
	require.Equal(t, map[string]int64{"documenter": 1}, s.TasksFailed)
	require.Equal(t, map[string]int64{"explorer": 2, "documenter": 1}, s.TasksSubmitted)
	require.Equal(t, map[string]int64{"chatgpt": 2, "gemini": 1}, s.LLMRequests)
	require.Equal(t, map[string]int64{"chatgpt": 2, "gemini": 1}, s.LLMDeepModeUses)
	require.Equal(t, map[string]int64{"gemini": 1}, s.LLMRateLimitsHit)
	require.Equal(t, map[string]int64{"gemini/rate_limited": 1}, s.LLMFailures)
	require.InDelta(t, 3.0, s.LLMAvgResponseSeconds["chatgpt"], 1e-9)
	require.Equal(t, int64(10), s.LLMPromptTokens["chatgpt"])
	require.Equal(t, map[string]int64{"chatgpt": 2, "gemini": 1}, s.QuotaUsed)
	require.InDelta(t, 10.0, s.AvgTaskWaitSeconds, 1e-9)
	require.Equal(t, map[string]int64{"explorer/insight_blessed": 1}, s.ModuleEvents)
	require.Equal(t, map[string]int64{"low_disk": 1}, s.HealthAlerts, "resolutions are not alerts")
	require.Equal(t, map[string]int64{"rate_limited": 1}, s.TasksPaused)
	require.Equal(t, 0, s.InFlight)

	// 24 hours after the first task, it has left the window.
	s = m.Snapshot(t0.Add(24*time.Hour + 5*time.Minute))
	require.Equal(t, map[string]int64{"explorer": 1}, s.TasksCompleted)
	require.InDelta(t, 4.0, s.LLMAvgResponseSeconds["chatgpt"], 1e-9)
	s = m.Snapshot(t0.Add(30 * time.Hour))
	require.Empty(t, s.TasksCompleted)
	require.Empty(t, s.LLMRequests)
}

func TestOldEventsAreDroppedAndBucketsPruned(t *testing.T) {
	m := New(time.Hour)
	feed(m, "p/x/1", "a", t0.Add(5*time.Hour), time.Second, true)
	feed(m, "p/x/2", "a", t0, time.Second, true) // older than the window behind the newest event
	s := m.Snapshot(t0.Add(5*time.Hour + time.Minute))
	require.Equal(t, map[string]int64{"p": 1}, s.TasksCompleted)
	require.LessOrEqual(t, len(m.buckets), 61)
}

func TestInFlightAndGauges(t *testing.T) {
	m := New(0)
	m.Observe("scheduler", ev(t0, &pb.LLMRequestStarted{TaskId: "p/x/1", Llm: "a"}))
	m.SetGauges(Gauges{QueueDepth: map[string]int{"p": 3}, WALSizeMB: 1.5})
	m.Dropped(2)
	s := m.Snapshot(t0)
	require.Equal(t, 1, s.InFlight)
	require.Equal(t, 3, s.QueueDepth["p"])
	require.Equal(t, int64(2), s.DroppedNotices)
	require.Equal(t, int64(3), Total(map[string]int64{"a": 1, "b": 2}))
}

func TestCollectorExportsTheSnapshot(t *testing.T) {
	m := New(0)
	feed(m, "explorer/exploration/a", "chatgpt", t0, 2*time.Second, true)
	feed(m, "documenter/review_section/c", "gemini", t0, time.Second, false)
	c := NewCollector(func() Snapshot { return m.Snapshot(t0.Add(time.Hour)) })
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	fams, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, f := range fams {
		for _, mt := range f.GetMetric() {
			key := f.GetName()
			for _, l := range mt.GetLabel() {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			got[key] = mt.GetGauge().GetValue()
		}
	}
	require.Equal(t, 1.0, got["fano_llm_rate_limits_24h,backend=gemini"])
	require.Equal(t, 1.0, got["fano_tasks_completed_24h,module=explorer"])
	require.Equal(t, 1.0, got["fano_llm_failures_24h,backend=gemini,kind=rate_limited"])
	require.InDelta(t, 2.0, got["fano_llm_avg_response_seconds_24h,backend=chatgpt"], 1e-9)
}
