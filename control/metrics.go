package control

import (
	"cmp"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"fano/actors"
	"fano/gateway"
	"fano/pb"
)

// failureKinds are the gateway.Kind values an LLMRequestFailed carries;
// their series exist from the start so a dashboard sees zeros.
var failureKinds = []string{"rate_limited", "transient", "permanent", "unavailable", "cancelled", "validation"}

// metrics is the panel's Prometheus registry. Counters and histograms are
// fed from the system's notices (lock-free adds, safe in actor
// goroutines); gauges are read from the system when /metrics is scraped.
type metrics struct {
	s   *Server
	reg *prometheus.Registry

	llmRequests   *prometheus.CounterVec
	llmResponses  *prometheus.CounterVec
	llmFailures   *prometheus.CounterVec
	llmLatency    *prometheus.HistogramVec
	rateLimits    *prometheus.CounterVec
	taskEvents    *prometheus.CounterVec
	persistLag    prometheus.Histogram
	eventsDropped prometheus.Counter
	wsClients     prometheus.Gauge
	wsDropped     prometheus.Counter

	// Described once, filled on every scrape by Collect.
	tasks, hourlyUsed, hourlyLimit, hourlyUsable, limitEstimate, deepUsed, deepLimit,
	available, paused, rateLimited, inUse, circuit, walBytes, walEntries, walUncommitted,
	walLastSeq, checkpointAge, uptime *prometheus.Desc
	// What fano knows of each backend: its state with the time
	// it ends, the learned provider rate and the limiter's queue.
	backendState, backendUntil, learnedRate, limiterWaiting *prometheus.Desc
	backendMemory                                           *prometheus.Desc
}

