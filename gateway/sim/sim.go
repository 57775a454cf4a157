// Package sim is fano's built-in simulated LLM backend: deterministic
// answers in each task type's format, latency on an injected clock, the
// service's own hourly and deep-mode limits, and injected faults. It lets
// `fano run` and every test work offline.
package sim

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"fano/gateway"
)

// Config describes one simulated LLM service.
type Config struct {
	Name           string
	Style          string        // "chatgpt" | "gemini" | "claude" | "api": tone of the answers
	Seed           int64         // answers and faults are a function of the seed and the request
	Latency        time.Duration // per request, on the injected clock
	Jitter         time.Duration // + uniform [0, Jitter), seeded per request
	HourlyLimit    int           // requests per hour window (0 = unlimited)
	DeepDailyLimit int           // deep-mode requests per day window (0 = deep mode unavailable)
	// Windows start at minute HourlyResetMinute of every hour and at
	// DailyResetHour:00 every day, both in UTC.
	HourlyResetMinute, DailyResetHour int
	// Injected faults, each a probability in [0,1]; their sum is the
	// chance that an attempt fails in some way.
	TimeoutRate, TransientRate, MalformedRate float64
	// OpenFacts: insights are extracted from the open fact space (see
	// open.go), thousands of distinct statements, not from the few
	// built-in facts: for runs long enough to exhaust those (fano simulate).
	OpenFacts bool
}

// Stats counts what a Backend has done since New.
type Stats struct {
	Requests    int64 // Send calls that reached the service (ctx not yet done)
	Answered    int64 // Sends that returned a Response, malformed ones included
	RateLimited int64 // refused with a quota window's *gateway.Fault (no quota used)
	Unavailable int64 // refused because the backend was unavailable (a person's condition) or closed
	Cancelled   int64 // ctx done while waiting out the latency
	Deep        int64 // deep-mode requests admitted
	// Injected faults by kind.
	Timeouts  int64 // hung until ctx was done
	Transient int64 // failed with gateway.ErrTransient
	Malformed int64 // answered with a cut-off or off-format text
}

// Backend is a simulated LLM; it implements gateway.Backend and is safe
// for concurrent use.
type Backend struct {
	cfg   Config
	clock clockwork.Clock

	mu    sync.Mutex
	stats Stats
	// person is a condition only a person ends (login, credits,
	// credentials, challenge) set by SetCondition; "" state: none.
	person    gateway.Condition
	closed    bool
	hour, day window
	// faultRuns counts consecutive faulted attempts per request, so that a
	// retry of a faulted request draws its fault afresh; entries go away on
	// the first attempt that is not faulted.
	faultRuns map[[2]uint64]uint64
	inject    func(ctx context.Context, req gateway.Request) error
	refusal   func(req gateway.Request) (string, bool)
	onWait    func(ctx context.Context, waiting bool)
}

// OnWait makes Send call f(true) just before it blocks on the clock or on
// ctx (the answer's latency, a hang) and f(false) once it wakes: the
// simulator moves its virtual clock only while every call waits so.
func (b *Backend) OnWait(f func(ctx context.Context, waiting bool)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.onWait = f
}

// waiting reports a blocking wait to the OnWait hook and returns the
// call that ends it.
func (b *Backend) waiting(ctx context.Context) func() {
	b.mu.Lock()
	f := b.onWait
	b.mu.Unlock()
	if f == nil {
		return func() {}
	}
	f(ctx, true)
	return func() { f(ctx, false) }
}

// Inject makes every Send first call f (nil: no more injection): a
// non-nil error is returned as the answer, after the request was counted.
// f may block (a hang) until ctx is done. Tests script faults with it.
func (b *Backend) Inject(f func(ctx context.Context, req gateway.Request) error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inject = f
}

// Refuse makes Send answer with f's text instead of the simulated answer
// when f says so (replace false: answer normally): a site that refuses,
// or answers nothing, as an answer.
func (b *Backend) Refuse(f func(req gateway.Request) (text string, replace bool)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refusal = f
}

var _ gateway.Backend = (*Backend)(nil)

type fault int

