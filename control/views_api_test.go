package control

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/gateway"
	"fano/pb"
)

// publishAlert publishes a health alert as the health monitor does.
func (f *fixture) publishAlert(kind, message string, resolved bool) {
	f.sys.Publish(&pb.StateUpdate{Component: "health", UpdateType: "alert",
		Data: map[string]string{"kind": kind, "message": message, "resolved": map[bool]string{true: "true", false: "false"}[resolved]}})
}

func (f *fixture) alerts(query string) Alerts {
	f.t.Helper()
	r := f.do("GET", "/api/alerts"+query, "", "")
	require.Equal(f.t, http.StatusOK, r.code, "%s", r.body)
	var a Alerts
	r.json(f.t, &a)
	return a
}

// waitAlerts waits until the panel's alerts meet cond.
func (f *fixture) waitAlerts(what string, cond func(Alerts) bool) Alerts {
	f.t.Helper()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		a := f.alerts("")
		if cond(a) {
			return a
		}
		select {
		case <-tick.C:
		case <-deadline:
			f.t.Fatalf("timed out waiting for %s: %+v", what, a)
		}
	}
}

// An alert is listed open when raised and resolved when its condition
// ends, newest first, with the action a person takes; the same condition
// said again is one alert, not two.
func TestAlertsRaisedAndResolved(t *testing.T) {
	f := newFixture(t, fixtureOpts{modules: []string{"probe", "notebook"}})
	assert.Empty(t, f.alerts("").Alerts)

	f.publishAlert("low_disk", "free disk space 1.00 GB is below the minimum 5.00 GB", false)
	f.publishAlert("low_disk", "free disk space 0.90 GB is below the minimum 5.00 GB", false)
	a := f.waitAlerts("the low-disk alert", func(a Alerts) bool {
		return a.Open == 1 && a.Alerts[0].Message == "free disk space 0.90 GB is below the minimum 5.00 GB"
	})
	require.Len(t, a.Alerts, 1, "the same condition again updates its alert")
	low := a.Alerts[0]
	assert.Equal(t, "low_disk", low.Kind)
	assert.True(t, low.Person)
	assert.Contains(t, low.Action, "free disk space")
	assert.Nil(t, low.Resolved)
	assert.Equal(t, f.clock.Now(), low.Raised)

	f.publishAlert("queue_depth", "queue depth 900 is above the maximum 500", false)
	f.clock.Advance(time.Minute)
	f.publishAlert("low_disk", "free disk space 6.00 GB is back above the minimum 5.00 GB: new work starts again", true)
	a = f.waitAlerts("low disk resolved", func(a Alerts) bool { return a.Open == 1 && len(a.Alerts) == 2 })
	assert.Equal(t, "queue_depth", a.Alerts[0].Kind, "newest first")
	assert.Equal(t, "low_disk", a.Alerts[1].Kind)
	require.NotNil(t, a.Alerts[1].Resolved)
	assert.Equal(t, f.clock.Now(), *a.Alerts[1].Resolved)
	assert.Contains(t, a.Alerts[1].Resolution, "back above the minimum")

	open := f.alerts("?open=true")
	require.Len(t, open.Alerts, 1)
	assert.Equal(t, "queue_depth", open.Alerts[0].Kind)
	r := f.do("GET", "/api/alerts?open=maybe", "", "")
	assert.Equal(t, http.StatusBadRequest, r.code)
	assert.Contains(t, r.errorMessage(t), `"open"`)
}

// A backend's recorded condition (a WAL event) raises an alert when a
// person must act or the backend is down, and its return to work ends it;
// a rate window is no alert.
func TestBackendConditionsAsAlerts(t *testing.T) {
	b := newAlertBook()
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	assert.Nil(t, b.observeCondition(&pb.BackendConditionRecorded{Backend: "gpt", State: "rate_limited"}, at), "a rate window is fano at full use")
	c := b.observeCondition(&pb.BackendConditionRecorded{Backend: "gpt", State: "login", Reason: "the login page is shown"}, at)
	require.NotNil(t, c)
	assert.Equal(t, "backend_login", c.Alert.Kind)
	assert.Equal(t, "gpt", c.Alert.Backend)
	assert.True(t, c.Alert.Person)
	assert.Equal(t, "log in again: fano login gpt", c.Alert.Action)
	assert.Equal(t, "gpt: login — the login page is shown", c.Alert.Message)
	assert.Nil(t, b.observeCondition(&pb.BackendConditionRecorded{Backend: "gpt", State: "login"}, at.Add(time.Minute)), "said again: the same alert")

	c = b.observeCondition(&pb.BackendConditionRecorded{Backend: "gpt", State: ""}, at.Add(time.Hour))
	require.NotNil(t, c)
	assert.True(t, c.Resolved)
	l := b.list(false)
	assert.Equal(t, 0, l.Open)
	require.Len(t, l.Alerts, 1)
	assert.Equal(t, at.Add(time.Hour), *l.Alerts[0].Resolved)

	c = b.observeCondition(&pb.BackendConditionRecorded{Backend: "api", State: "down", Reason: "connection refused"}, at)
	require.NotNil(t, c)
	assert.False(t, c.Alert.Person, "fano re-checks a down backend by itself")
	assert.NotEmpty(t, c.Alert.Action)
}

