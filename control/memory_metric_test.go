package control

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A backend that reports its memory (a browser's Chromium) shows it in
// /metrics.
func TestMetricsBackendMemory(t *testing.T) {
	f := newFixture(t, fixtureOpts{modules: []string{"probe"}})
	rec := httptest.NewRecorder()
	f.srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:8765/metrics", nil))
	assert.Contains(t, rec.Body.String(), "\nfano_backend_memory_bytes{backend=\"simA\"} 1.23456789e+08\n")
}
