package app

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"fano/control"
)

// While the health monitor holds work back for low disk, /healthz answers
// 503 naming the reason and the data directory (a monitor polling it sees
// a fano that does no work); once space is back, 200 "ok".
func TestHealthzUnhealthyWhileDiskIsLow(t *testing.T) {
	cfg := mainConfig(t, 5)
	cfg.Orchestrator.Health.MinDiskSpaceGB = 1
	cfg.Orchestrator.Health.CheckIntervalSeconds = 1
	var free atomic.Uint64
	free.Store(1 << 20)
	reads := make(chan struct{}, 64)
	dataDir := filepath.Join(t.TempDir(), "data")
	m := NewMain(Options{Config: cfg, DataDir: dataDir, Console: "off", NoBackups: true,
		Disk: func(string) (uint64, error) {
			v := free.Load()
			reads <- struct{}{}
			return v, nil
		}})
	require.NoError(t, m.Open(context.Background()))
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	addr, err := os.ReadFile(filepath.Join(dataDir, control.AddrFile))
	require.NoError(t, err)
	base, err := control.BaseURL(strings.TrimSpace(string(addr)))
	require.NoError(t, err)

	// Open's own reading, the first check's, then the next check's:
	// the first check is done once the next one reads the disk.
	checked := func() {
		t.Helper()
		for range 2 {
			<-reads
		}
	}
	<-reads
	checked()
	code, h := getHealthz(t, base)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "unhealthy", h.Status)
	require.Contains(t, h.Reason, "below the minimum")
	require.Contains(t, h.Reason, "min_disk_space_gb")
	abs, _ := filepath.Abs(dataDir)
	require.Equal(t, abs, h.DataDir)

	// The client reads the 503 as a running fano on its data directory.
	ch, err := (&control.Client{BaseURL: base}).Healthz(context.Background())
	require.NoError(t, err)
	require.Equal(t, abs, ch.DataDir)
	require.Contains(t, ch.Reason, "min_disk_space_gb")

	free.Store(1 << 40)
	checked()
	code, h = getHealthz(t, base)
	require.Equal(t, http.StatusOK, code, h.Reason)
	require.Equal(t, "ok", h.Status)
	require.Empty(t, h.Reason)
}

func getHealthz(t *testing.T, base string) (int, control.Healthz) {
	t.Helper()
	resp, err := http.Get(base + "/healthz")
	require.NoError(t, err)
	defer resp.Body.Close()
	var h control.Healthz
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&h))
	return resp.StatusCode, h
}
