package control

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/actors"
	"fano/pb"
)

// A backend that reports its memory (a browser's Chromium) shows it in
// /metrics and in the status (`fano status`, the panel).
func TestMetricsBackendMemory(t *testing.T) {
	f := newFixture(t, fixtureOpts{modules: []string{"probe"}})
	rec := httptest.NewRecorder()
	f.srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:8765/metrics", nil))
	assert.Contains(t, rec.Body.String(), "\nfano_backend_memory_bytes{backend=\"simA\"} 1.23456789e+08\n")

	rec = httptest.NewRecorder()
	f.srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:8765/api/orchestrator/status", nil))
	var st Status
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &st), rec.Body.String())
	require.NotEmpty(t, st.Backends)
	assert.EqualValues(t, fixtureMemory, st.Backends[0].MemoryBytes)
}

// The panel's event feed says how a browser answer came: primed, read
// from the page, or stalled.
func TestEventShowsHowABrowserAnswerCame(t *testing.T) {
	ev := toEvent(actors.Notice{Event: &pb.Event{Body: &pb.Event_LlmResponseReceived{LlmResponseReceived: &pb.LLMResponseReceived{
		TaskId: "probe/x/1", Llm: "chatgpt", Content: "a", PrimedTurns: 3, FromPage: true, Incomplete: "stalled at 1 chars for 2s",
	}}}})
	assert.Equal(t, int32(3), ev.PrimedTurns)
	assert.True(t, ev.FromPage)
	assert.Equal(t, "stalled at 1 chars for 2s", ev.Incomplete)
}
