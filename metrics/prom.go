package metrics

import (
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Collector exposes a snapshot source to Prometheus (the control panel's
// /metrics). Rolling 24-hour counts are gauges: they fall as old minutes
// leave the window. Figures the panel already exports from the live
// system (task counts by state, quotas, WAL, uptime, Go runtime) are left
// out so the two can share a registry. It is an unchecked collector
// (label values come and go with modules and backends), so Describe sends
// nothing.
type Collector struct {
	snap func() Snapshot
}

// NewCollector returns a collector that calls snap at every scrape.
func NewCollector(snap func() Snapshot) *Collector { return &Collector{snap: snap} }

// Describe implements prometheus.Collector (unchecked: nothing).
func (c *Collector) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.snap().Series() {
		desc := prometheus.NewDesc(s.Name, s.Help, s.labelNames(), nil)
		m, err := prometheus.NewConstMetric(desc, prometheus.GaugeValue, s.Value, s.labelValues()...)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(desc, err)
			continue
		}
		ch <- m
	}
}

// Series is one time series of a snapshot.
type Series struct {
	Name   string
	Help   string
	Labels [][2]string // name, value
	Value  float64
}

func (s Series) labelNames() []string {
	out := make([]string, len(s.Labels))
	for i, l := range s.Labels {
		out[i] = l[0]
	}
	return out
}

func (s Series) labelValues() []string {
	out := make([]string, len(s.Labels))
	for i, l := range s.Labels {
		out[i] = l[1]
	}
	return out
}

// Series flattens the snapshot into named series (Prometheus names, one
// label set each), in a stable order.
func (s Snapshot) Series() []Series {
	var out []Series
	counts := func(name, help, label string, m map[string]int64) {
		for _, k := range sortedKeys(m) {
			out = append(out, Series{Name: name, Help: help, Labels: [][2]string{{label, k}}, Value: float64(m[k])})
		}
	}
	pairs := func(name, help, l1, l2 string, m map[string]int64) {
		for _, k := range sortedKeys(m) {
			a, b, _ := strings.Cut(k, "/")
			out = append(out, Series{Name: name, Help: help, Labels: [][2]string{{l1, a}, {l2, b}}, Value: float64(m[k])})
		}
	}
	one := func(name, help string, v float64) {
		out = append(out, Series{Name: name, Help: help, Value: v})
	}
	counts("fano_tasks_submitted_24h", "Tasks submitted in the last 24 hours, by module.", "module", s.TasksSubmitted)
	counts("fano_tasks_completed_24h", "Tasks completed in the last 24 hours, by module.", "module", s.TasksCompleted)
	counts("fano_tasks_failed_24h", "Tasks failed in the last 24 hours, by module.", "module", s.TasksFailed)
	counts("fano_tasks_cancelled_24h", "Tasks cancelled in the last 24 hours, by module.", "module", s.TasksCancelled)
	counts("fano_tasks_paused_24h", "Task pauses in the last 24 hours, by reason.", "reason", s.TasksPaused)
	pairs("fano_module_events_24h", "Module events in the last 24 hours, by module and type.", "module", "type", s.ModuleEvents)
	counts("fano_llm_requests_24h", "LLM requests sent in the last 24 hours, by backend.", "backend", s.LLMRequests)
	counts("fano_llm_deep_mode_uses_24h", "Deep-mode requests in the last 24 hours, by backend.", "backend", s.LLMDeepModeUses)
	counts("fano_llm_rate_limits_24h", "Rate limits hit in the last 24 hours, by backend.", "backend", s.LLMRateLimitsHit)
	pairs("fano_llm_failures_24h", "Failed LLM requests in the last 24 hours, by backend and kind.", "backend", "kind", s.LLMFailures)
	counts("fano_quota_used_24h", "Quota uses recorded in the last 24 hours, by backend.", "backend", s.QuotaUsed)
	counts("fano_health_alerts_24h", "Health alerts raised in the last 24 hours, by kind.", "kind", s.HealthAlerts)
	for _, k := range sortedKeys(s.LLMAvgResponseSeconds) {
		out = append(out, Series{Name: "fano_llm_avg_response_seconds_24h", Help: "Mean LLM response time over the last 24 hours, by backend.",
			Labels: [][2]string{{"backend", k}}, Value: s.LLMAvgResponseSeconds[k]})
	}
	one("fano_task_wait_seconds_avg_24h", "Mean time from submit to first start over the last 24 hours.", s.AvgTaskWaitSeconds)
	one("fano_oldest_pending_task_age_seconds", "Age of the oldest waiting task.", s.OldestPendingSeconds)
	one("fano_disk_usage_percent", "Used share of the data directory's file system.", s.DiskUsagePercent)
	one("fano_checkpoints", "Checkpoints written by this process.", float64(s.CheckpointCount))
	one("fano_recoveries", "Recoveries from the WAL by this process (at start and by restarted actors).", float64(s.RecoveryCount))
	one("fano_metrics_dropped_notices", "Notices the metrics feed could not take (its buffer was full).", float64(s.DroppedNotices))
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
