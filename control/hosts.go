package control

import (
	"net/http"
	"sort"
	"time"
)

// HostView is one gateway host on another machine, as the orchestrator
// knows it: where it is, which fano it runs, the backends it holds, when
// it was last heard and how long a ping took, and the state of its link
// (connected, lost, refused or never_seen) since when, with why.
type HostView struct {
	Name      string    `json:"name"`
	Address   string    `json:"address,omitempty"`
	Version   string    `json:"version,omitempty"`
	Backends  []string  `json:"backends"`
	State     string    `json:"state"`
	Reason    string    `json:"reason,omitempty"`
	Since     time.Time `json:"since,omitzero"`
	LastHeard time.Time `json:"last_heard,omitzero"`
	RTTMillis float64   `json:"rtt_ms"`
	// Running is how many requests the host had in hand when last heard.
	Running int `json:"running"`
}

// HostSource lists the gateway hosts (the orchestrator's hub). Hosts must
// be safe for concurrent use.
type HostSource interface {
	Hosts() []HostView
}

// HostList is GET /api/hosts.
type HostList struct {
	Hosts []HostView `json:"hosts"`
}

// handleHosts serves GET /api/hosts: every configured gateway host, by
// name; none when fano has no hosts.
func (s *Server) handleHosts(w http.ResponseWriter, r *http.Request) {
	for k := range r.URL.Query() {
		writeError(w, http.StatusBadRequest, "unknown query parameter %q (GET /api/hosts takes none)", k)
		return
	}
	writeJSON(w, http.StatusOK, HostList{Hosts: s.hosts()})
}

// hosts is the host source's list, by name, its times in UTC; never nil.
func (s *Server) hosts() []HostView {
	out := []HostView{}
	if s.opts.Hosts == nil {
		return out
	}
	for _, h := range s.opts.Hosts.Hosts() {
		h.Backends = nonNil(append([]string(nil), h.Backends...))
		if !h.Since.IsZero() {
			h.Since = h.Since.UTC()
		}
		if !h.LastHeard.IsZero() {
			h.LastHeard = h.LastHeard.UTC()
		}
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// hostOfBackend maps each backend a host holds to that host's name.
func hostOfBackend(hosts []HostView) map[string]string {
	out := map[string]string{}
	for _, h := range hosts {
		for _, b := range h.Backends {
			out[b] = h.Name
		}
	}
	return out
}
