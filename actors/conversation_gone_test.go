package actors

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/gateway"
	"fano/gateway/breaker"
	"fano/modules/probe"
	"fano/pb"
)

// goneOnce is a sim backend whose web conversations vanish: the first
// request that continues one gets gateway.ErrConversationGone. It records
// every request.
type goneOnce struct {
	gateway.Backend
	mu   sync.Mutex
	reqs []gateway.Request
	gone bool
}

func (g *goneOnce) Send(ctx context.Context, req gateway.Request) (gateway.Response, error) {
	g.mu.Lock()
	g.reqs = append(g.reqs, req)
	vanish := req.ConversationURL != "" && !g.gone
	g.gone = g.gone || vanish
	g.mu.Unlock()
	if vanish {
		return gateway.Response{}, gateway.Classified(g.Name(), gateway.ErrConversationGone, "conversation %s is gone", req.ConversationURL)
	}
	return g.Backend.Send(ctx, req)
}

func (g *goneOnce) requests() []gateway.Request {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]gateway.Request(nil), g.reqs...)
}

// A conversation that vanished is replaced at once by a new one that
// carries the task's history; it is neither retried nor counted against
// the task.
func TestConversationGoneStartsFreshWithHistory(t *testing.T) {
	var g *goneOnce
	b := setup(t, setupOpts{backends: []string{"chatgpt"}, probe: probe.Config{Questions: questions(1), Turns: 3},
		mutate: func(o *Options) {
			g = &goneOnce{Backend: o.Backends[0]}
			o.Backends[0] = g
		}})
	var retries atomic.Int32
	b.opts.Observe = func(_ string, e *pb.Event) {
		if e.GetTaskRetryScheduled() != nil {
			retries.Add(1)
		}
	}
	b.start()
	b.waitCompleted(1)
	assert.Zero(t, retries.Load(), "a vanished conversation is asked again at once, not after a backoff")

	reqs := g.requests()
	require.Len(t, reqs, 4)
	assert.Empty(t, reqs[0].ConversationURL)
	first := reqs[1].ConversationURL
	require.NotEmpty(t, first, "turn 2 continues turn 1's conversation")
	assert.Empty(t, reqs[2].ConversationURL, "the vanished conversation is not retried")
	assert.Equal(t, reqs[1].Prompt, reqs[2].Prompt)
	assert.Len(t, reqs[2].History, 2, "the new conversation carries the task's history")
	assert.NotEmpty(t, reqs[3].ConversationURL) // (the sim names a task's conversations alike)

	tk, _ := b.sys.Task(b.sys.Tasks(nil, 0)[0].Id) // the conversation of a finished task is in the archive
	assert.Equal(t, pb.TaskState_TASK_STATE_COMPLETED, tk.State)
	assert.Zero(t, tk.Attempts)
	assert.Equal(t, reqs[3].ConversationURL, tk.Conversation.Backends["chatgpt"].Url)
	assert.EqualValues(t, 2, tk.Conversation.Backends["chatgpt"].Answers)
}

// loginWalled is a sim backend that says it is behind a login wall while
// walled is set (gateway.Conditioner), as a browser backend does.
type loginWalled struct {
	gateway.Backend
	walled atomic.Bool
	sends  atomic.Int32
}

func (l *loginWalled) Condition() gateway.Condition {
	if l.walled.Load() {
		return gateway.Condition{State: gateway.StateLogin, Reason: "login required"}
	}
	return gateway.Condition{State: gateway.StateReady}
}

func (l *loginWalled) Send(ctx context.Context, req gateway.Request) (gateway.Response, error) {
	l.sends.Add(1)
	return l.Backend.Send(ctx, req)
}

// A backend behind its login wall is not asked: no request is recorded,
// no quota or request budget is spent; the task waits and runs once the
// login is back.
func TestLoginWalledBackendIsNotAsked(t *testing.T) {
	var l *loginWalled
	b := setup(t, setupOpts{backends: []string{"chatgpt"}, probe: probe.Config{Questions: questions(1), Turns: 1},
		mutate: func(o *Options) {
			l = &loginWalled{Backend: o.Backends[0]}
			l.walled.Store(true)
			o.Backends[0] = l
			o.CredentialsRecheck = 100 * time.Millisecond // the wall is checked again soon
		}})
	b.start()
	b.waitEvent("the login wall recorded", func(n Notice) bool {
		return n.Event.GetBackendConditionRecorded().GetState() == "login"
	})
	tk, _ := b.sys.Task(b.sys.Tasks(nil, 0)[0].Id) // the conversation of a finished task is in the archive
	assert.Zero(t, tk.RequestCount)
	assert.Zero(t, l.sends.Load())
	for _, q := range b.sys.Quotas() {
		assert.Zero(t, q.HourlyUsed, q.Name)
	}
	l.walled.Store(false)
	b.waitCompleted(1)
	assert.EqualValues(t, 1, l.sends.Load())
}

// The check looks through the circuit breaker fano wraps every backend in.
func TestBackendDownSeenThroughBreaker(t *testing.T) {
	var l *loginWalled
	b := setup(t, setupOpts{backends: []string{"chatgpt"}, mutate: func(o *Options) {
		l = &loginWalled{Backend: o.Backends[0]}
		l.walled.Store(true)
		o.Backends[0] = breaker.Wrap(l, breaker.Config{})
	}})
	faults := &backendFaults{backends: b.opts.Backends, clock: b.clock}
	assert.False(t, takesWork(faults.backendCondition("chatgpt").State))
	l.walled.Store(false)
	assert.True(t, takesWork(faults.backendCondition("chatgpt").State))
}
