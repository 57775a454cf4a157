package control

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/actors"
	"fano/pb"
)

type staticHealth struct{}

func (staticHealth) Health() any { return map[string]any{"disk_free_gb": 42, "alerts": []string{}} }

const (
	q0 = "probe/exploration/q0000"
	q1 = "probe/exploration/q0001"
	q2 = "probe/exploration/q0002"
)

func TestAPI(t *testing.T) {
	f := newFixture(t, fixtureOpts{health: staticHealth{}, modules: []string{"probe", "notebook"}})

	t.Run("status has the §10.3 shape and more", func(t *testing.T) {
		r := f.do("GET", "/api/orchestrator/status", "", "")
		require.Equal(t, http.StatusOK, r.code)
		var raw map[string]any
		r.json(t, &raw)
		for _, k := range []string{"state", "uptime", "tasks", "llms", "backends", "modules", "running", "wal", "health"} {
			assert.Contains(t, raw, k)
		}
		var st Status
		r.json(t, &st)
		assert.Equal(t, "running", st.State)
		assert.Equal(t, 2, st.Tasks.Pending)
		assert.Equal(t, 1, st.Tasks.Running)
		assert.Equal(t, map[string]int{"PENDING": 2, "RUNNING": 1}, st.Tasks.ByModule["probe"])
		require.Len(t, st.Running, 1)
		assert.Equal(t, q0, st.Running[0].ID)
		assert.Equal(t, "simA", st.Running[0].LLM)
		llm := st.LLMs["simA"]
		assert.Equal(t, LLMStatus{Available: false, HourlyUsed: 1, HourlyLimit: 1000, DeepModeUsed: 0, DeepModeLimit: 5}, llm,
			"its one slot is taken")
		require.Len(t, st.Backends, 1)
		b := st.Backends[0]
		assert.Equal(t, "busy", b.State)
		assert.Equal(t, "closed", b.Circuit)
		assert.Equal(t, 900, b.Usable, "limit less the 10%% buffer")
		assert.Equal(t, []string{q0}, b.RunningTasks)
		mods := map[string][]string{}
		for _, m := range st.Modules {
			mods[m.Name] = m.Capabilities
		}
		assert.Equal(t, map[string][]string{"probe": {}, "notebook": {"seeds", "comments", "document", "sections"}}, mods)
		require.NotNil(t, st.WAL)
		assert.Positive(t, st.WAL.Bytes)
		assert.Equal(t, map[string]any{"disk_free_gb": float64(42), "alerts": []any{}}, st.Health)
	})

	t.Run("mutations need the token", func(t *testing.T) {
		for _, m := range []struct{ path, body string }{
			{"/api/orchestrator/task/" + url.PathEscape(q1) + "/cancel", ""},
			{"/api/seeds", `{"text":"x"}`},
			{"/api/comments", `{"section_id":"intro","text":"x"}`},
			{"/api/backends/simA/pause", ""},
			{"/api/backends/simA/resume", ""},
		} {
			for _, tok := range []string{"", "wrong-token-wrong-token"} {
				r := f.do("POST", m.path, tok, m.body)
				assert.Equal(t, http.StatusUnauthorized, r.code, "POST %s with token %q", m.path, tok)
				assert.Contains(t, r.errorMessage(t), "panel token")
				assert.Equal(t, `Bearer realm="fano"`, r.hdr.Get("WWW-Authenticate"))
			}
		}
		// Nothing changed.
		assert.Equal(t, pb.TaskState_TASK_STATE_PENDING, f.state(q1))
		assert.False(t, f.sys.Quotas()[0].Paused)
	})

	t.Run("cancel: 404 unknown, 200 waiting, 400 finished", func(t *testing.T) {
		r := f.do("POST", "/api/orchestrator/task/probe%2Fexploration%2Fnope/cancel", testToken, "")
		assert.Equal(t, http.StatusNotFound, r.code)
		assert.Contains(t, r.errorMessage(t), "probe/exploration/nope")

		r = f.do("POST", "/api/orchestrator/task/"+q1+"/cancel", testToken, `{"reason":"not needed"}`)
		require.Equal(t, http.StatusOK, r.code, "%s", r.body)
		var cr CancelResult
		r.json(t, &cr)
		assert.Equal(t, CancelResult{Status: "cancelled", TaskID: q1}, cr)
		tk, _ := f.sys.Task(q1)
		assert.Equal(t, pb.TaskState_TASK_STATE_CANCELLED, tk.GetState())
		assert.Equal(t, "cancelled: not needed", tk.GetError())

		r = f.do("POST", "/api/orchestrator/task/"+url.PathEscape(q1)+"/cancel", testToken, "")
		assert.Equal(t, http.StatusBadRequest, r.code)
		assert.Contains(t, r.errorMessage(t), "already finished")

		r = f.do("POST", "/api/orchestrator/task/"+q2+"/cancel", testToken, `{"reason": 3}`)
		assert.Equal(t, http.StatusBadRequest, r.code)
		assert.Contains(t, r.errorMessage(t), `field "reason"`)
		assert.Equal(t, pb.TaskState_TASK_STATE_PENDING, f.state(q2))
	})

	t.Run("a finished task comes with its conversation", func(t *testing.T) {
		f.drive("q0 completed", f.is(q0, pb.TaskState_TASK_STATE_COMPLETED))
		r := f.do("GET", "/api/orchestrator/task/"+q0, "", "")
		require.Equal(t, http.StatusOK, r.code, "%s", r.body)
		var tv TaskView
		r.json(t, &tv)
		assert.Equal(t, "COMPLETED", tv.State)
		assert.Equal(t, "simA", tv.LLMAssigned)
		require.NotNil(t, tv.Conversation)
		assert.EqualValues(t, 2, tv.Conversation.TurnCount)
		require.Len(t, tv.Conversation.Messages, 4, "two questions, two answers")
		assert.Equal(t, "user", tv.Conversation.Messages[0].Role)
		assert.Equal(t, "q zero?", tv.Conversation.Messages[0].Content)
		assert.Equal(t, "assistant", tv.Conversation.Messages[1].Role)
		assert.NotEmpty(t, tv.Conversation.Messages[1].Content)

		// The same id %2F-escaped.
		r = f.do("GET", "/api/orchestrator/task/"+url.PathEscape(q0), "", "")
		assert.Equal(t, http.StatusOK, r.code)
		r = f.do("GET", "/api/orchestrator/task/probe/exploration/none", "", "")
		assert.Equal(t, http.StatusNotFound, r.code)
		assert.Contains(t, r.errorMessage(t), "probe/exploration/none")
	})

	t.Run("cancel of a running task: its executor stops it", func(t *testing.T) {
		f.waitFor("q2's request in flight", func() bool {
			t, _ := f.sys.Task(q2)
			return t.GetState() == pb.TaskState_TASK_STATE_RUNNING && t.GetConversation().GetAwaitingResponse()
		})
		r := f.do("POST", "/api/orchestrator/task/"+q2+"/cancel", testToken, "")
		require.Equal(t, http.StatusOK, r.code, "%s", r.body)
		var cr CancelResult
		r.json(t, &cr)
		assert.Equal(t, CancelResult{Status: "cancelling", TaskID: q2}, cr)
		f.waitFor("q2 cancelled", f.is(q2, pb.TaskState_TASK_STATE_CANCELLED))
	})

	t.Run("tasks filter by module, state and limit, newest first", func(t *testing.T) {
		list := func(q string) []TaskView {
			r := f.do("GET", "/api/orchestrator/tasks"+q, "", "")
			require.Equal(t, http.StatusOK, r.code, "%s", r.body)
			var out []TaskView
			r.json(t, &out)
			return out
		}
		ids := func(ts []TaskView) []string {
			var out []string
			for _, t := range ts {
				out = append(out, t.ID)
			}
			return out
		}
		assert.Len(t, list(""), 3)
		assert.ElementsMatch(t, []string{q1, q2}, ids(list("?state=cancelled")))
		assert.ElementsMatch(t, []string{q1, q2}, ids(list("?module=probe&state=CANCELLED")))
		assert.Equal(t, []string{q0}, ids(list("?state=TASK_STATE_COMPLETED")))
		assert.Empty(t, list("?module=notebook"))
		assert.Len(t, list("?limit=1"), 1)
		all := list("")
		for i := 1; i < len(all); i++ {
			assert.False(t, all[i].CreatedAt.After(*all[i-1].CreatedAt), "newest first")
		}
		assert.Nil(t, all[0].Conversation.Messages, "lists carry no conversation text")

		for q, field := range map[string]string{"?state=sleeping": `"state"`, "?limit=0": `"limit"`, "?limit=x": `"limit"`, "?sort=asc": `"sort"`} {
			r := f.do("GET", "/api/orchestrator/tasks"+q, "", "")
			assert.Equal(t, http.StatusBadRequest, r.code, q)
			assert.Contains(t, r.errorMessage(t), field, q)
		}
	})

	t.Run("bad JSON or an unknown field is a 400 naming it; state unchanged", func(t *testing.T) {
		for body, want := range map[string]string{
			`{"text":"a","bogus":1}`:         `unknown field "bogus"`,
			`{"text":5}`:                     `field "text"`,
			`{"text":"a","priority":"high"}`: `field "priority"`,
			`{"text":`:                       "bad JSON",
			`[1,2]`:                          "expected an object",
			`{"text":"a"} {"text":"b"}`:      "more than one value",
			``:                               "empty request body",
			`{"priority":3}`:                 `field "text" is required`,
		} {
			r := f.do("POST", "/api/seeds", testToken, body)
			assert.Equal(t, http.StatusBadRequest, r.code, body)
			assert.Contains(t, r.errorMessage(t), want, body)
		}
		r := f.do("POST", "/api/comments", testToken, `{"section_id":"intro","txt":"typo"}`)
		assert.Equal(t, http.StatusBadRequest, r.code)
		assert.Contains(t, r.errorMessage(t), `unknown field "txt"`)
		r = f.do("POST", "/api/backends/simA/pause", testToken, `{"why":"x"}`)
		assert.Equal(t, http.StatusBadRequest, r.code)
		assert.Contains(t, r.errorMessage(t), `unknown field "why"`)
		assert.NotContains(t, f.do("GET", "/api/document", "", "").body, []byte("seed:"), "no seed was added")
	})

	t.Run("seeds and comments go to the module that takes them", func(t *testing.T) {
		r := f.do("POST", "/api/seeds", testToken, `{"text":"Is there a plane of order 10?","priority":70}`)
		require.Equal(t, http.StatusOK, r.code, "%s", r.body)
		var cr CommandResult
		r.json(t, &cr)
		assert.Equal(t, CommandResult{Status: "added", Module: "notebook", Events: []string{"seed_added"}}, cr)

		r = f.do("POST", "/api/seeds", testToken, `{"text":"x","priority":500}`)
		assert.Equal(t, http.StatusBadRequest, r.code, "the module's own refusal")
		assert.Equal(t, "The notebook module refused: priority 500: must be from 0 to 100.", r.errorMessage(t),
			"one sentence that names the module once, though its reason begins with its name")

		r = f.do("POST", "/api/seeds", testToken, `{"text":"x","module":"probe"}`)
		assert.Equal(t, http.StatusConflict, r.code)
		assert.Contains(t, r.errorMessage(t), `module "probe" does not accept seeds`)
		r = f.do("POST", "/api/seeds", testToken, `{"text":"x","module":"explorer"}`)
		assert.Equal(t, http.StatusConflict, r.code)
		assert.Contains(t, r.errorMessage(t), `module "explorer" is not configured`)

		r = f.do("POST", "/api/comments", testToken, `{"section_id":"planes","text":"Say why order 6 fails."}`)
		require.Equal(t, http.StatusOK, r.code, "%s", r.body)
		r = f.do("POST", "/api/comments", testToken, `{"section_id":"nowhere","text":"x"}`)
		assert.Equal(t, http.StatusBadRequest, r.code)
		assert.Contains(t, r.errorMessage(t), `unknown section "nowhere"`)

		r = f.do("GET", "/api/document", "", "")
		require.Equal(t, http.StatusOK, r.code)
		assert.Equal(t, "text/markdown; charset=utf-8", r.hdr.Get("Content-Type"))
		assert.Contains(t, string(r.body), "- comment: Say why order 6 fails.")
		assert.Contains(t, string(r.body), "seed: Is there a plane of order 10?")
		r = f.do("GET", "/api/document?format=json", "", "")
		var doc Document
		r.json(t, &doc)
		assert.Equal(t, "notebook", doc.Module)
		assert.Equal(t, []string{"intro", "planes"}, doc.Sections)
	})

	t.Run("pause and resume a backend", func(t *testing.T) {
		r := f.do("POST", "/api/backends/simA/pause", testToken, `{"reason":"maintenance"}`)
		require.Equal(t, http.StatusOK, r.code, "%s", r.body)
		var br BackendResult
		r.json(t, &br)
		assert.Equal(t, BackendResult{Backend: "simA", Paused: true}, br)
		var st Status
		f.do("GET", "/api/orchestrator/status", "", "").json(t, &st)
		assert.Equal(t, "paused", st.Backends[0].State)
		assert.Equal(t, "maintenance", st.Backends[0].PauseReason)
		require.Equal(t, http.StatusOK, f.do("POST", "/api/backends/simA/resume", testToken, "").code)
		assert.False(t, f.sys.Quotas()[0].Paused)

		r = f.do("POST", "/api/backends/nope/pause", testToken, "")
		assert.Equal(t, http.StatusNotFound, r.code)
		assert.Contains(t, r.errorMessage(t), `"nope"`)

		f.sys.SetAccepting(false) // as the health monitor does on low disk
		f.do("GET", "/api/orchestrator/status", "", "").json(t, &st)
		assert.Equal(t, "not_accepting", st.State)
		f.sys.SetAccepting(true)
	})

	t.Run("metrics", func(t *testing.T) {
		require.NoError(t, f.sys.Checkpoint())
		r := f.do("GET", "/metrics", "", "")
		require.Equal(t, http.StatusOK, r.code)
		lines := map[string]bool{}
		var fano []string
		for _, l := range strings.Split(string(r.body), "\n") {
			lines[l] = true
			if strings.HasPrefix(l, "fano_") {
				fano = append(fano, l)
			}
		}
		for _, want := range []string{
			`fano_tasks{module="probe",state="COMPLETED"} 1`,
			`fano_tasks{module="probe",state="CANCELLED"} 2`,
			`fano_llm_requests_total{backend="simA"} 2`, // counted from the panel's start: q0's second, q2's

			`fano_llm_responses_total{backend="simA"} 2`,
			`fano_llm_request_failures_total{backend="simA",kind="rate_limited"} 0`,
			`fano_llm_request_failures_total{backend="simA",kind="cancelled"} 1`,
			`fano_llm_request_duration_seconds_count{backend="simA"} 2`,
			`fano_llm_request_duration_seconds_sum{backend="simA"} 2`,
			`fano_llm_rate_limits_total{backend="simA"} 0`,
			`fano_quota_hourly_used{backend="simA"} 3`,
			`fano_quota_hourly_limit{backend="simA"} 1000`,
			`fano_quota_hourly_usable{backend="simA"} 900`,
			`fano_quota_deep_used{backend="simA"} 0`,
			`fano_quota_deep_limit{backend="simA"} 5`,
			`fano_backend_circuit_state{backend="simA",state="closed"} 1`,
			`fano_backend_paused{backend="simA"} 0`,
			`fano_task_events_total{event="task_completed",module="probe"} 1`,
			`fano_task_events_total{event="task_cancelled",module="probe"} 2`,
			`fano_panel_websocket_clients 0`,
		} {
			assert.True(t, lines[want], "want %s in\n%s", want, strings.Join(fano, "\n"))
		}
		for _, name := range []string{"fano_wal_bytes ", "fano_wal_entries ", "fano_wal_uncommitted_intents ",
			"fano_event_persist_latency_seconds_count ", "fano_checkpoint_age_seconds ", "fano_uptime_seconds ", "go_goroutines "} {
			assert.Contains(t, string(r.body), "\n"+name, name)
		}
	})

	t.Run("healthz, page, unknown paths, foreign Host", func(t *testing.T) {
		r := f.do("GET", "/healthz", "", "")
		require.Equal(t, http.StatusOK, r.code)
		var h Healthz
		r.json(t, &h)
		assert.Equal(t, "fano", h.Service)

		r = f.do("GET", "/", "", "")
		require.Equal(t, http.StatusOK, r.code)
		assert.Contains(t, string(r.body), "fano — control panel")
		assert.Contains(t, r.hdr.Get("Content-Security-Policy"), "default-src 'self'")
		for _, p := range []string{"/app.js", "/style.css", "/markdown.js"} {
			assert.Equal(t, http.StatusOK, f.do("GET", p, "", "").code, p)
		}
		r = f.do("GET", "/nope", "", "")
		assert.Equal(t, http.StatusNotFound, r.code)
		assert.Contains(t, r.errorMessage(t), "/nope")

		req, _ := http.NewRequest("GET", f.ts.URL+"/api/orchestrator/status", nil)
		req.Host = "attacker.example:8765"
		resp, err := f.ts.Client().Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusMisdirectedRequest, resp.StatusCode, "a rebinding page's Host is refused")
	})

	t.Run("the log names refusals but holds no token", func(t *testing.T) {
		logs := f.logBuf.String()
		assert.Contains(t, logs, "control.panel.unauthorized")
		assert.False(t, strings.Contains(logs, testToken))
	})
}

