package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/pb"
)

func (f *fixture) wsURL() string { return "ws" + strings.TrimPrefix(f.ts.URL, "http") + "/api/events" }

// dial opens /api/events; origin "" sends none.
func (f *fixture) dial(ctx context.Context, origin string, client *http.Client) (*websocket.Conn, *http.Response, error) {
	h := http.Header{}
	if origin != "" {
		h.Set("Origin", origin)
	}
	c, resp, err := websocket.Dial(ctx, f.wsURL(), &websocket.DialOptions{HTTPHeader: h, HTTPClient: client})
	if c != nil {
		c.SetReadLimit(1 << 20)
	}
	return c, resp, err
}

func readEvent(ctx context.Context, t *testing.T, c *websocket.Conn) Event {
	t.Helper()
	_, data, err := c.Read(ctx)
	require.NoError(t, err)
	var ev Event
	require.NoError(t, json.Unmarshal(data, &ev))
	return ev
}

// readUntil reads events up to the first of kind, and returns them all.
func readUntil(ctx context.Context, t *testing.T, c *websocket.Conn, kind string) []Event {
	t.Helper()
	var got []Event
	for len(got) == 0 || got[len(got)-1].Kind != kind {
		got = append(got, readEvent(ctx, t, c))
	}
	return got
}

// clientCount is the number of websocket clients the hub holds.
func (h *hub) clientCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.clients)
}

