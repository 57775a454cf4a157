package actors

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/gateway"
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
	b.start()
	b.waitCompleted(1)

	reqs := g.requests()
	require.Len(t, reqs, 4)
	assert.Empty(t, reqs[0].ConversationURL)
	first := reqs[1].ConversationURL
	require.NotEmpty(t, first, "turn 2 continues turn 1's conversation")
	assert.Empty(t, reqs[2].ConversationURL, "the vanished conversation is not retried")
	assert.Equal(t, reqs[1].Prompt, reqs[2].Prompt)
	assert.Len(t, reqs[2].History, 2, "the new conversation carries the task's history")
	assert.NotEmpty(t, reqs[3].ConversationURL) // (the sim names a task's conversations alike)

	tk := b.sys.Tasks(nil, 0)[0]
	assert.Equal(t, pb.TaskState_TASK_STATE_COMPLETED, tk.State)
	assert.Zero(t, tk.Attempts)
	assert.Equal(t, reqs[3].ConversationURL, tk.Conversation.Backends["chatgpt"].Url)
	assert.EqualValues(t, 2, tk.Conversation.Backends["chatgpt"].Answers)
}