func TestCollectorsShareTheRegistry(t *testing.T) {
	f := newFixture(t, fixtureOpts{modules: []string{"probe"}})
	extra := prometheus.NewGauge(prometheus.GaugeOpts{Name: "fano_tasks_completed_24h_test", Help: "a collector of another package"})
	extra.Set(7)
	srv, err := New(Options{Sys: f.sys, Token: testToken, Collectors: []prometheus.Collector{extra}})
	require.NoError(t, err)
	defer srv.Close()
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:8765/metrics", nil))
	assert.Contains(t, rec.Body.String(), "\nfano_tasks_completed_24h_test 7\n")

	clash := prometheus.NewGauge(prometheus.GaugeOpts{Name: "fano_panel_websocket_clients", Help: "clashes"})
	_, err = New(Options{Sys: f.sys, Token: testToken, Collectors: []prometheus.Collector{clash}})
	assert.ErrorContains(t, err, "metrics collector")

	_, err = New(Options{Sys: f.sys, Token: "short"})
	assert.ErrorContains(t, err, "at least 16 characters")
}

func TestNoModuleForSeedsCommentsOrDocument(t *testing.T) {
	f := newFixture(t, fixtureOpts{modules: []string{"probe"}}) // the panel of a fano with the probe alone
	r := f.do("POST", "/api/seeds", testToken, `{"text":"x"}`)
	assert.Equal(t, http.StatusConflict, r.code)
	assert.Contains(t, r.errorMessage(t), "no configured module accepts seeds")
	r = f.do("POST", "/api/comments", testToken, `{"section_id":"a","text":"x"}`)
	assert.Equal(t, http.StatusConflict, r.code)
	assert.Contains(t, r.errorMessage(t), "no configured module accepts comments")
	r = f.do("GET", "/api/document", "", "")
	assert.Equal(t, http.StatusNotFound, r.code)
	assert.Contains(t, r.errorMessage(t), "no document")
}

