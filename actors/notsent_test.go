package actors

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/gateway/api"
	"fano/gateway/ratelimit"
	"fano/modules/probe"
	"fano/pb"
)

// A request cancelled while it waits in the API's rate limiter never
// left: the limiter's wait ends with its own ErrNotSent (the ratelimit
// package's), and the request's quota is given back all the same.
func TestCancelledLimiterWaitGivesItsQuotaBack(t *testing.T) {
	var served int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served++
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"choices":[{"message":{"content":"an answer"}}]}`)
	}))
	defer srv.Close()
	lim := ratelimit.New(ratelimit.Config{Name: "m", InitialRPM: 1}, clockwork.NewRealClock())
	be, err := api.New(api.Config{Name: "router", BaseURL: srv.URL + "/v1", Model: "m", APIKey: "sk-test-1234", Limiter: lim, Logger: zerolog.Nop()})
	require.NoError(t, err)
	b := setup(t, setupOpts{backends: []string{"router"}, probe: probe.Config{NoPropose: true, Turns: 1},
		mutate: func(o *Options) { o.Backends[0] = be; o.Allocator.Backends[0].Kind = "api" }})
	b.start()
	_, err = b.sys.Submit(probeTask(1, 0))
	require.NoError(t, err)
	b.sys.Tick()
	b.waitCompleted(1)
	require.Equal(t, 1, b.sys.Quotas()[0].HourlyUsed)

	waiting := probeTask(2, 0)
	_, err = b.sys.Submit(waiting)
	require.NoError(t, err)
	b.sys.Tick()
	b.waitEvent("the second request's intent", func(n Notice) bool { return n.Event.GetLlmRequestStarted() != nil })
	for lim.Stats().Waiting == 0 {
		runtime.Gosched() // the request reaches the limiter's queue: a minute to wait
	}
	require.NoError(t, b.sys.Cancel(waiting.Id, "a person's cancel"))
	f := b.waitEvent("the cancelled request", func(n Notice) bool { return n.Event.GetLlmRequestFailed() != nil })
	assert.True(t, f.Event.GetLlmRequestFailed().NotSent, "it never left: %v", f.Event)
	b.waitEvent("its quota given back", func(n Notice) bool { return n.Event.GetQuotaReleased() != nil })
	b.waitSlotsFree()
	assert.Equal(t, 1, b.sys.Quotas()[0].HourlyUsed, "only the request that left is charged")
	assert.Equal(t, 1, served)
	tk, _ := b.sys.Task(waiting.Id)
	assert.Equal(t, pb.TaskState_TASK_STATE_CANCELLED, tk.State)
}
