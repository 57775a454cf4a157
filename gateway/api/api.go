// Package api is fano's backend for OpenAI-compatible chat completion APIs
// (OpenRouter and the like): one POST {base}/chat/completions per Send,
// paced by a ratelimit.Limiter, with every outcome turned into the
// gateway's typed errors.
//
// The API key is a secret: it is sent in the Authorization header and
// nowhere else — never in a log line, an error, Stats or a formatted
// Config (Secret redacts itself, and any server text quoted in an error has
// the key blanked out).
package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"fano/gateway"
	"fano/gateway/ratelimit"
)

// Secret holds an API key. Every way fmt, zerolog or encoding/json can
// print it yields "[redacted]"; Reveal is the one way to the value.
type Secret string

func (s Secret) String() string                { return "[redacted]" }
func (s Secret) GoString() string              { return "[redacted]" }
func (s Secret) MarshalText() ([]byte, error)  { return []byte("[redacted]"), nil }
func (s Secret) Format(f fmt.State, verb rune) { _, _ = io.WriteString(f, "[redacted]") }
func (s Secret) Reveal() string                { return string(s) }

// KeyFromEnv reads backend's API key from the environment variable named
// envVar (config backends.<backend>.api.api_key_env). The error names the
// config field (hence the backend) and the variable, never a value.
func KeyFromEnv(backend, envVar string) (Secret, error) {
	field := "backends." + backend + ".api.api_key_env"
	if envVar == "" {
		return "", fmt.Errorf("%s is empty: name the environment variable that holds the API key", field)
	}
	v := strings.TrimSpace(os.Getenv(envVar))
	if v == "" {
		return "", fmt.Errorf("environment variable %s (%s) is unset or empty: export the API key in it before starting fano", envVar, field)
	}
	return Secret(v), nil
}

// Config configures a Backend.
type Config struct {
	Name    string // backend name, in every error
	BaseURL string // e.g. https://openrouter.ai/api/v1
	Model   string
	APIKey  Secret
	// KeyEnv names the environment variable the key comes from. With it,
	// an unset key is not an error of New: the backend starts in the
	// credentials state and ReloadKey reads the variable again.
	KeyEnv string
	// Timeout bounds one request (0: only the caller's ctx does).
	Timeout time.Duration
	// Stream asks for a server-sent-events answer; a stream that ends
	// without [DONE] is reported as cut off.
	Stream bool
	// Limiter paces requests (shared by backends on the same model); nil
	// sends without pacing (the benchmark's baseline).
	Limiter *ratelimit.Limiter
	// Client is the HTTP client (nil: one of our own).
	Client *http.Client
	Clock  clockwork.Clock
	Logger zerolog.Logger
	// MaxAnswerBytes caps a read answer (default 32 MiB).
	MaxAnswerBytes int64
}

// Backend is an OpenAI-compatible API model. It implements
// gateway.Backend and is safe for concurrent use.
type Backend struct {
	cfg      Config
	endpoint string
	client   *http.Client
	ownTrans *http.Transport
	clock    clockwork.Clock
	log      zerolog.Logger

	mu          sync.Mutex
	stats       Stats
	unavailable error // last Unavailable outcome, cleared by a success

	// estimate is a request's tokens for the limiter (estimateTokens;
	// a test's baseline sets it to nothing).
	estimate func(gateway.Request) int
	// table is the recogniser table answers are read by.
	table []rule

	keyMu sync.Mutex // never held with mu
	key   Secret     // cfg.APIKey, or what ReloadKey read
}

var _ gateway.Conditioner = (*Backend)(nil)

func (b *Backend) apiKey() Secret {
	b.keyMu.Lock()
	defer b.keyMu.Unlock()
	return b.key
}