// Operator text is checked (no control characters), the same comment
// within a minute is taken once, and a page of another origin cannot make
// changes even with the token.
func TestPanelRefusesBadTextDuplicatesAndForeignOrigins(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	r := f.do("POST", "/api/seeds", testToken, `{"text":"nul\u0000inside"}`)
	require.Equal(t, http.StatusBadRequest, r.code)
	require.Contains(t, r.errorMessage(t), "control character U+0000")

	r = f.do("POST", "/api/comments", testToken, `{"section_id":"planes","text":"Cite Bruck-Ryser."}`)
	require.Equal(t, http.StatusOK, r.code, "%s", r.body)
	var cr CommandResult
	r.json(t, &cr)
	require.Equal(t, "added", cr.Status)
	r = f.do("POST", "/api/comments", testToken, `{"section_id":"planes","text":"Cite  Bruck-Ryser."}`)
	require.Equal(t, http.StatusOK, r.code, "%s", r.body)
	r.json(t, &cr)
	require.Equal(t, "duplicate", cr.Status)
	doc := string(f.do("GET", "/api/document", "", "").body)
	require.Equal(t, 1, strings.Count(doc, "Bruck-Ryser"), doc)

	req, err := http.NewRequest("POST", f.ts.URL+"/api/seeds", strings.NewReader(`{"text":"from evil.example"}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Origin", "https://evil.example")
	resp, err := f.ts.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.NotContains(t, string(f.do("GET", "/api/document", "", "").body), "evil.example")
}

// While WAL writes fail /healthz answers 503 with the reason (the CLI
// still sees a running fano), the status says new work is held; when
// writes succeed again it is 200.
func TestHealthzUnhealthyWhileWALWritesFail(t *testing.T) {
	watch := actors.NewStorageWatch()
	f := newFixture(t, fixtureOpts{storage: watch})
	require.Equal(t, http.StatusOK, f.do("GET", "/healthz", "", "").code)

	watch.Failed(errors.New("write fano.db: no space left on device"), 1, f.clock.Now())
	r := f.do("GET", "/healthz", "", "")
	require.Equal(t, http.StatusServiceUnavailable, r.code)
	var h Healthz
	r.json(t, &h)
	require.Equal(t, "unhealthy", h.Status)
	require.Contains(t, h.Reason, "no space left on device")
	var st Status
	f.do("GET", "/api/orchestrator/status", "", "").json(t, &st)
	require.Equal(t, "not_accepting", st.State)
	c := &Client{BaseURL: f.ts.URL, HTTP: f.ts.Client()}
	ch, err := c.Healthz(context.Background())
	require.NoError(t, err, "a fano that cannot write is still running")
	require.Equal(t, "unhealthy", ch.Status)

	watch.Recovered(time.Minute, 5)
	require.Equal(t, http.StatusOK, f.do("GET", "/healthz", "", "").code)
	f.do("GET", "/api/orchestrator/status", "", "").json(t, &st)
	require.Equal(t, "running", st.State)
}