// hookServer is a real HTTP server that records the JSON bodies posted.
func hookServer(t *testing.T) (*httptest.Server, chan map[string]string) {
	got := make(chan map[string]string, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, http.MethodPost, r.Method)
		assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
		data, _ := io.ReadAll(r.Body)
		var body map[string]string
		assert.NoError(t, json.Unmarshal(data, &body), "%s", data)
		got <- body
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func receive(t *testing.T, got chan map[string]string) map[string]string {
	t.Helper()
	select {
	case b := <-got:
		return b
	case <-time.After(10 * time.Second):
		t.Fatal("the webhook received nothing")
		return nil
	}
}

// The webhook gets a JSON POST with "text" for each alert that needs a
// person, raised and resolved; an alert fano handles alone is not posted.
func TestAlertWebhookPostsWhatNeedsAPerson(t *testing.T) {
	hook, got := hookServer(t)
	f := newFixture(t, fixtureOpts{modules: []string{"probe", "notebook"}, webhook: Webhook{URL: hook.URL + "/hooks/T0SECRET"}})

	f.publishAlert("queue_depth", "queue depth 900 is above the maximum 500", false)
	f.publishAlert("low_disk", "free disk space 1.00 GB is below the minimum 5.00 GB", false)
	b := receive(t, got)
	assert.Equal(t, map[string]string{"text": "fano needs a person: free disk space 1.00 GB is below the minimum 5.00 GB. To do: " +
		healthActions["low_disk"]}, b, "the queue-depth alert, which needs nobody, was not posted")

	f.publishAlert("low_disk", "free disk space 6.00 GB is back above the minimum 5.00 GB", true)
	b = receive(t, got)
	assert.Equal(t, "Resolved: free disk space 1.00 GB is below the minimum 5.00 GB (free disk space 6.00 GB is back above the minimum 5.00 GB)", b["text"])
	select {
	case extra := <-got:
		t.Fatalf("unexpected post: %v", extra)
	default:
	}
}

// With an ntfy topic the body carries ntfy's fields beside "text"; a
// hook that fails is logged by host, never with its secret path.
func TestAlertWebhookTopicAndFailure(t *testing.T) {
	hook, got := hookServer(t)
	n := newNotifier(Webhook{URL: hook.URL, Topic: "fano-alerts"}, testLogger(t))
	defer n.close()
	n.offer(change{Alert: AlertView{Kind: "backend_credits", Message: "api: credits", Action: "add credits", Person: true}})
	b := receive(t, got)
	assert.Equal(t, "fano-alerts", b["topic"])
	assert.Equal(t, "fano needs you: backend_credits", b["title"])
	assert.Equal(t, b["text"], b["message"])

	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusForbidden) }))
	defer failing.Close()
	bad := newNotifier(Webhook{URL: failing.URL + "/hooks/T0SECRET"}, testLogger(t))
	defer bad.close()
	err := bad.post(webhookBody{Text: "x"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "403")
	assert.NotContains(t, err.Error(), "T0SECRET")
	dead := newNotifier(Webhook{URL: "http://127.0.0.1:1/hooks/T0SECRET", Timeout: time.Second}, testLogger(t))
	defer dead.close()
	err = dead.post(webhookBody{Text: "x"})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "T0SECRET")
}

