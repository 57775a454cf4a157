package control

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hostBook is a host source a test changes as the hub's hosts would
// change: a host registers, is lost, comes back.
type hostBook struct {
	mu    sync.Mutex
	hosts []HostView
}

func (b *hostBook) Hosts() []HostView {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]HostView(nil), b.hosts...)
}

func (b *hostBook) set(hosts ...HostView) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hosts = hosts
}

// The gateway hosts are listed by GET /api/hosts and in the status, by
// name, their times in UTC, each state as the hub says it; a backend a
// host holds names it, one that runs here names none.
func TestHostsEndpointAndStatus(t *testing.T) {
	book := &hostBook{}
	f := newFixture(t, fixtureOpts{hosts: book})
	berlin := time.FixedZone("CET", 3600)
	since := time.Date(2026, 3, 1, 10, 0, 0, 0, berlin)
	heard := time.Date(2026, 3, 1, 10, 5, 0, 0, berlin)
	book.set(
		HostView{Name: "tower", State: "refused", Reason: "host tower runs fano 0.9.0, the orchestrator fano 1.0.0: run the same version on both",
			Version: "0.9.0", Backends: []string{"gpt"}, Since: since},
		HostView{Name: "desk", Address: "192.0.2.7:8091", Version: "1.0.0", Backends: []string{"simA"}, State: "connected",
			Since: since, LastHeard: heard, RTTMillis: 1.25, Running: 1},
	)

	var list HostList
	f.do("GET", "/api/hosts", "", "").json(t, &list)
	require.Len(t, list.Hosts, 2)
	desk, tower := list.Hosts[0], list.Hosts[1]
	assert.Equal(t, "desk", desk.Name, "hosts by name")
	assert.Equal(t, "192.0.2.7:8091", desk.Address)
	assert.Equal(t, "1.0.0", desk.Version)
	assert.Equal(t, []string{"simA"}, desk.Backends)
	assert.Equal(t, "connected", desk.State)
	assert.Equal(t, 1.25, desk.RTTMillis)
	assert.Equal(t, 1, desk.Running)
	assert.True(t, heard.Equal(desk.LastHeard))
	assert.Equal(t, time.UTC, desk.LastHeard.Location(), "times in UTC")
	assert.Equal(t, "refused", tower.State)
	assert.Contains(t, tower.Reason, "fano 0.9.0")
	assert.True(t, tower.LastHeard.IsZero(), "a refused host was never heard")

	var fields struct{ Hosts []map[string]any }
	f.do("GET", "/api/hosts", "", "").json(t, &fields)
	require.Len(t, fields.Hosts, 2)
	assert.Equal(t, "2026-03-01T09:05:00Z", fields.Hosts[0]["last_heard"], "ISO 8601, UTC")
	assert.NotContains(t, fields.Hosts[1], "last_heard", "a host never heard has no last_heard")
	assert.NotContains(t, fields.Hosts[1], "address", "a refused host has no address")

	var st Status
	f.do("GET", "/api/orchestrator/status", "", "").json(t, &st)
	assert.Equal(t, list.Hosts, st.Hosts)
	require.Len(t, st.Backends, 1)
	assert.Equal(t, "desk", st.Backends[0].Host, "the backend names the host that holds it")

	// The host is lost: the next read says so, since when and why.
	lostAt := heard.Add(20 * time.Second)
	book.set(HostView{Name: "desk", Address: "192.0.2.7:8091", Version: "1.0.0", Backends: []string{"simA"}, State: "lost",
		Reason: "not heard for 15s (link cut off?)", Since: lostAt, LastHeard: heard})
	f.do("GET", "/api/hosts", "", "").json(t, &list)
	require.Len(t, list.Hosts, 1)
	assert.Equal(t, "lost", list.Hosts[0].State)
	assert.True(t, lostAt.Equal(list.Hosts[0].Since))

	// No host holds the backend: it runs here.
	book.set()
	var here Status
	f.do("GET", "/api/orchestrator/status", "", "").json(t, &here)
	assert.Empty(t, here.Hosts)
	assert.Empty(t, here.Backends[0].Host)

	resp := f.do("GET", "/api/hosts?name=desk", "", "")
	assert.Equal(t, http.StatusBadRequest, resp.code)
	assert.Contains(t, resp.errorMessage(t), `unknown query parameter "name"`)
}

// Without a host source (fano without gateway hosts) the list is empty,
// not missing.
func TestHostsWithoutHub(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	raw := f.do("GET", "/api/hosts", "", "")
	require.Equal(t, http.StatusOK, raw.code)
	assert.JSONEq(t, `{"hosts":[]}`, string(raw.body))
	var st map[string]any
	f.do("GET", "/api/orchestrator/status", "", "").json(t, &st)
	assert.Equal(t, []any{}, st["hosts"])
}