const (
	noFault fault = iota
	timeoutFault
	transientFault
	malformedFault
)

// faultSalt separates the fault stream from the answer stream.
const faultSalt = 0x5eed_fa17_0000_0001

// New returns a simulated backend; a nil clock means the real clock.
func New(cfg Config, clock clockwork.Clock) *Backend {
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	if cfg.Name == "" {
		cfg.Name = "sim"
	}
	return &Backend{cfg: cfg, clock: clock, faultRuns: map[[2]uint64]uint64{}}
}

// Name returns the configured name.
func (b *Backend) Name() string { return b.cfg.Name }

// Stats returns a snapshot of the counters.
func (b *Backend) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stats
}

// SetUnavailable makes every Send and Health fail behind a login wall
// (StateLogin, gateway.ErrUnavailable) with reason until it is called
// again with "".
func (b *Backend) SetUnavailable(reason string) {
	if reason == "" {
		b.SetCondition(gateway.Condition{})
		return
	}
	b.SetCondition(gateway.Condition{State: gateway.StateLogin, Reason: reason})
}

// SetCondition puts the backend in c, a condition only a person ends
// (login, credits, credentials, challenge): every Send and Health fail
// with c as a *gateway.Fault, as a real backend's recogniser reads it,
// until it is called again with the zero Condition.
func (b *Backend) SetCondition(c gateway.Condition) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.person = c
}

// Condition is the person's condition set by SetCondition, else ready.
func (b *Backend) Condition() gateway.Condition {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.person.State == "" {
		return gateway.Condition{State: gateway.StateReady}
	}
	return b.person
}

var _ gateway.Conditioner = (*Backend)(nil)

// Health reports a login wall set by SetUnavailable, or a closed backend.
func (b *Backend) Health(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.unavailableLocked()
}

// Close makes later requests fail as unavailable.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return nil
}

// Reopen undoes Close: a simulated service outlives the fano that used it
// (`fano simulate` restarts fano on the same backends, quota windows and
// all).
func (b *Backend) Reopen() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = false
}

func (b *Backend) unavailableLocked() error {
	switch {
	case b.closed:
		return gateway.Unavailable(b.cfg.Name, "backend closed")
	case b.person.State == "":
		return nil
	}
	reason := b.person.Reason
	if b.person.State == gateway.StateLogin && reason != "login required" {
		reason = "login required: " + reason
	}
	return gateway.PersonFault(b.cfg.Name, b.person.State, reason, b.person.Until)
}