func (f *fixture) history(hours int) History {
	f.t.Helper()
	r := f.do("GET", "/api/history?hours="+itoa(hours), "", "")
	require.Equal(f.t, http.StatusOK, r.code, "%s", r.body)
	var h History
	r.json(f.t, &h)
	return h
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// The history counts requests, quota and finished tasks per hour from
// fano's events; a panel started later reads the same from the WAL (no
// double count), and once the hour has ended, from the archive.
func TestHistoryFromEvents(t *testing.T) {
	f := newFixture(t, fixtureOpts{modules: []string{"probe", "notebook"}})
	f.drive("q0 and q1 completed", func() bool {
		return f.state(q0) == pb.TaskState_TASK_STATE_COMPLETED && f.state(q1) == pb.TaskState_TASK_STATE_COMPLETED
	})
	want := func(h History) {
		t.Helper()
		require.True(t, h.Complete)
		require.Len(t, h.Hours, 2)
		assert.Equal(t, time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC), h.Hours[0].Start)
		hour := h.Hours[1]
		assert.Equal(t, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), hour.Start)
		assert.GreaterOrEqual(t, hour.Completed, 2)
		assert.Equal(t, hour.Completed, countState(f, pb.TaskState_TASK_STATE_COMPLETED))
		assert.Equal(t, hour.Requests["simA"], hour.QuotaUsed["simA"])
		assert.Equal(t, f.sys.Quotas()[0].HourlyUsed, hour.QuotaUsed["simA"], "the quota the allocator counts")
		assert.Equal(t, []string{"simA"}, h.Backends)
		assert.Equal(t, 0, h.Hours[0].Requests["simA"])
		require.Len(t, h.Days, 1)
		assert.Equal(t, "2026-03-01", h.Days[0].Date)
	}
	// A request's intent and its quota are two events that reach the
	// panel in either order: wait for both of the last request, too.
	var live History
	require.Eventually(t, func() bool {
		live = f.history(2)
		h := live.Hours[1]
		return h.Completed == countState(f, pb.TaskState_TASK_STATE_COMPLETED) &&
			h.Requests["simA"] == h.QuotaUsed["simA"] && h.QuotaUsed["simA"] == f.sys.Quotas()[0].HourlyUsed
	}, 10*time.Second, 5*time.Millisecond)
	want(live)

	// A second panel on the same system reads the same from the WAL.
	again, err := New(Options{Sys: f.sys, Token: testToken, Logger: testLogger(t), Modules: []string{"probe", "notebook"}})
	require.NoError(t, err)
	<-again.obs.done
	fromWAL := again.obs.historyView(2, nil)
	assert.Equal(t, live.Hours, fromWAL.Hours)
	require.NoError(t, again.Close())

	// Hours that ended are archived; a panel after that takes them from
	// the archive and counts none of the WAL's events twice.
	f.clock.Advance(3 * time.Hour)
	f.srv.obs.saveHistory()
	third, err := New(Options{Sys: f.sys, Token: testToken, Logger: testLogger(t), Modules: []string{"probe", "notebook"}})
	require.NoError(t, err)
	<-third.obs.done
	assert.Equal(t, hourOf(f.clock.Now().Add(-archiveGrace)), third.obs.hist.archivedThrough, "the hours were archived")
	fromArchive := third.obs.historyView(5, nil)
	assert.Equal(t, live.Hours[1], fromArchive.Hours[1])
	require.NoError(t, third.Close())

	r := f.do("GET", "/api/history?hours=400", "", "")
	assert.Equal(t, http.StatusBadRequest, r.code)
	assert.Contains(t, r.errorMessage(t), "from 1 to 336")
}

func countState(f *fixture, st pb.TaskState) int {
	n := 0
	for _, byState := range f.sys.Counts() {
		n += byState[st]
	}
	return n
}

// GET /api/tasks pages the matching tasks, newest first, with their total.
func TestTaskPage(t *testing.T) {
	f := newFixture(t, fixtureOpts{modules: []string{"probe", "notebook"}})
	var all TaskPage
	f.do("GET", "/api/tasks", "", "").json(t, &all)
	require.Equal(t, 3, all.Total)
	var page TaskPage
	r := f.do("GET", "/api/tasks?limit=1&offset=1", "", "")
	require.Equal(t, http.StatusOK, r.code, "%s", r.body)
	r.json(t, &page)
	assert.Equal(t, 3, page.Total)
	require.Len(t, page.Tasks, 1)
	assert.Equal(t, all.Tasks[1].ID, page.Tasks[0].ID)
	f.do("GET", "/api/tasks?state=pending&q=Q0002", "", "").json(t, &page)
	assert.Equal(t, 1, page.Total)
	assert.Equal(t, q2, page.Tasks[0].ID)
	f.do("GET", "/api/tasks?offset=9", "", "").json(t, &page)
	assert.Equal(t, 3, page.Total)
	assert.Empty(t, page.Tasks)
	r = f.do("GET", "/api/tasks?offset=-1", "", "")
	assert.Equal(t, http.StatusBadRequest, r.code)
	assert.Contains(t, r.errorMessage(t), `"offset"`)
}

