package remote

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Collector is the hub's hosts for /metrics: whether each is connected,
// its round trip, when it was last heard, and its address, version and
// state as labels of an info series.
func (h *Hub) Collector() prometheus.Collector { return hostsCollector{h} }

var (
	hostUpDesc = prometheus.NewDesc("fano_gateway_host_up",
		"1 while the gateway host is connected, 0 while it is lost, refused or never seen.", []string{"host"}, nil)
	hostRTTDesc = prometheus.NewDesc("fano_gateway_host_rtt_seconds",
		"Round trip of the last ping answered by the gateway host.", []string{"host"}, nil)
	hostHeardDesc = prometheus.NewDesc("fano_gateway_host_last_heard_seconds",
		"Unix time the gateway host was last heard from (0: never).", []string{"host"}, nil)
	hostInfoDesc = prometheus.NewDesc("fano_gateway_host_info",
		"1 for the gateway host's address, version and state.", []string{"host", "address", "version", "state"}, nil)
)

type hostsCollector struct{ h *Hub }

func (c hostsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- hostUpDesc
	ch <- hostRTTDesc
	ch <- hostHeardDesc
	ch <- hostInfoDesc
}

func (c hostsCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.h.Status() {
		up := 0.0
		if st.State == HostConnected {
			up = 1
		}
		heard := 0.0
		if !st.LastHeard.IsZero() {
			heard = float64(st.LastHeard.UnixNano()) / 1e9
		}
		ch <- prometheus.MustNewConstMetric(hostUpDesc, prometheus.GaugeValue, up, st.Name)
		ch <- prometheus.MustNewConstMetric(hostRTTDesc, prometheus.GaugeValue, st.RTTMillis/1000, st.Name)
		ch <- prometheus.MustNewConstMetric(hostHeardDesc, prometheus.GaugeValue, heard, st.Name)
		ch <- prometheus.MustNewConstMetric(hostInfoDesc, prometheus.GaugeValue, 1, st.Name, st.Address, st.Version, string(st.State))
	}
}