// ReloadKey reads the key again from KeyEnv (after SIGHUP re-read the
// environment file, or `fano backend resume`). Without KeyEnv it keeps
// the configured key.
func (b *Backend) ReloadKey() error {
	if b.cfg.KeyEnv == "" {
		return nil
	}
	key, err := KeyFromEnv(b.cfg.Name, b.cfg.KeyEnv)
	b.keyMu.Lock()
	defer b.keyMu.Unlock()
	if err != nil {
		b.key = ""
		return err
	}
	b.key = key
	return nil
}

// Condition is credentials while no key is set: nothing can be sent. A
// refused key (401/403) is reported by the request that met it, so a
// re-check sends a real request.
func (b *Backend) Condition() gateway.Condition {
	if b.apiKey() == "" {
		return gateway.Condition{State: gateway.StateCredentials, Reason: b.unsetKeyMessage()}
	}
	return gateway.Condition{State: gateway.StateReady}
}

func (b *Backend) unsetKeyMessage() string {
	return fmt.Sprintf("environment variable %s (backends.%s.api.api_key_env) is unset or empty: export the API key, then run `fano backend resume %s` or send fano SIGHUP",
		b.cfg.KeyEnv, b.cfg.Name, b.cfg.Name)
}

// LearnedRate is the rate the limiter learned from the provider's
// headers (0: none yet).
func (b *Backend) LearnedRate() (int, time.Duration) {
	if b.cfg.Limiter == nil {
		return 0, 0
	}
	return b.cfg.Limiter.Learned()
}

// SetLearnedRate paces at a rate learned before a restart.
func (b *Backend) SetLearnedRate(limit int, window time.Duration) {
	if b.cfg.Limiter != nil {
		b.cfg.Limiter.Learn(limit, window)
	}
}

// LearnedTokens is the tokens-per-window budget the limiter learned from
// the x-ratelimit-*-tokens headers (0: none yet).
func (b *Backend) LearnedTokens() (int, time.Duration) {
	if b.cfg.Limiter == nil {
		return 0, 0
	}
	return b.cfg.Limiter.LearnedTokens()
}

// SetLearnedTokens paces by a tokens budget learned before a restart.
func (b *Backend) SetLearnedTokens(limit int, window time.Duration) {
	if b.cfg.Limiter != nil {
		b.cfg.Limiter.LearnTokens(limit, window)
	}
}

var _ gateway.Backend = (*Backend)(nil)

// Stats counts what a Backend has done since New; token totals are for
// cost accounting.
type Stats struct {
	Backend          string           `json:"backend"`
	Model            string           `json:"model"`
	Requests         uint64           `json:"requests"` // sent to the server
	Succeeded        uint64           `json:"succeeded"`
	RateLimited      uint64           `json:"rate_limited"`
	Transient        uint64           `json:"transient"`
	Permanent        uint64           `json:"permanent"`
	Unavailable      uint64           `json:"unavailable"`
	Cancelled        uint64           `json:"cancelled"`
	NotSent          uint64           `json:"not_sent"` // ended in the limiter's queue
	PromptTokens     int64            `json:"prompt_tokens"`
	CompletionTokens int64            `json:"completion_tokens"`
	LastError        string           `json:"last_error,omitempty"`
	Limiter          *ratelimit.Stats `json:"limiter,omitempty"`
}