func TestEventsCarryFactsNotContent(t *testing.T) {
	f := newFixture(t, fixtureOpts{modules: []string{"probe", "notebook"}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := f.dial(ctx, f.ts.URL, nil)
	require.NoError(t, err)
	defer c.CloseNow()
	f.waitFor("the client registered", func() bool { return f.srv.hub.clientCount() == 1 })

	f.drive("q0 completed", f.is(q0, pb.TaskState_TASK_STATE_COMPLETED))
	got := readUntil(ctx, t, c, "task_completed")
	kinds := map[string]Event{}
	for i, ev := range got {
		kinds[ev.Kind] = ev
		if i > 0 {
			assert.Equal(t, got[i-1].Seq+1, ev.Seq, "no gap")
		}
	}
	resp := kinds["llm_request_finished"]
	assert.Equal(t, "llm", resp.Type)
	assert.Equal(t, q0, resp.TaskID)
	assert.Equal(t, "probe", resp.Module)
	assert.Equal(t, "simA", resp.LLM)
	assert.Positive(t, resp.ResponseBytes)
	assert.Equal(t, float64(1000), resp.DurationMS, "the sim's latency on the fake clock")
	req := kinds["llm_request_started"]
	assert.Equal(t, len(`Follow-up 1 on "q zero?": go one step deeper and give a precise statement.`), req.PromptBytes)
	assert.Equal(t, "quota", kinds["quota_used"].Type)
	assert.Equal(t, "simA", kinds["quota_used"].Backend)
	done := kinds["task_completed"]
	assert.Equal(t, Event{Seq: done.Seq, Type: "task", Kind: "task_completed", At: done.At, TaskID: q0, Module: "probe", State: "COMPLETED"}, done)

	// The answer's text never travels: only its size.
	tk, _ := f.sys.Task(q0)
	for _, m := range tk.GetConversation().GetMessages() {
		for _, ev := range got {
			raw, _ := json.Marshal(ev)
			assert.NotContains(t, string(raw), m.GetContent())
		}
	}

	// Module events and health updates travel too.
	r := f.do("POST", "/api/comments", testToken, `{"section_id":"intro","text":"secret-ish words"}`)
	require.Equal(t, http.StatusOK, r.code)
	evs := readUntil(ctx, t, c, "comment_added")
	ev := evs[len(evs)-1]
	assert.Equal(t, Event{Seq: ev.Seq, Type: "module", Kind: "comment_added", At: ev.At, Module: "notebook"}, ev)
	f.sys.Publish(&pb.StateUpdate{Component: "health", UpdateType: "disk_low", Data: map[string]string{"free_gb": "0.5"}})
	evs = readUntil(ctx, t, c, "disk_low")
	ev = evs[len(evs)-1]
	assert.Equal(t, "health", ev.Type)
	assert.Equal(t, "disk_low", ev.Kind)
	assert.Equal(t, map[string]string{"free_gb": "0.5"}, ev.Data)
}

// A client that does not read is dropped once its buffer is full; the
// others keep receiving every event and the system keeps running.
func TestSlowClientIsDropped(t *testing.T) {
	f := newFixture(t, fixtureOpts{clientBuffer: 64, modules: []string{"probe", "notebook"}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	fast, _, err := f.dial(ctx, "", nil)
	require.NoError(t, err)
	defer fast.CloseNow()
	slow, _, err := f.dial(ctx, "", nil)
	require.NoError(t, err)
	defer slow.CloseNow()
	f.waitFor("both clients registered", func() bool { return f.srv.hub.clientCount() == 2 })

	// Publish large health updates in step with the fast client until the
	// hub gives up on the slow one. The system's own events may come in
	// between (the fixture waits for q0's state, and an event is notified
	// after it is applied: q0's quota_used can reach the hub after the
	// clients joined); the fast client gets those too, in seq order.
	big := strings.Repeat("x", 64<<10)
	sent, lastSeq := 0, uint64(0)
	for f.srv.hub.clientCount() == 2 {
		require.Less(t, sent, 2000, "the slow client was never dropped")
		f.sys.Publish(&pb.StateUpdate{Component: "test", UpdateType: "bulk", Data: map[string]string{"n": fmt.Sprint(sent), "pad": big}})
		sent++
		for {
			ev := readEvent(ctx, t, fast)
			if lastSeq != 0 {
				require.Equal(t, lastSeq+1, ev.Seq, "no gap in seq: %+v", withoutPad(ev))
			}
			lastSeq = ev.Seq
			if ev.Component != "test" {
				continue // one of the system's events
			}
			require.Equal(t, fmt.Sprint(sent-1), ev.Data["n"], "the fast client gets every event, in order; got %+v", withoutPad(ev))
			break
		}
	}
	t.Logf("dropped after %d events", sent)
	assert.Equal(t, float64(1), testCounter(t, f, "fano_panel_websocket_clients_dropped_total"))

	// The slow client's connection ends: after what the kernel had
	// buffered, a read fails.
	received := 0
	for {
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		_, _, err := slow.Read(rctx)
		rcancel()
		if err != nil {
			require.NotErrorIs(t, err, context.DeadlineExceeded, "the dropped client's connection must end")
			break
		}
		received++
	}
	assert.Less(t, received, sent, "the slow client missed events")

	// The system runs on and the fast client still follows it.
	f.drive("q0 completed", f.is(q0, pb.TaskState_TASK_STATE_COMPLETED))
	for {
		ev := readEvent(ctx, t, fast)
		if ev.Kind == "task_completed" && ev.TaskID == q0 {
			break
		}
	}
	assert.Equal(t, 1, f.srv.hub.clientCount())
}

// withoutPad is an event as a failure message shows it.
func withoutPad(ev Event) Event {
	if _, ok := ev.Data["pad"]; ok {
		d := map[string]string{}
		for k, v := range ev.Data {
			d[k] = v
		}
		d["pad"] = fmt.Sprintf("(%d bytes)", len(ev.Data["pad"]))
		ev.Data = d
	}
	return ev
}

func testCounter(t *testing.T, f *fixture, name string) float64 {
	t.Helper()
	mfs, err := f.srv.metrics.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func TestWebsocketOrigin(t *testing.T) {
	f := newFixture(t, fixtureOpts{origins: []string{"http://localhost:3000"}, modules: []string{"probe"}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	for _, origin := range []string{"http://evil.example", "http://localhost:3001", "null"} {
		c, resp, err := f.dial(ctx, origin, nil)
		require.Error(t, err, origin)
		if c != nil {
			c.CloseNow()
		}
		require.NotNil(t, resp, origin)
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, origin)
	}
	assert.Contains(t, f.logBuf.String(), "control.panel.ws_origin_refused")

	for _, origin := range []string{f.ts.URL, "http://localhost:3000", ""} {
		c, _, err := f.dial(ctx, origin, nil)
		require.NoError(t, err, "origin %q", origin)
		c.Close(websocket.StatusNormalClosure, "")
	}
}

func TestCloseEndsWebsockets(t *testing.T) {
	f := newFixture(t, fixtureOpts{modules: []string{"probe"}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := f.dial(ctx, "", nil)
	require.NoError(t, err)
	defer c.CloseNow()
	f.waitFor("the client registered", func() bool { return f.srv.hub.clientCount() == 1 })
	require.NoError(t, f.srv.Close())
	_, _, err = c.Read(ctx)
	var ce websocket.CloseError
	require.True(t, errors.As(err, &ce), "a close frame, got %v", err)
	assert.Equal(t, websocket.StatusGoingAway, ce.Code)
	// The system does not notice.
	f.drive("q0 completed", f.is(q0, pb.TaskState_TASK_STATE_COMPLETED))
}