// A task's detail has its timeline: the run, each request and answer
// with its backend, turn and duration, and the end.
func TestTaskTimeline(t *testing.T) {
	f := newFixture(t, fixtureOpts{modules: []string{"probe", "notebook"}})
	f.drive("q0 completed", f.is(q0, pb.TaskState_TASK_STATE_COMPLETED))
	var d TaskDetail
	require.Eventually(t, func() bool {
		f.do("GET", "/api/orchestrator/task/"+q0, "", "").json(t, &d)
		return len(d.Timeline) > 0 && d.Timeline[len(d.Timeline)-1].Kind == "completed"
	}, 10*time.Second, 5*time.Millisecond)
	var kinds []string
	for _, s := range d.Timeline {
		kinds = append(kinds, s.Kind)
	}
	assert.Equal(t, []string{"started", "request", "answer", "request", "answer", "completed"}, kinds)
	ans := d.Timeline[2]
	assert.Equal(t, "simA", ans.LLM)
	assert.Equal(t, int32(1), ans.Turn)
	assert.Equal(t, 1, ans.Attempt)
	assert.Equal(t, float64(simLatency.Milliseconds()), ans.DurationMS)
	assert.Equal(t, int32(2), d.Timeline[4].Turn)
}

// testLogger logs to the test's output.
func testLogger(t *testing.T) zerolog.Logger { return zerolog.New(zerolog.NewTestWriter(t)) }

// A backend behind a login wall is an alert that needs a person, with the
// command to run, posted to the webhook; once it takes work again the
// alert is resolved. A panel started later has the same alerts (from the
// archive), not twice.
func TestBackendLoginAlertThroughTheSystem(t *testing.T) {
	hook, got := hookServer(t)
	f := newFixture(t, fixtureOpts{modules: []string{"probe", "notebook"}, webhook: Webhook{URL: hook.URL}})
	<-f.srv.obs.done
	f.cond.Store(&gateway.Condition{State: gateway.StateLogin, Reason: "the site shows its login page"})
	f.sys.RecheckBackends("simA")
	a := f.waitAlerts("the login alert", func(a Alerts) bool { return a.Open == 1 })
	login := a.Alerts[0]
	assert.Equal(t, "backend_login", login.Kind)
	assert.Equal(t, "simA", login.Backend)
	assert.Equal(t, "log in again: fano login simA", login.Action)
	assert.True(t, login.Person)
	assert.Contains(t, receive(t, got)["text"], "To do: log in again: fano login simA")

	f.cond.Store(nil)
	f.clock.Advance(time.Minute)
	f.sys.RecheckBackends("simA")
	a = f.waitAlerts("the login alert resolved", func(a Alerts) bool { return a.Open == 0 && len(a.Alerts) == 1 })
	require.NotNil(t, a.Alerts[0].Resolved)
	assert.Contains(t, receive(t, got)["text"], "Resolved: simA: login")

	again, err := New(Options{Sys: f.sys, Token: testToken, Logger: testLogger(t), Modules: []string{"probe", "notebook"}})
	require.NoError(t, err)
	defer again.Close()
	<-again.obs.done
	assert.Equal(t, a, again.obs.alertList(false), "the same alerts after a restart of the panel")
}

// A stuck task's alert is ended by how the monitor handled it; the
// monitor's reconnect reports are no alerts of their own.
func TestStuckTaskAlertEndsWhenHandled(t *testing.T) {
	b := newAlertBook()
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).UnixNano()
	c := b.observeHealth(&pb.StateUpdate{Component: "health", UpdateType: "alert", At: at, Data: map[string]string{
		"kind": "stuck_task", "message": "task t1 has been running for 3h0m0s; pausing it", "resolved": "false", "task_id": "t1", "action": "pause"}})
	require.NotNil(t, c)
	assert.Equal(t, "t1", c.Alert.TaskID)
	assert.False(t, c.Alert.Person)
	assert.Nil(t, b.observeHealth(&pb.StateUpdate{Component: "health", UpdateType: "reconnect", At: at, Data: map[string]string{
		"kind": "no_llm", "message": "1 of 1 LLMs available", "resolved": "true"}}))
	c = b.observeHealth(&pb.StateUpdate{Component: "health", UpdateType: "stuck_task", At: at + int64(time.Second), Data: map[string]string{
		"kind": "stuck_task", "task_id": "t1", "action": "pause", "outcome": "paused"}})
	require.NotNil(t, c)
	assert.True(t, c.Resolved)
	assert.Equal(t, "pause: paused", c.Alert.Resolution)
	assert.Equal(t, 0, b.list(false).Open)
}