// New checks cfg and returns a Backend.
func New(cfg Config) (*Backend, error) {
	if cfg.Name == "" {
		return nil, errors.New("api backend: no name")
	}
	if cfg.BaseURL == "" {
		return nil, fmt.Errorf("backend %s: api.base_url is empty", cfg.Name)
	}
	if !strings.HasPrefix(cfg.BaseURL, "http://") && !strings.HasPrefix(cfg.BaseURL, "https://") {
		return nil, fmt.Errorf("backend %s: api.base_url %q must start with http:// or https://", cfg.Name, cfg.BaseURL)
	}
	if cfg.Model == "" {
		return nil, fmt.Errorf("backend %s: api.model is empty", cfg.Name)
	}
	if cfg.APIKey == "" && cfg.KeyEnv == "" {
		return nil, fmt.Errorf("backend %s: no API key", cfg.Name)
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	if cfg.MaxAnswerBytes <= 0 {
		cfg.MaxAnswerBytes = 32 << 20
	}
	b := &Backend{
		cfg:      cfg,
		endpoint: strings.TrimRight(cfg.BaseURL, "/") + "/chat/completions",
		client:   cfg.Client,
		clock:    cfg.Clock,
		log:      cfg.Logger.With().Str("backend", cfg.Name).Logger(),
		estimate: estimateTokens,
		table:    recogniser,
	}
	if b.client == nil {
		b.ownTrans = http.DefaultTransport.(*http.Transport).Clone()
		b.ownTrans.MaxIdleConnsPerHost = 64
		b.client = &http.Client{Transport: b.ownTrans}
	}
	b.stats.Backend, b.stats.Model = cfg.Name, cfg.Model
	b.key = cfg.APIKey
	return b, nil
}

// Name is the backend's config name.
func (b *Backend) Name() string { return b.cfg.Name }

// Limiter is the backend's rate limiter (nil if none).
func (b *Backend) Limiter() *ratelimit.Limiter { return b.cfg.Limiter }

// Health reports the last "unavailable" outcome (402: no credit) until a
// request succeeds again. It sends nothing: a probe would spend quota.
func (b *Backend) Health(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.unavailable
}

// Close drops idle connections.
func (b *Backend) Close() error {
	if b.ownTrans != nil {
		b.ownTrans.CloseIdleConnections()
	}
	return nil
}

// Stats returns the counters.
func (b *Backend) Stats() Stats {
	b.mu.Lock()
	s := b.stats
	b.mu.Unlock()
	if b.cfg.Limiter != nil {
		ls := b.cfg.Limiter.Stats()
		s.Limiter = &ls
	}
	return s
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatRequest struct {
	Model         string         `json:"model"`
	Messages      []chatMessage  `json:"messages"`
	Stream        bool           `json:"stream,omitempty"`
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
}

type apiError struct {
	Message string `json:"message"`
}

// content accepts a message content as a string or as a list of text parts.
type content string

func (c *content) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err == nil {
		*c = content(s)
		return nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(data, &parts); err != nil {
		return err
	}
	var sb strings.Builder
	for _, p := range parts {
		sb.WriteString(p.Text)
	}
	*c = content(sb.String())
	return nil
}

type chatResponse struct {
	Choices []struct {
		Message struct {
			Content content `json:"content"`
			Refusal string  `json:"refusal"`
		} `json:"message"`
		Delta struct {
			Content content `json:"content"`
			Refusal string  `json:"refusal"`
		} `json:"delta"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage    `json:"usage"`
	Error *apiError `json:"error"`
}

// Send posts the conversation (req.History then req.Prompt) and returns
// the answer. It waits for the rate limiter first; ctx ends the wait or
// the request.
func (b *Backend) Send(ctx context.Context, req gateway.Request) (gateway.Response, error) {
	body, err := b.requestBody(req)
	if err != nil {
		return gateway.Response{}, b.record(req, gateway.Permanent(b.cfg.Name, "task %s: encode request: %v", req.TaskID, err), nil)
	}
	key := b.apiKey()
	if key == "" {
		return gateway.Response{}, b.record(req, gateway.Classified(b.cfg.Name, gateway.ErrCredentials, "task %s: %s", req.TaskID, b.unsetKeyMessage()), nil)
	}
	var grant ratelimit.Grant
	if lim := b.cfg.Limiter; lim != nil {
		var err error
		if grant, err = lim.Acquire(ctx, b.estimate(req)); err != nil {
			var pe *ratelimit.PausedError
			if errors.As(err, &pe) {
				// The model is paused for longer than is worth holding a
				// worker: the task is parked until the condition that
				// paused it ends, and nothing was sent.
				now := b.clock.Now()
				until := pe.Until
				if until.Sub(now) < time.Second {
					until = now.Add(time.Second)
				}
				reason := fmt.Sprintf("task %s: not sent: the model is paused", req.TaskID)
				var f *gateway.Fault
				if pe.State == gateway.StateCapped {
					f = gateway.QuotaFault(b.cfg.Name, pe.Window, reason, now, until)
				} else {
					f = gateway.RateFault(b.cfg.Name, pe.Window, reason, now, until)
				}
				f.NotSent, f.Err = true, pe
				err = f
			} else {
				err = fmt.Errorf("%s: task %s: %w", b.cfg.Name, req.TaskID, err)
			}
			return gateway.Response{}, b.record(req, err, nil)
		}
	}
	start := b.clock.Now()
	rctx, cancel := ctx, context.CancelFunc(func() {})
	if b.cfg.Timeout > 0 {
		rctx, cancel = withClockTimeout(ctx, b.clock, b.cfg.Timeout)
	}
	defer cancel()

	hreq, err := http.NewRequestWithContext(rctx, http.MethodPost, b.endpoint, bytes.NewReader(body))
	if err != nil {
		return gateway.Response{}, b.record(req, gateway.Permanent(b.cfg.Name, "task %s: build request: %v", req.TaskID, b.redact(err.Error())), nil)
	}
	hreq.Header.Set("Authorization", "Bearer "+key.Reveal())
	hreq.Header.Set("Content-Type", "application/json")
	if b.cfg.Stream {
		hreq.Header.Set("Accept", "text/event-stream")
	} else {
		hreq.Header.Set("Accept", "application/json")
	}
	b.mu.Lock()
	b.stats.Requests++
	b.mu.Unlock()

	sent := b.clock.Now()
	resp, err := b.client.Do(hreq)
	if err != nil {
		return gateway.Response{}, b.record(req, b.transportError(ctx, rctx, req, "request", err), nil)
	}
	defer resp.Body.Close()
	if b.cfg.Limiter != nil {
		b.cfg.Limiter.ObserveSince(resp.Header, sent)
	}
	if resp.StatusCode != http.StatusOK {
		return gateway.Response{}, b.record(req, b.statusError(req, resp), nil)
	}
	var out gateway.Response
	if b.cfg.Stream && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		out, err = b.readStream(ctx, rctx, req, resp.Header, resp.Body)
	} else {
		out, err = b.readJSON(ctx, rctx, req, resp.Header, resp.Body)
	}
	if err != nil {
		// A cut or failed answer is not settled: the server counted its
		// prompt, and the estimate stays in the window once. One the
		// provider stopped itself (token limit, filter) it finished on its
		// side, and its usage is what it counted.
		stopped := out.Ended == gateway.EndTokenLimit || out.Ended == gateway.EndFiltered
		if stopped && b.cfg.Limiter != nil && out.PromptTokens+out.CompletionTokens > 0 {
			b.cfg.Limiter.Settle(grant, int(out.PromptTokens+out.CompletionTokens))
		}
		return out, b.record(req, err, nil)
	}
	if b.cfg.Limiter != nil {
		b.cfg.Limiter.Settle(grant, int(out.PromptTokens+out.CompletionTokens))
	}
	out.Duration = b.clock.Since(start)
	return out, b.record(req, nil, &out)
}

// estimateTokens is a request's tokens as a tokenizer would roughly count
// them (four characters a token) for the limiter's token window; the
// limiter learns how the server's count compares.
func estimateTokens(req gateway.Request) int {
	n := len(req.Prompt)
	for _, m := range req.History {
		n += len(m.Content)
	}
	return n/4 + 1
}

func (b *Backend) requestBody(req gateway.Request) ([]byte, error) {
	msgs := make([]chatMessage, 0, len(req.History)+1)
	for _, m := range req.History {
		msgs = append(msgs, chatMessage{Role: m.Role, Content: m.Content})
	}
	msgs = append(msgs, chatMessage{Role: "user", Content: req.Prompt})
	cr := chatRequest{Model: b.cfg.Model, Messages: msgs}
	if b.cfg.Stream {
		cr.Stream = true
		cr.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	return json.Marshal(cr)
}

// transportError classifies a failure to send or read: the caller's
// cancellation stays a cancellation; a deadline (ours or the caller's) and
// a broken connection are transient.
func (b *Backend) transportError(ctx, rctx context.Context, req gateway.Request, what string, err error) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return fmt.Errorf("%s: task %s: %s cancelled: %w", b.cfg.Name, req.TaskID, what, context.Canceled)
	}
	until := b.clock.Now().Add(gateway.TransientPause)
	if ctx.Err() != nil || rctx.Err() != nil {
		return gateway.TransientFault(b.cfg.Name, fmt.Sprintf("task %s: %s timed out", req.TaskID, what), until, context.DeadlineExceeded)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return gateway.TransientFault(b.cfg.Name, fmt.Sprintf("task %s: %s timed out", req.TaskID, what), until, context.DeadlineExceeded)
	}
	return gateway.TransientFault(b.cfg.Name, fmt.Sprintf("task %s: %s failed", req.TaskID, what), until, redactedError{err, b.apiKey().Reveal()})
}

// statusError turns a non-200 answer into the backend's condition (the
// recogniser table), pausing the model's limiter for a rate or quota
// window; an answer no row knows is the request's own fault.
func (b *Backend) statusError(req gateway.Request, resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if f := b.recognise(req, resp.StatusCode, resp.Header, raw, b.clock.Now()); f != nil {
		b.pauseFor(f)
		return f
	}
	return gateway.Permanent(b.cfg.Name, "task %s: HTTP %d%s", req.TaskID, resp.StatusCode, b.errorDetail(bytes.NewReader(raw)))
}

// pauseFor holds the model's limiter (every backend on the model) until a
// rate or quota fault ends.
func (b *Backend) pauseFor(f *gateway.Fault) {
	if b.cfg.Limiter == nil {
		return
	}
	if c := f.Condition.Class(); c == gateway.ClassRate || c == gateway.ClassQuota {
		b.cfg.Limiter.PauseFor(f.Condition.Until, f.Condition.State, f.Window)
	}
}

// errorDetail extracts a short, key-free message from an error body.
func (b *Backend) errorDetail(body io.Reader) string {
	raw, _ := io.ReadAll(io.LimitReader(body, 4096))
	msg := strings.TrimSpace(string(raw))
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(raw, &e) == nil && len(e.Error) > 0 {
		var ae apiError
		var s string
		switch {
		case json.Unmarshal(e.Error, &ae) == nil && ae.Message != "":
			msg = ae.Message
		case json.Unmarshal(e.Error, &s) == nil:
			msg = s
		}
	}
	if msg == "" {
		return ""
	}
	return ": " + b.clip(msg)
}

// clip makes server text fit for an error: key blanked out, one line,
// at most 200 characters.
func (b *Backend) clip(s string) string { return b.clipN(s, 200) }

func (b *Backend) clipN(s string, n int) string {
	s = b.redact(s) // before cutting, so no piece of the key survives
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		s = string(r[:n]) + "…"
	}
	return s
}

func (b *Backend) redact(s string) string {
	return redactKey(s, b.apiKey().Reveal())
}

// redactKey blanks out key in s, and also a piece of it at either end of
// s, where a read limit may have cut the key in two.
func redactKey(s, key string) string {
	if key == "" {
		return s
	}
	s = strings.ReplaceAll(s, key, "[redacted]")
	const minPiece = 4
	for n := len(key) - 1; n >= minPiece; n-- {
		if strings.HasSuffix(s, key[:n]) {
			s = s[:len(s)-n] + "[redacted]"
			break
		}
	}
	for n := len(key) - 1; n >= minPiece; n-- {
		if strings.HasPrefix(s, key[len(key)-n:]) {
			s = "[redacted]" + s[n:]
			break
		}
	}
	return s
}

// redactedError hides the key in a wrapped cause's text while keeping it
// reachable for errors.Is/As.
type redactedError struct {
	err error
	key string
}

func (e redactedError) Error() string { return redactKey(e.err.Error(), e.key) }
func (e redactedError) Unwrap() error { return e.err }

// readJSON reads a whole (non-streamed) answer.
func (b *Backend) readJSON(ctx, rctx context.Context, req gateway.Request, h http.Header, body io.Reader) (gateway.Response, error) {
	raw, err := io.ReadAll(io.LimitReader(body, b.cfg.MaxAnswerBytes+1))
	if err != nil {
		if ctx.Err() != nil || rctx.Err() != nil {
			return gateway.Response{}, b.transportError(ctx, rctx, req, "reading the answer", err)
		}
		return gateway.Response{}, &gateway.Error{Backend: b.cfg.Name, Kind: gateway.ErrTransient,
			Msg: fmt.Sprintf("task %s: answer cut off after %d bytes", req.TaskID, len(raw)), Err: redactedError{err, b.apiKey().Reveal()}}
	}
	if int64(len(raw)) > b.cfg.MaxAnswerBytes {
		return gateway.Response{}, gateway.Transient(b.cfg.Name, "task %s: answer larger than %d bytes", req.TaskID, b.cfg.MaxAnswerBytes)
	}
	var cr chatResponse
	if err := json.Unmarshal(raw, &cr); err != nil {
		trimmed := bytes.TrimSpace(raw)
		if len(trimmed) == 0 {
			return gateway.Response{}, gateway.Transient(b.cfg.Name, "task %s: empty answer (no body)", req.TaskID)
		}
		if trimmed[0] == '{' && !json.Valid(trimmed) {
			return gateway.Response{}, gateway.Transient(b.cfg.Name, "task %s: answer is truncated or malformed JSON (%d bytes)", req.TaskID, len(raw))
		}
		return gateway.Response{}, gateway.Transient(b.cfg.Name, "task %s: answer is not JSON (%d bytes, starts %q)", req.TaskID, len(raw), b.clipN(string(trimmed), 40))
	}
	if cr.Error != nil {
		return gateway.Response{}, b.errorInAnswer(req, h, raw)
	}
	if len(cr.Choices) == 0 {
		return gateway.Response{}, gateway.Transient(b.cfg.Name, "task %s: empty answer (no choices)", req.TaskID)
	}
	text := string(cr.Choices[0].Message.Content)
	out := gateway.Response{Content: text, Ended: endingOf(cr.Choices[0].FinishReason)}
	if cr.Usage != nil {
		out.PromptTokens, out.CompletionTokens = cr.Usage.PromptTokens, cr.Usage.CompletionTokens
	}
	if out.Ended != gateway.EndComplete {
		// Stopped by the provider (token limit, filter), perhaps with
		// nothing said at all: never an answer, and not a passing fault.
		return out, b.stopped(req, out)
	}
	if strings.TrimSpace(text) == "" {
		return gateway.Response{}, b.saidNothing(req, cr.Choices[0].Message.Refusal, cr.Choices[0].FinishReason)
	}
	return out, nil
}

// saidNothing is the error of an answer the model ended with no text: a
// bad answer (asked elsewhere, on the validation budget), not a passing
// fault asked again without end. A refusal the provider gives apart from
// the content is quoted.
func (b *Backend) saidNothing(req gateway.Request, refusal, finishReason string) error {
	if r := strings.TrimSpace(refusal); r != "" {
		return gateway.Classified(b.cfg.Name, gateway.ErrBadAnswer, "task %s: the model refused: %q", req.TaskID, b.clipN(r, 200))
	}
	return gateway.Classified(b.cfg.Name, gateway.ErrBadAnswer, "task %s: empty answer (no content, finish_reason %q)", req.TaskID, finishReason)
}

// endingOf reads a choice's finish_reason: a whole JSON body or a
// stream's [DONE] is the provider's own end of the answer unless the
// reason says it stopped the answer itself.
func endingOf(finishReason string) gateway.Ending {
	switch strings.ToLower(finishReason) { // Gemini's own API writes MAX_TOKENS, SAFETY
	case "length", "max_tokens", "model_length":
		return gateway.EndTokenLimit
	case "content_filter", "safety", "recitation":
		return gateway.EndFiltered
	}
	return gateway.EndComplete
}

// stopped is the error of an answer the provider stopped (gateway.Whole
// words it), with the task it concerns.
func (b *Backend) stopped(req gateway.Request, out gateway.Response) error {
	return fmt.Errorf("task %s: %w", req.TaskID, gateway.Whole(b.cfg.Name, out))
}

// errorInAnswer reads an error object in a 200 (a proxy's way to fail) by
// its code or type, as the table reads a status.
func (b *Backend) errorInAnswer(req gateway.Request, h http.Header, raw []byte) error {
	f := b.recognise(req, http.StatusOK, h, raw, b.clock.Now())
	if f == nil {
		return gateway.Permanent(b.cfg.Name, "task %s: provider error in answer%s", req.TaskID, b.errorDetail(bytes.NewReader(raw)))
	}
	f.Condition.Reason = strings.Replace(f.Condition.Reason, "HTTP 200", "provider error in answer", 1)
	b.pauseFor(f)
	return f
}

// record counts the outcome, logs it and returns err unchanged.
func (b *Backend) record(req gateway.Request, err error, out *gateway.Response) error {
	kind := gateway.Kind(err)
	if errors.Is(err, gateway.ErrNotSent) && kind != "rate_limited" {
		kind = "not_sent"
	}
	b.mu.Lock()
	switch kind {
	case "not_sent":
		b.stats.NotSent++
	case "":
		b.stats.Succeeded++
		b.stats.PromptTokens += out.PromptTokens
		b.stats.CompletionTokens += out.CompletionTokens
		b.unavailable = nil
	case "rate_limited":
		b.stats.RateLimited++
	case "cancelled":
		b.stats.Cancelled++
	case "transient":
		b.stats.Transient++
	case "unavailable", "credentials":
		b.stats.Unavailable++
		b.unavailable = err
	default:
		b.stats.Permanent++
	}
	if err != nil && kind != "cancelled" && kind != "not_sent" {
		b.stats.LastError = b.redact(err.Error())
	}
	b.mu.Unlock()

	switch kind {
	case "":
		b.log.Debug().Str("event", "gateway.api.answered").Str("task", req.TaskID).
			Int64("prompt_tokens", out.PromptTokens).Int64("completion_tokens", out.CompletionTokens).
			Dur("took", out.Duration).Msg("answer")
	case "cancelled", "not_sent":
		b.log.Debug().Str("event", "gateway.api."+kind).Str("task", req.TaskID).Err(err).Msg("request ended unsent or cancelled")
	default:
		b.log.Warn().Str("event", "gateway.api."+kind).Str("task", req.TaskID).
			Str("error", b.redact(err.Error())).Msg("request failed")
	}
	return err
}

func (b *Backend) keyEnvName() string {
	if b.cfg.KeyEnv == "" {
		return "the configured key"
	}
	return b.cfg.KeyEnv
}

// withClockTimeout is ctx ended by clock after d. clockwork.WithTimeout
// takes a real timer for any clock but its own fake type, so under a
// wrapped fake clock (fano simulate's) the deadline fell in wall time; and
// clockwork's own fake deadline is relayed by a goroutine of its own.
// Here the clock's callback cancels ctx itself.
func withClockTimeout(ctx context.Context, clock clockwork.Clock, d time.Duration) (context.Context, context.CancelFunc) {
	rctx, cancel := context.WithCancelCause(ctx)
	t := clock.AfterFunc(d, func() { cancel(context.DeadlineExceeded) })
	return rctx, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}
