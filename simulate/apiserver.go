package simulate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	"fano/gateway"
)

// An API backend is simulated behind the real API gateway (gateway/api):
// the gateway's HTTP requests go to Handler through Transport, in
// process, with no socket; the handler answers as an OpenAI-compatible
// service would, from the simulated backend and its faults.

type requestKey struct{}

// WithRequest stashes the gateway request in ctx: the HTTP body carries
// only the messages, and the simulated service answers in the format of
// the task type, as a real model answers the prompt it was given.
func WithRequest(ctx context.Context, req gateway.Request) context.Context {
	return context.WithValue(ctx, requestKey{}, req)
}

// Handler serves POST .../chat/completions from b.
func Handler(b *Backend) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Stream   bool `json:"stream"`
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || len(body.Messages) == 0 {
			http.Error(w, `{"error":{"message":"bad request body"}}`, http.StatusBadRequest)
			return
		}
		req, ok := r.Context().Value(requestKey{}).(gateway.Request)
		if !ok {
			last := body.Messages[len(body.Messages)-1]
			req = gateway.Request{Prompt: last.Content}
			for _, m := range body.Messages[:len(body.Messages)-1] {
				req.History = append(req.History, gateway.Message{Role: m.Role, Content: m.Content})
			}
		}
		resp, err := b.Send(r.Context(), req)
		if err != nil {
			writeAPIError(w, b.clock.Now(), err)
			return
		}
		usage := map[string]int64{"prompt_tokens": resp.PromptTokens, "completion_tokens": resp.CompletionTokens}
		if body.Stream {
			w.Header().Set("Content-Type", "text/event-stream")
			chunk, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"delta": map[string]string{"content": resp.Content}}}})
			end, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"delta": map[string]string{}, "finish_reason": "stop"}}, "usage": usage})
			fmt.Fprintf(w, "data: %s\n\ndata: %s\n\ndata: [DONE]\n\n", chunk, end)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"choices": []any{map[string]any{"message": map[string]string{"role": "assistant", "content": resp.Content}, "finish_reason": "stop"}},
			"usage":   usage,
		})
	})
}

// writeAPIError answers a refusal as the provider would: 429 with
// Retry-After, 401 for a revoked key, 503 while unavailable, 502 for a
// server error.
func writeAPIError(w http.ResponseWriter, now time.Time, err error) {
	code := http.StatusInternalServerError
	var rl *gateway.RateLimitedError
	var f *gateway.Fault
	switch {
	case errors.As(err, &f) && f.Condition.State == gateway.StateCredits:
		code = http.StatusPaymentRequired
	case errors.As(err, &f) && f.Condition.State == gateway.StateCapped && f.Window == "day":
		// A per-day cap as gateways send it: the daily wording and the
		// reset in epoch milliseconds.
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(f.Condition.Until.UnixMilli(), 10))
		err = fmt.Errorf("%w: requests per day limit reached", err)
		code = http.StatusTooManyRequests
	case errors.As(err, &rl):
		wait := rl.RetryAfter
		if !rl.Until.IsZero() {
			wait = rl.Until.Sub(now)
		}
		w.Header().Set("Retry-After", strconv.Itoa(int(max(wait, time.Second).Round(time.Second)/time.Second)))
		code = http.StatusTooManyRequests
	case errors.Is(err, gateway.ErrCredentials):
		code = http.StatusUnauthorized
	case errors.Is(err, gateway.ErrUnavailable):
		code = http.StatusServiceUnavailable
	case errors.Is(err, gateway.ErrTransient):
		code = http.StatusBadGateway
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return // the client is gone
	}
	msg, _ := json.Marshal(map[string]any{"error": map[string]string{"message": err.Error()}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(msg)
}

// Transport sends each request to h in this process: no socket, so it is
// as fast and as deterministic as a function call.
func Transport(h http.Handler) http.RoundTripper { return handlerTransport{h} }

type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	if err := r.Context().Err(); err != nil {
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return nil, err
	}
	resp := rec.Result()
	resp.Request = r
	if resp.Body == nil {
		resp.Body = io.NopCloser(nil)
	}
	return resp, nil
}