func newMetrics(s *Server) *metrics {
	m := &metrics{s: s, reg: prometheus.NewRegistry()}
	m.llmRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fano_llm_requests_total",
		Help: "LLM requests sent, by backend (resends included)."}, []string{"backend"})
	m.llmResponses = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fano_llm_responses_total",
		Help: "LLM answers received, by backend."}, []string{"backend"})
	m.llmFailures = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fano_llm_request_failures_total",
		Help: "LLM requests that failed, by backend and kind (rate_limited, transient, permanent, unavailable, cancelled, validation)."}, []string{"backend", "kind"})
	m.llmLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "fano_llm_request_duration_seconds",
		Help:    "Time from sending an LLM request to its answer, by backend.",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}}, []string{"backend"})
	m.rateLimits = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fano_llm_rate_limits_total",
		Help: "Rate limits recorded by the allocator, by backend."}, []string{"backend"})
	m.taskEvents = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fano_task_events_total",
		Help: "Task lifecycle events since start, by module and event (task_submitted, task_completed, ...)."}, []string{"module", "event"})
	m.persistLag = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "fano_event_persist_latency_seconds",
		Help:    "Time from an event's decision to its application: the WAL's group-committed, fsynced append plus the actor hops.",
		Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5}})
	m.eventsDropped = prometheus.NewCounter(prometheus.CounterOpts{Name: "fano_panel_events_dropped_total",
		Help: "Events the panel could not queue for its websocket (its queue was full)."})
	m.wsClients = prometheus.NewGauge(prometheus.GaugeOpts{Name: "fano_panel_websocket_clients",
		Help: "Websocket clients connected to /api/events."})
	m.wsDropped = prometheus.NewCounter(prometheus.CounterOpts{Name: "fano_panel_websocket_clients_dropped_total",
		Help: "Websocket clients dropped for being too slow."})

	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	m.backendMemory = d("fano_backend_memory_bytes", "Memory of a backend's local process (a browser backend's Chromium with its child processes, PSS).", "backend")
	m.tasks = d("fano_tasks", "Tasks in memory by module and state.", "module", "state")
	m.hourlyUsed = d("fano_quota_hourly_used", "Requests used in the current hour window.", "backend")
	m.hourlyLimit = d("fano_quota_hourly_limit", "Configured hourly request limit.", "backend")
	m.hourlyUsable = d("fano_quota_hourly_usable", "Hourly requests fano will use: the limit estimate less the buffer.", "backend")
	m.limitEstimate = d("fano_quota_hourly_limit_estimate", "Hourly limit as learned from rate limits.", "backend")
	m.deepUsed = d("fano_quota_deep_used", "Deep-mode requests used in the current day window.", "backend")
	m.deepLimit = d("fano_quota_deep_limit", "Daily deep-mode limit.", "backend")
	m.available = d("fano_backend_available", "1 if the backend can take a request now.", "backend")
	m.paused = d("fano_backend_paused", "1 if an operator or the health monitor paused the backend.", "backend")
	m.rateLimited = d("fano_backend_rate_limited", "1 while the backend is parked after a rate limit.", "backend")
	m.inUse = d("fano_backend_requests_in_flight", "Requests the backend is answering now.", "backend")
	m.circuit = d("fano_backend_circuit_state", "1 for the backend's current circuit-breaker state.", "backend", "state")
	m.walBytes = d("fano_wal_bytes", "Size of the WAL file (refreshed at most every WALStatsEvery).")
	m.walEntries = d("fano_wal_entries", "Entries stored in the WAL.")
	m.walUncommitted = d("fano_wal_uncommitted_intents", "Intents without a commit.")
	m.walLastSeq = d("fano_wal_last_seq", "Last WAL sequence number.")
	m.checkpointAge = d("fano_checkpoint_age_seconds", "Age of the oldest checkpoint (the one that holds back compaction).")
	m.uptime = d("fano_uptime_seconds", "Seconds since fano started.")
	m.backendState = d("fano_backend_state", "1 for the backend's state: ready, rate_limited, capped, credentials, login, circuit_open, paced, exhausted, paused, down.", "backend", "state")
	m.backendUntil = d("fano_backend_state_until_seconds", "Unix time the backend's current state ends (0: unknown or ready).", "backend")
	m.learnedRate = d("fano_backend_learned_rate_per_minute", "Requests a minute the provider allows, as learned from its headers (0: not learned).", "backend")
	m.limiterWaiting = d("fano_backend_limiter_waiting", "Requests waiting in the backend's rate limiter.", "backend")

	m.reg.MustRegister(m.llmRequests, m.llmResponses, m.llmFailures, m.llmLatency, m.rateLimits, m.taskEvents,
		m.persistLag, m.eventsDropped, m.wsClients, m.wsDropped, m,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, b := range s.sys.Quotas() {
		m.llmRequests.WithLabelValues(b.Name)
		m.llmResponses.WithLabelValues(b.Name)
		m.rateLimits.WithLabelValues(b.Name)
		m.llmLatency.WithLabelValues(b.Name)
		for _, k := range failureKinds {
			m.llmFailures.WithLabelValues(b.Name, k)
		}
	}
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// observe counts one notice. It runs in actor goroutines: only atomic
// adds and a label lookup, never a wait.
func (m *metrics) observe(n actors.Notice) {
	e := n.Event
	if e == nil {
		return
	}
	if at := e.GetAt(); at != 0 {
		if lag := m.s.sys.Clock().Now().Sub(time.Unix(0, at)); lag >= 0 && lag < time.Minute {
			m.persistLag.Observe(lag.Seconds())
		}
	}
	switch b := e.Body.(type) {
	case *pb.Event_LlmRequestStarted:
		m.llmRequests.WithLabelValues(b.LlmRequestStarted.GetLlm()).Inc()
	case *pb.Event_LlmResponseReceived:
		r := b.LlmResponseReceived
		m.llmResponses.WithLabelValues(r.GetLlm()).Inc()
		if r.GetDurationNs() > 0 {
			m.llmLatency.WithLabelValues(r.GetLlm()).Observe(float64(r.GetDurationNs()) / 1e9)
		}
	case *pb.Event_LlmRequestFailed:
		m.llmFailures.WithLabelValues(b.LlmRequestFailed.GetLlm(), b.LlmRequestFailed.GetKind()).Inc()
	case *pb.Event_RateLimitRecorded:
		m.rateLimits.WithLabelValues(b.RateLimitRecorded.GetBackend()).Inc()
	case *pb.Event_TaskSubmitted:
		m.taskEvents.WithLabelValues(b.TaskSubmitted.GetTask().GetModule(), "task_submitted").Inc()
	case *pb.Event_TaskCompleted:
		m.taskEvents.WithLabelValues(moduleOf(b.TaskCompleted.GetTaskId()), "task_completed").Inc()
	case *pb.Event_TaskFailed:
		m.taskEvents.WithLabelValues(moduleOf(b.TaskFailed.GetTaskId()), "task_failed").Inc()
	case *pb.Event_TaskCancelled:
		m.taskEvents.WithLabelValues(moduleOf(b.TaskCancelled.GetTaskId()), "task_cancelled").Inc()
	case *pb.Event_TaskPaused:
		m.taskEvents.WithLabelValues(moduleOf(b.TaskPaused.GetTaskId()), "task_paused").Inc()
	}
}

// Describe and Collect make metrics a prometheus.Collector for the
// figures read at scrape time.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.tasks, m.hourlyUsed, m.hourlyLimit, m.hourlyUsable, m.limitEstimate,
		m.deepUsed, m.deepLimit, m.available, m.paused, m.rateLimited, m.inUse, m.circuit, m.walBytes, m.walEntries,
		m.walUncommitted, m.walLastSeq, m.checkpointAge, m.uptime, m.backendState, m.backendUntil, m.learnedRate, m.limiterWaiting,
		m.backendMemory} {
		ch <- d
	}
}

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	s := m.s
	g := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	b01 := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	for module, byState := range s.sys.Counts() {
		for st := pb.TaskState_TASK_STATE_PENDING; st <= pb.TaskState_TASK_STATE_CANCELLED; st++ {
			g(m.tasks, float64(byState[st]), module, StateName(st))
		}
	}
	now := s.sys.Clock().Now()
	circuits := s.circuits()
	for _, b := range s.sys.Quotas() {
		g(m.hourlyUsed, float64(b.HourlyUsed), b.Name)
		g(m.hourlyLimit, float64(b.HourlyLimit), b.Name)
		g(m.hourlyUsable, float64(b.Usable), b.Name)
		g(m.limitEstimate, float64(b.LimitEstimate), b.Name)
		g(m.deepUsed, float64(b.DeepUsed), b.Name)
		g(m.deepLimit, float64(b.DeepLimit), b.Name)
		g(m.available, b01(b.Available), b.Name)
		g(m.paused, b01(b.Paused), b.Name)
		g(m.rateLimited, b01(!b.RateLimitedUntil.IsZero() && now.Before(b.RateLimitedUntil)), b.Name)
		g(m.inUse, float64(b.InUse), b.Name)
		g(m.backendState, 1, b.Name, cmp.Or(b.State, "ready"))
		until := 0.0
		if !b.Until.IsZero() {
			until = float64(b.Until.Unix())
		}
		g(m.backendUntil, until, b.Name)
		perMinute := 0.0
		if b.LearnedLimit > 0 && b.LearnedWindow > 0 {
			perMinute = float64(b.LearnedLimit) * float64(time.Minute) / float64(b.LearnedWindow)
		}
		g(m.learnedRate, perMinute, b.Name)
		g(m.limiterWaiting, float64(b.LimiterWaiting), b.Name)
		if c, ok := circuits[b.Name]; ok {
			g(m.circuit, 1, b.Name, c)
		}
	}
	if w := s.walStats(); w != nil {
		g(m.walBytes, float64(w.Bytes))
		g(m.walEntries, float64(w.Entries))
		g(m.walUncommitted, float64(w.Uncommitted))
		g(m.walLastSeq, float64(w.LastSeq))
		if w.OldestCheckpoint != nil {
			g(m.checkpointAge, time.Since(w.OldestCheckpoint.At).Seconds())
		}
	}
	g(m.uptime, time.Since(s.started).Seconds())
	for _, be := range s.sys.Backends() {
		if mr, ok := gateway.As[gateway.MemoryReporter](be); ok {
			g(m.backendMemory, float64(mr.MemoryBytes()), be.Name())
		}
	}
}
