package control

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSimulationReportIsServedReadOnly(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	dir := f.srv.opts.DataDir
	require.Equal(t, http.StatusNotFound, f.do(http.MethodGet, "/simulation", "", "").code, "no report yet")

	sim := filepath.Join(dir, "simulation")
	require.NoError(t, os.MkdirAll(sim, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(sim, "report.json"), []byte(`{"config":"c.yaml","schedule":"f.yaml","seed":3,
		"goals":[{"name":"g1","ok":false,"detail":"day 4: <b>"}],"days":[{"day":1,"insights_blessed":9}]}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(sim, "day-01.svg"), []byte("<svg/>"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("x"), 0o644))

	page := f.do(http.MethodGet, "/simulation", "", "")
	require.Equal(t, http.StatusOK, page.code)
	require.Contains(t, string(page.body), "<td>9</td>")
	require.Contains(t, string(page.body), "day 4: &lt;b&gt;", "report text is escaped")
	require.Contains(t, string(page.body), `src="/simulation/day-01.svg"`)

	svg := f.do(http.MethodGet, "/simulation/day-01.svg", "", "")
	require.Equal(t, http.StatusOK, svg.code)
	require.Equal(t, "image/svg+xml", svg.hdr.Get("Content-Type"))
	// Only the report's files: nothing else of the data directory.
	require.NotEqual(t, http.StatusOK, f.do(http.MethodGet, "/simulation/..%2Fsecret.txt", "", "").code)
	require.NotEqual(t, http.StatusOK, f.do(http.MethodGet, "/simulation/fano.db", "", "").code)
	// Read-only.
	require.NotEqual(t, http.StatusOK, f.do(http.MethodPost, "/simulation/report.json", testToken, "").code)
}