// Send answers req after the configured latency, or refuses it: rate
// limited, unavailable, or an injected fault. It returns an error wrapping
// ctx.Err() once ctx is done.
func (b *Backend) Send(ctx context.Context, req gateway.Request) (gateway.Response, error) {
	if err := ctx.Err(); err != nil {
		return gateway.Response{}, fmt.Errorf("sim %s: %w", b.cfg.Name, err)
	}
	start := b.clock.Now()
	seed := b.seed(req)

	b.mu.Lock()
	b.stats.Requests++
	if err := b.unavailableLocked(); err != nil {
		b.stats.Unavailable++
		b.mu.Unlock()
		return gateway.Response{}, err
	}
	if inject := b.inject; inject != nil {
		b.mu.Unlock()
		if err := inject(ctx, req); err != nil {
			return gateway.Response{}, err
		}
		b.mu.Lock()
	}
	if f := b.admitLocked(start, req.DeepMode); f != nil {
		b.stats.RateLimited++
		b.mu.Unlock()
		return gateway.Response{}, f
	}
	if req.DeepMode {
		b.stats.Deep++
	}
	fr := rand.New(rand.NewPCG(seed[0]^faultSalt, seed[1]+b.faultRuns[seed]))
	f := b.drawFault(fr)
	switch f {
	case noFault:
		delete(b.faultRuns, seed)
	case timeoutFault:
		b.stats.Timeouts++
	case transientFault:
		b.stats.Transient++
	case malformedFault:
		b.stats.Malformed++
	}
	if f != noFault {
		b.faultRuns[seed]++
	}
	b.mu.Unlock()

	if f == timeoutFault {
		woke := b.waiting(ctx)
		<-ctx.Done()
		woke()
		return gateway.Response{}, fmt.Errorf("sim %s: no answer (simulated hang): %w", b.cfg.Name, ctx.Err())
	}

	if d := b.latency(fr); d > 0 {
		// The wait ends inside the clock's callback, not in this goroutine
		// once it runs again: a simulator that moves the clock when every
		// call waits must never see this call waiting with its answer due.
		wake := sync.OnceFunc(b.waiting(ctx))
		answered := make(chan struct{})
		t := b.clock.AfterFunc(d, func() {
			wake()
			close(answered)
		})
		select {
		case <-answered:
		case <-ctx.Done():
			t.Stop()
			wake()
			b.mu.Lock()
			b.stats.Cancelled++
			b.mu.Unlock()
			return gateway.Response{}, fmt.Errorf("sim %s: waiting for the answer: %w", b.cfg.Name, ctx.Err())
		}
	}

	if f == transientFault {
		return gateway.Response{}, gateway.TransientFault(b.cfg.Name, "simulated server error, please try again", b.clock.Now().Add(gateway.TransientPause), nil)
	}

	format := formatFor(req.TaskType)
	if f := openFormat(req.TaskType); f != nil && b.cfg.OpenFacts {
		format = f
	}
	content := format(req, rand.New(rand.NewPCG(seed[0], seed[1])), b.cfg.Style)
	if f == malformedFault {
		content = malform(content, fr)
	}
	b.mu.Lock()
	if b.refusal != nil {
		if r, ok := b.refusal(req); ok {
			content = r
		}
	}
	b.stats.Answered++
	b.mu.Unlock()

	promptLen := len(req.Prompt)
	for _, m := range req.History {
		promptLen += len(m.Content)
	}
	return gateway.Response{
		Content:          content,
		Ended:            gateway.EndComplete,
		ConversationURL:  b.conversationURL(req, seed),
		Duration:         b.clock.Since(start),
		PromptTokens:     int64((promptLen + 3) / 4),
		CompletionTokens: int64((len(content) + 3) / 4),
	}, nil
}

// seed hashes what identifies a request: the backend's seed and name, the
// task, the prompt and the turn (history length).
func (b *Backend) seed(req gateway.Request) [2]uint64 {
	h := fnv.New128a()
	var n [8]byte
	num := func(x uint64) {
		binary.LittleEndian.PutUint64(n[:], x)
		h.Write(n[:])
	}
	str := func(s string) {
		num(uint64(len(s)))
		h.Write([]byte(s))
	}
	num(uint64(b.cfg.Seed))
	str(b.cfg.Name)
	str(req.TaskID)
	str(req.Prompt)
	num(uint64(len(req.History)))
	sum := h.Sum(nil)
	return [2]uint64{binary.LittleEndian.Uint64(sum[:8]), binary.LittleEndian.Uint64(sum[8:])}
}

func (b *Backend) drawFault(r *rand.Rand) fault {
	u := r.Float64()
	switch c := b.cfg; {
	case u < c.TimeoutRate:
		return timeoutFault
	case u < c.TimeoutRate+c.TransientRate:
		return transientFault
	case u < c.TimeoutRate+c.TransientRate+c.MalformedRate:
		return malformedFault
	}
	return noFault
}

func (b *Backend) latency(r *rand.Rand) time.Duration {
	d := b.cfg.Latency
	if b.cfg.Jitter > 0 {
		d += time.Duration(r.Int64N(int64(b.cfg.Jitter)))
	}
	return d
}

// conversationURL keeps the conversation the request continues, or names a
// new one after the task.
func (b *Backend) conversationURL(req gateway.Request, seed [2]uint64) string {
	if req.ConversationURL != "" {
		return req.ConversationURL
	}
	id := seed[0]
	if req.TaskID != "" {
		h := fnv.New64a()
		h.Write([]byte(req.TaskID))
		id = h.Sum64()
	}
	return "sim://" + b.cfg.Name + "/c/" + strconv.FormatUint(id, 16)
}
