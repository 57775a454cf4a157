package api

import (
	"errors"
	"net/http"
	"testing"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/gateway"
	"fano/gateway/ratelimit"
)

// An answer the provider stopped itself is never recorded as whole, in a
// JSON body or a stream, with text or without: at its output token limit
// (finish_reason "length") the request fails, because asking the same
// again is cut the same way; stopped by its content filter it is no
// answer, tried elsewhere like a refusal. Neither is a passing fault of
// the backend.
func TestAnswerStoppedByTheProviderIsNotWhole(t *testing.T) {
	stoppedBody := func(text, reason string) map[string]any {
		a := answer(text, 20, 4096)
		a["choices"].([]any)[0].(map[string]any)["finish_reason"] = reason
		return a
	}
	stoppedStream := func(w http.ResponseWriter, text, reason string) {
		sse(w, chunk(text), `data: {"choices":[{"index":0,"delta":{},"finish_reason":"`+reason+`"}]}`+"\n\n",
			`data: {"choices":[],"usage":{"prompt_tokens":20,"completion_tokens":4096}}`+"\n\n", "data: [DONE]\n\n")
	}
	for _, c := range []struct {
		name, text, reason string
		stream             bool
		kind               string
		ended              gateway.Ending
	}{
		{"json, token limit", "The proof goes by induction on n. For n =", "length", false, "permanent", gateway.EndTokenLimit},
		{"json, token limit, nothing said (reasoning spent it all)", "", "length", false, "permanent", gateway.EndTokenLimit},
		{"stream, token limit", "The proof goes by induction on n. For n =", "length", true, "permanent", gateway.EndTokenLimit},
		{"json, content filter", "The first step", "content_filter", false, "bad_answer", gateway.EndFiltered},
		{"stream, content filter", "The first step", "content_filter", true, "bad_answer", gateway.EndFiltered},
	} {
		t.Run(c.name, func(t *testing.T) {
			clock := clockwork.NewFakeClock()
			lim := ratelimit.New(ratelimit.Config{Name: "m", InitialRPM: 1 << 20}, clock)
			lim.Observe(http.Header{ratelimit.HeaderLimitTokens: {"1000000"}})
			e := setup(t, func(w http.ResponseWriter, r *http.Request) {
				if c.stream {
					stoppedStream(w, c.text, c.reason)
					return
				}
				writeJSON(w, http.StatusOK, stoppedBody(c.text, c.reason))
			}, func(cfg *Config) { cfg.Stream = c.stream; cfg.Limiter = lim; cfg.Clock = clock })
			resp, err := e.send(t)
			require.Error(t, err)
			assert.ErrorIs(t, err, gateway.ErrCut, "a stopped answer is a cut one")
			assert.False(t, errors.Is(err, gateway.ErrTransient), "not asked again as if the connection had dropped")
			assert.Equal(t, c.kind, gateway.Kind(err))
			_, isCondition := gateway.ConditionOf(err)
			assert.False(t, isCondition, "the backend is not put in a condition")
			assert.Contains(t, err.Error(), "explorer/exploration/7", "the error names its task")
			assert.Contains(t, err.Error(), "finish_reason "+c.reason)
			assert.Equal(t, c.ended, resp.Ended)
			assert.Equal(t, c.text, resp.Content, "the text is kept for the trace, not recorded")
			require.Error(t, gateway.Whole("router", resp))
			s := e.b.Stats()
			assert.Zero(t, s.Succeeded)
			assert.Zero(t, s.Transient)
			assert.EqualValues(t, 1, s.Permanent)
			assert.Equal(t, 20+4096, lim.Stats().TokensInWindow, "the provider finished it: its usage is what the window holds")
		})
	}
}

// The finish reasons of a whole answer stay whole; the other providers'
// words for a token limit or a filter, in either case, are read as those.
func TestFinishReasonsOfAWholeAnswer(t *testing.T) {
	for _, reason := range []string{"stop", "", "tool_calls", "end_turn", "eos", "STOP"} {
		assert.Equal(t, gateway.EndComplete, endingOf(reason), reason)
	}
	for _, reason := range []string{"max_tokens", "MAX_TOKENS", "Length"} {
		assert.Equal(t, gateway.EndTokenLimit, endingOf(reason), reason)
	}
	for _, reason := range []string{"SAFETY", "RECITATION", "content_filter"} {
		assert.Equal(t, gateway.EndFiltered, endingOf(reason), reason)
	}
}
