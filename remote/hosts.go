package remote

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"fano/gateway"
	"fano/pb"
)

// HostState is what the orchestrator knows of a gateway host's link.
type HostState string

const (
	HostNever     HostState = "never_seen" // configured, never registered
	HostConnected HostState = "connected"
	HostLost      HostState = "lost" // killed, restarted, or cut off: its backends wait
	HostRefused   HostState = "refused"
)

// HostStatus is one host as `fano status` shows it.
type HostStatus struct {
	Name      string    `json:"name"`
	Address   string    `json:"address,omitempty"`
	Version   string    `json:"version,omitempty"`
	Backends  []string  `json:"backends"`
	State     HostState `json:"state"`
	Reason    string    `json:"reason,omitempty"`
	Since     time.Time `json:"since,omitzero"`
	LastHeard time.Time `json:"last_heard,omitzero"`
	RTTMillis float64   `json:"rtt_ms"`
	Running   int       `json:"running"`
}

// hostTable is the orchestrator's book of its gateway hosts: who is
// registered under which process instance, when each was last heard, and
// the decisions that follow (accept a hello, lose a host, find it again).
// A plain type, no actor: the hub calls it under its lock.
type hostTable struct {
	version string
	hosts   map[string]*hostEntry
	routed  map[string][]string // host -> backends the config routes to it
}

type hostEntry struct {
	name, address, version, instance string
	backends                         []string
	state                            HostState
	reason                           string
	since, lastHeard                 time.Time
	rtt                              time.Duration
	running                          int
	conditions                       map[string]gateway.Condition
	// addressing are the backends that give a new conversation an
	// address of their own, as the host said at its hello.
	addressing []string
}

func newHostTable(version string, routed map[string][]string) *hostTable {
	t := &hostTable{version: version, hosts: map[string]*hostEntry{}, routed: routed}
	for name := range routed {
		t.hosts[name] = &hostEntry{name: name, state: HostNever, reason: "has not registered yet"}
	}
	return t
}

// helloOutcome is what a hello decides.
type helloOutcome struct {
	welcome *pb.HostWelcome
	// restart: a new process of a host that had one; the old one's calls
	// are lost with it. Otherwise its pending calls are sent again (a
	// delivery too many is answered from the host's book).
	restart bool
}

// hello decides on a host's registration.
func (t *hostTable) hello(m *pb.HostHello, now time.Time) helloOutcome {
	e, known := t.hosts[m.Host]
	if !known {
		names := make([]string, 0, len(t.hosts))
		for n := range t.hosts {
			names = append(names, n)
		}
		sort.Strings(names)
		return helloOutcome{welcome: &pb.HostWelcome{OrchestratorVersion: t.version,
			Reason: fmt.Sprintf("host %q is not in the orchestrator's hosts (%s)", m.Host, strings.Join(names, ", "))}}
	}
	if m.Version != t.version {
		reason := fmt.Sprintf("host %s runs fano %s, the orchestrator fano %s: run the same version on both", m.Host, m.Version, t.version)
		e.state, e.reason, e.since, e.version = HostRefused, reason, now, m.Version
		return helloOutcome{welcome: &pb.HostWelcome{OrchestratorVersion: t.version, Reason: reason}}
	}
	out := helloOutcome{welcome: &pb.HostWelcome{Accepted: true, OrchestratorVersion: t.version}}
	out.restart = e.instance != "" && e.instance != m.Instance
	if e.state != HostConnected || out.restart {
		e.since = now
	}
	e.address, e.version, e.instance, e.state, e.reason, e.lastHeard = m.Address, m.Version, m.Instance, HostConnected, "", now
	e.backends, e.addressing = e.backends[:0], e.addressing[:0]
	for _, b := range m.Backends {
		e.backends = append(e.backends, b.Name)
		if b.AddressesConversations {
			e.addressing = append(e.addressing, b.Name)
		}
	}
	sort.Strings(e.backends)
	e.conditions = nil
	return out
}

// heard notes a pong from instance of host; it says whether the host was
// lost and is found again (the same instance, its calls go again).
func (t *hostTable) heard(host, instance string, rtt time.Duration, p *pb.HostPong, now time.Time) (found bool) {
	e, ok := t.hosts[host]
	if !ok || e.instance != instance || e.state == HostRefused || e.state == HostNever {
		return false
	}
	e.lastHeard, e.rtt = now, rtt
	if p != nil {
		e.running = int(p.Running)
		e.conditions = map[string]gateway.Condition{}
		for _, c := range p.Conditions {
			e.conditions[c.Backend] = gateway.Condition{State: gateway.State(c.State), Reason: c.Reason, Until: fromUnixNanos(c.UntilUnixNs)}
		}
	}
	if e.state == HostLost {
		e.state, e.reason, e.since = HostConnected, "", now
		return true
	}
	return false
}

// lose marks host lost (its link ended, or it was not heard for long);
// false if it was not connected.
func (t *hostTable) lose(host, reason string, now time.Time) bool {
	e, ok := t.hosts[host]
	if !ok || e.state != HostConnected {
		return false
	}
	e.state, e.reason, e.since = HostLost, reason, now
	return true
}

// silent are the connected hosts not heard since before cutoff.
func (t *hostTable) silent(cutoff time.Time) []string {
	var out []string
	for name, e := range t.hosts {
		if e.state == HostConnected && e.lastHeard.Before(cutoff) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// condition is backend's condition on host.
func (t *hostTable) condition(host, backend string) gateway.Condition {
	e, ok := t.hosts[host]
	if !ok {
		return gateway.Condition{State: gateway.StateHostLost, Reason: "host " + host + " is not configured"}
	}
	switch e.state {
	case HostConnected:
	case HostNever, HostRefused, HostLost:
		return gateway.Condition{State: gateway.StateHostLost, Reason: "host " + host + " " + string(e.state) + ": " + e.reason}
	}
	if !slices.Contains(e.backends, backend) {
		return gateway.Condition{State: gateway.StateDown, Reason: fmt.Sprintf("host %s does not hold backend %s (it holds: %s)",
			host, backend, strings.Join(e.backends, ", "))}
	}
	if c, ok := e.conditions[backend]; ok && c.State != "" {
		return c
	}
	return gateway.Condition{State: gateway.StateReady}
}

// addresses says whether backend on host gives a new conversation an
// address of its own; until the host has said (it has not registered),
// it may.
func (t *hostTable) addresses(host, backend string) bool {
	e, ok := t.hosts[host]
	if !ok || e.instance == "" {
		return true
	}
	return slices.Contains(e.addressing, backend)
}

func (t *hostTable) status() []HostStatus {
	out := make([]HostStatus, 0, len(t.hosts))
	for _, e := range t.hosts {
		bs := e.backends
		if len(bs) == 0 {
			bs = t.routed[e.name]
		}
		out = append(out, HostStatus{Name: e.name, Address: e.address, Version: e.version, Backends: slices.Clone(bs),
			State: e.state, Reason: e.reason, Since: e.since, LastHeard: e.lastHeard,
			RTTMillis: float64(e.rtt.Microseconds()) / 1000, Running: e.running})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
