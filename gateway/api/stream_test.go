package api

import (
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/gateway"
	"fano/gateway/ratelimit"
)

// A stream cut mid-answer is a transient fault whose text never passes as
// an answer; the retry's answer is recorded once, and neither the cut
// attempt's tokens nor its quota are counted twice.
func TestStreamCutMidAnswerIsRetriedAndCountedOnce(t *testing.T) {
	clock := clockwork.NewFakeClock()
	lim := ratelimit.New(ratelimit.Config{Name: "m", InitialRPM: 1 << 20}, clock)
	var attempts atomic.Int32
	e := setup(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(ratelimit.HeaderLimit, "10000")
		w.Header().Set(ratelimit.HeaderLimitTokens, "1000000")
		w.Header().Set(ratelimit.HeaderRemainingTokens, "999000")
		if attempts.Add(1) == 1 {
			// The connection drops after two pieces of the answer.
			sse(w, chunk("A projective plane has seven points "), chunk("and seven lines, and"))
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				_ = conn.Close()
			}
			return
		}
		sse(w, chunk("A projective plane has seven points "), chunk("and seven lines."),
			`data: {"choices":[],"usage":{"prompt_tokens":30,"completion_tokens":12}}`+"\n\n", "data: [DONE]\n\n")
	}, func(c *Config) { c.Stream = true; c.Limiter = lim; c.Clock = clock })
	lim.Observe(http.Header{ratelimit.HeaderLimitTokens: {"1000000"}})
	est := estimateTokens(gateway.Request{Prompt: "What is a projective plane?",
		History: []gateway.Message{{Role: "user", Content: "hello"}, {Role: "assistant", Content: "hi"}}})

	resp, err := e.send(t)
	require.Error(t, err)
	assert.ErrorIs(t, err, gateway.ErrCut)
	assert.ErrorIs(t, err, gateway.ErrTransient)
	assert.Equal(t, "transient", gateway.Kind(err))
	c, ok := gateway.ConditionOf(err)
	require.True(t, ok)
	assert.Equal(t, gateway.ClassTransient, c.Class())
	assert.Equal(t, clock.Now().Add(gateway.TransientPause), c.Until, "the backend waits a moment, not the task")
	assert.Equal(t, gateway.EndCut, resp.Ended, "how the answer ended is said truthfully")
	assert.Contains(t, resp.Content, "and seven lines, and")
	require.Error(t, gateway.Whole("router", resp), "a cut answer is never whole")
	s := e.b.Stats()
	assert.EqualValues(t, 1, s.Transient)
	assert.Zero(t, s.Succeeded)
	assert.Zero(t, s.PromptTokens+s.CompletionTokens, "the cut attempt records no tokens")
	assert.Equal(t, est, lim.Stats().TokensInWindow, "the cut attempt's prompt counted once in the window")

	clock.Advance(time.Second)
	resp, err = e.send(t)
	require.NoError(t, err)
	require.NoError(t, gateway.Whole("router", resp))
	assert.Equal(t, "A projective plane has seven points and seven lines.", resp.Content)
	s = e.b.Stats()
	assert.EqualValues(t, 1, s.Succeeded)
	assert.EqualValues(t, 30, s.PromptTokens, "the answer's tokens recorded once")
	assert.EqualValues(t, 12, s.CompletionTokens)
	assert.Equal(t, est+42, lim.Stats().TokensInWindow, "the retry settled to its usage; the cut attempt not counted again")
	assert.EqualValues(t, 2, lim.Stats().Granted, "two requests, two slots")
}

// An error object in the stream is read by the recogniser table: a rate
// limit mid-stream is a rate window, not a cut.
func TestStreamErrorIsRecognised(t *testing.T) {
	clock := clockwork.NewFakeClockAt(recogniseNow)
	lim := ratelimit.New(ratelimit.Config{Name: "m"}, clock)
	e := setup(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "20")
		sse(w, chunk("A"), `data: {"error":{"message":"Rate limit exceeded","code":429}}`+"\n\n")
	}, func(c *Config) { c.Stream = true; c.Limiter = lim; c.Clock = clock })
	resp, err := e.send(t)
	var f *gateway.Fault
	require.True(t, errors.As(err, &f), "%v", err)
	assert.Equal(t, gateway.StateRateLimited, f.Condition.State)
	assert.Equal(t, recogniseNow.Add(20*time.Second), f.Condition.Until)
	assert.NotEqual(t, gateway.EndComplete, resp.Ended)
	assert.False(t, errors.Is(err, gateway.ErrCut))
}
