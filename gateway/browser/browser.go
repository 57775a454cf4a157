// Package browser is the gateway to chat web sites (ChatGPT, Gemini,
// Claude, ...) through a real Chromium driven by playwright-go.
//
// Everything site-specific lives in a Profile (YAML; built-in ones for
// chatgpt, gemini and claude, user ones from the config's
// site_profiles_file). Each backend has its own persistent Chromium profile
// directory (<data-dir>/browser/<name>, mode 0700) that keeps the login a
// person made once with `fano login <name>`.
//
// A Send navigates to the task's own conversation on this backend (or the
// start page, priming a new conversation with the task's last turns), sets
// deep mode, attaches images, types the prompt, clicks send and reads the
// page at each change until the answer ends (answer.go). How it ended is a
// typed fact on the response (gateway.Response.Ended), and only an answer
// whose completion the site signalled (the profile's `complete` selector,
// or, for a profile without one, the "generating" signal gone and the text
// stable for the profile's stable time) ends complete; the gateway host
// records nothing else. An answer cut without its signal is read again from
// its conversation once; an error turn is asked again with the site's own
// Retry control (profile error_turn) before it ends as such; an answer
// that stalls is stopped and ends cut.
//
// Every reading of the page goes through one table of page states
// (pagestate.go): a bot-check page, a login wall or login page, guest
// mode, a rate or cap notice (with the time read from its text) and an
// error turn, each with the condition it puts the backend in. A page that
// needs a person is a *gateway.Fault in that condition (not sent: no quota
// spent), the browser is closed so that `fano login` can open the profile,
// and the backend checks itself every RecheckInterval. A conversation that
// vanished is gateway.ErrConversationGone; an answer that never starts or
// loses its page is gateway.ErrHung within seconds. When ctx ends first,
// the answer is stopped (left running when fano shuts down, to be read
// from the page after the restart), the page is dropped and the error
// wraps ctx.Err(); the browser stays ready for the next request.
// Condition reports the state (login, challenge, capped, stalled, page
// gone) for status and routing.
package browser

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/playwright-community/playwright-go"
	"github.com/rs/zerolog"

	"fano/gateway"
)

// Config is one browser backend.
type Config struct {
	// Name is the backend's name (logs, errors, the profile directory).
	Name string
	// Profile is the site profile (see LoadProfiles, Profile.WithBaseURL).
	Profile *Profile
	// ProfileDir is the persistent Chromium profile, normally
	// ProfileDir(dataDir, Name). Created with mode 0700.
	ProfileDir string
	Headless   bool
	// Executable is the Chromium binary; default /usr/bin/chromium.
	Executable string
	// ExtraArgs are added to Chromium's command line (tests add a
	// --host-resolver-rules that keeps Chromium off the network).
	ExtraArgs []string
	// RecycleAfterRequests / RecycleAfter restart the browser (the profile,
	// and with it the login, stays) after that many requests or that long;
	// 0 = never. A browser's memory grows over days.
	RecycleAfterRequests int
	RecycleAfter         time.Duration
	// RecycleAboveBytes restarts the browser before a request once it and
	// its child processes use more memory than this; 0 = never.
	RecycleAboveBytes int64
	// AcceptDegraded are the task types that take an answer the site
	// gives with another model after a degraded notice ("*": all); the
	// model is recorded in the response. Others wait for the limit to
	// reset, as for a usage cap.
	AcceptDegraded []string
	// RequestTimeout caps one Send (0: only the caller's ctx).
	RequestTimeout time.Duration
	// ActionTimeout bounds one click, fill or upload; default 30 s.
	ActionTimeout time.Duration
	// RecheckInterval is how often Health (and Send) try again after the
	// backend went down (start page check failed, login wall); default 1
	// min. A login that came back is available after at most this long.
	RecheckInterval time.Duration
	// PrimeTurns is how many earlier turns of a task's history a new
	// conversation on this backend is primed with (a task that moved here,
	// or whose conversation vanished); default 6, negative: none.
	// PrimeChars bounds each primed message; default 2000.
	PrimeTurns int
	PrimeChars int
	// StartTimeout bounds the start-up check in New; default the profile's
	// load timeout plus a minute for launching.
	StartTimeout time.Duration
	// Clock gives the wall time for reading "try again at 3:45 PM" and for
	// RecycleAfter / RecheckInterval; default the real clock. Page polling
	// always runs on real time (it waits for a real browser).
	Clock  clockwork.Clock
	Logger zerolog.Logger
}

// Stats counts what a backend did (for status pages and tests).
type Stats struct {
	Launches int // browser starts, including recycles
	Recycles int
	Requests int // requests that reached the browser
}

// Backend is a gateway.Backend driving one chat site in one browser
// profile. Requests are served one at a time (a page is one conversation
// at a time); Send, Health, Stats and Close are safe for concurrent use.
// Health never waits for a running Send.
type Backend struct {
	cfg   Config
	p     *Profile
	name  string
	clock clockwork.Clock
	// The last memory reading (MemoryBytes), reused while fresh.
	memMu    sync.Mutex
	memBytes int64
	memAt    time.Time
	log      zerolog.Logger

	life context.Context // cancelled by Close
	kill context.CancelFunc

	// sem is held by the one goroutine using the browser (Send, a
	// recheck, Close); it owns the fields up to mu.
	sem      chan struct{}
	pw       *playwright.Playwright
	release  func()
	bc       playwright.BrowserContext
	page     playwright.Page
	launched time.Time
	served   int    // requests since launch
	lastURL  string // the page's URL at the last reading of an answer
	degraded string // the current request was answered by another model (noticeOutcome.model)
	taskType string // the current request's task type
	// continuing: the current request continues a conversation (a
	// notice that the conversation is full then means a new one).
	continuing bool
	// noticeAccepted is the notice text the current request went on
	// after (a degraded model, a message that is no limit).
	noticeAccepted string
	// addressed is told the address of the current request's new
	// conversation once the page shows one of its own (see noteAddress);
	// nil once told, or when the request continues a conversation.
	addressed func(url string)

	mu        sync.Mutex // guards the fields below
	down      error      // why the backend cannot take requests; nil = up
	downState gateway.State
	checked   time.Time // when down was last decided
	// cond is a passing condition of an up backend (capped, stalled, page
	// gone); it ends at its Until or with the next answer.
	cond   gateway.Condition
	closed bool
	stats  Stats
	// up is closed when a down backend comes up again; rechecking says
	// the goroutine that checks a down backend every RecheckInterval runs.
	up         chan struct{}
	rechecking bool
}

var (
	_ gateway.Backend        = (*Backend)(nil)
	_ gateway.Conditioner    = (*Backend)(nil)
	_ gateway.MemoryReporter = (*Backend)(nil)
	_ gateway.Addresser      = (*Backend)(nil)
)

// AddressesConversations implements gateway.Addresser: a chat site gives
// each new conversation its address.
func (b *Backend) AddressesConversations() bool { return true }

var errClosed = errors.New("backend closed")

// New starts a backend: it launches Chromium on the profile directory and
// checks the start page (login wall, the profile's startup selectors).
// New fails only for an invalid Config; when the browser cannot start or
// the start page does not match the profile, it returns a backend that is
// down: Health and Send return that error (gateway.ErrUnavailable, naming
// the backend and the selector) and retry every RecheckInterval, while the
// rest of fano runs.
func New(ctx context.Context, cfg Config) (*Backend, error) {
	if strings.TrimSpace(cfg.Name) == "" {
		return nil, errors.New("browser backend: no name")
	}
	if cfg.Profile == nil {
		return nil, fmt.Errorf("browser backend %s: no site profile", cfg.Name)
	}
	if cfg.ProfileDir == "" {
		return nil, fmt.Errorf("browser backend %s: no profile directory", cfg.Name)
	}
	if dir, err := filepath.Abs(cfg.ProfileDir); err == nil {
		cfg.ProfileDir = dir // Chromium wants an absolute path
	}
	if cfg.ActionTimeout <= 0 {
		cfg.ActionTimeout = 30 * time.Second
	}
	if cfg.RecheckInterval <= 0 {
		cfg.RecheckInterval = time.Minute
	}
	if cfg.PrimeTurns == 0 {
		cfg.PrimeTurns = defaultPrimeTurns
	}
	if cfg.PrimeChars <= 0 {
		cfg.PrimeChars = defaultPrimeChars
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = cfg.Profile.loadTimeout() + time.Minute
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	b := &Backend{
		cfg: cfg, p: cfg.Profile, name: cfg.Name, clock: cfg.Clock,
		log: cfg.Logger.With().Str("backend", cfg.Name).Logger(),
		sem: make(chan struct{}, 1), up: make(chan struct{}),
	}
	close(b.up) // up until a check says otherwise
	b.life, b.kill = context.WithCancel(context.Background())
	b.sem <- struct{}{}
	defer func() { <-b.sem }()
	ctx, stop := b.bind(ctx)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	_ = b.check(ctx)
	return b, nil
}

// Name implements gateway.Backend.
func (b *Backend) Name() string { return b.name }

// Profile returns the site profile in use.
func (b *Backend) Profile() *Profile { return b.p }

// Stats returns the counters.
func (b *Backend) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stats
}

// Health reports whether the backend can take requests: nil, or the
// gateway.ErrUnavailable error that put it down (login required, a
// selector that matches nothing, no browser). Once RecheckInterval has
// passed it checks the site again, unless a request is using the browser.
func (b *Backend) Health(ctx context.Context) error {
	b.mu.Lock()
	closed, down, checked := b.closed, b.down, b.checked
	b.mu.Unlock()
	switch {
	case closed:
		return gateway.Unavailable(b.name, "backend closed")
	case down == nil:
		return nil
	case b.clock.Since(checked) < b.cfg.RecheckInterval:
		return down
	}
	select {
	case b.sem <- struct{}{}:
	default:
		return down
	}
	defer func() { <-b.sem }()
	if b.isClosed() {
		return gateway.Unavailable(b.name, "backend closed")
	}
	ctx, stop := b.bind(ctx)
	defer stop()
	return b.check(ctx)
}

func (b *Backend) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// Close stops the browser (an in-flight Send ends at once with
// gateway.ErrUnavailable). The profile directory stays.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	b.kill()
	b.sem <- struct{}{} // wait for the user of the browser; never released
	err := b.closeBrowser()
	if b.release != nil {
		b.release()
		b.release = nil
	}
	return err
}

// Send implements gateway.Backend: one prompt, one answer. It waits for the
// browser if another request is using it.
func (b *Backend) Send(ctx context.Context, req gateway.Request) (gateway.Response, error) {
	started := time.Now()
	images, err := b.checkRequest(req)
	if err != nil {
		return gateway.Response{}, err
	}
	if b.cfg.RequestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.cfg.RequestTimeout)
		defer cancel()
	}
	ctx, stop := b.bind(ctx)
	defer stop()
	select {
	case b.sem <- struct{}{}:
	case <-ctx.Done():
		return gateway.Response{}, b.ctxErr(ctx, "waiting for the browser")
	}
	defer func() { <-b.sem }()
	if b.isClosed() {
		return gateway.Response{}, gateway.Unavailable(b.name, "backend closed")
	}
	if err := b.ready(ctx); err != nil {
		return gateway.Response{}, err
	}
	b.served++
	b.mu.Lock()
	b.stats.Requests++
	b.mu.Unlock()
	b.degraded, b.noticeAccepted = "", ""
	resp, err := b.exchange(ctx, req, images)
	if err != nil {
		return gateway.Response{}, err
	}
	if resp.Ended == gateway.EndComplete {
		b.setCondition(gateway.Condition{})
	}
	resp.Duration = time.Since(started)
	resp.Model = b.degraded
	return resp, nil
}

// checkRequest rejects what no retry can fix, before using any quota.
func (b *Backend) checkRequest(req gateway.Request) ([]string, error) {
	if strings.TrimSpace(req.Prompt) == "" {
		return nil, gateway.Permanent(b.name, "task %s: empty prompt", req.TaskID)
	}
	if req.DeepMode && !b.p.HasDeepMode() {
		return nil, deepModeFailure(b.name, req.TaskID, b.p.Name)
	}
	if req.ConversationURL != "" {
		u, err := url.Parse(req.ConversationURL)
		if err != nil || u.Scheme+"://"+u.Host != b.p.origin() {
			return nil, gateway.Permanent(b.name, "task %s: conversation URL %q is not on %s", req.TaskID, req.ConversationURL, b.p.origin())
		}
	}
	if len(req.Images) > 0 && b.p.Selectors.FileInput.Empty() {
		return nil, gateway.Permanent(b.name, "task %s: images attached but site profile %s has no selectors.file_input", req.TaskID, b.p.Name)
	}
	var images []string
	for _, img := range req.Images {
		abs, err := filepath.Abs(img)
		if err == nil {
			_, err = os.Stat(abs)
		}
		if err != nil {
			return nil, gateway.Permanent(b.name, "task %s: image %s: %v", req.TaskID, img, err)
		}
		images = append(images, abs)
	}
	return images, nil
}

// bind ties ctx to the backend's life: Close cancels it with errClosed.
func (b *Backend) bind(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(b.life, func() { cancel(errClosed) })
	return ctx, func() { stop(); cancel(nil) }
}

// ctxErr is the error for a ctx that ended: it wraps ctx.Err() (deadline:
// transient; cancelled: the caller is shutting down), or says the backend
// was closed.
func (b *Backend) ctxErr(ctx context.Context, doing string) error {
	if errors.Is(context.Cause(ctx), errClosed) {
		return gateway.Unavailable(b.name, "backend closed while %s", doing)
	}
	return fmt.Errorf("%s: %s: %w", b.name, doing, ctx.Err())
}

// fail classifies an error of a browser step: ctx's end wins; anything
// else is transient (a retry on a fresh page may work) and drops the page.
func (b *Backend) fail(ctx context.Context, doing string, err error) error {
	if ctx.Err() != nil {
		return b.ctxErr(ctx, doing)
	}
	b.dropPage()
	return &gateway.Error{Backend: b.name, Kind: gateway.ErrTransient, Msg: doing, Err: err}
}

// setDown records why the backend cannot take requests (nil: it can);
// the error is always of kind unavailable.
func (b *Backend) setDown(err error) error {
	return b.setDownAs(gateway.StateDown, err)
}

// setDownAs is setDown with the state status pages show.
func (b *Backend) setDownAs(state gateway.State, err error) error {
	if err != nil && !errors.Is(err, gateway.ErrUnavailable) {
		var ge *gateway.Error
		if errors.As(err, &ge) {
			err = &gateway.Error{Backend: b.name, Kind: gateway.ErrUnavailable, Msg: ge.Msg, Err: ge.Err}
		} else {
			err = &gateway.Error{Backend: b.name, Kind: gateway.ErrUnavailable, Msg: "browser", Err: err}
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if (b.down == nil) != (err == nil) {
		if err != nil {
			b.log.Warn().Str("event", "gateway.browser.down").Err(err).Msg("browser backend unavailable")
			b.up = make(chan struct{})
		} else {
			b.log.Info().Str("event", "gateway.browser.up").Msg("browser backend available")
			close(b.up)
		}
	}
	if err != nil && !b.rechecking && !b.closed {
		b.rechecking = true
		go b.recheckLoop()
	}
	b.down, b.downState = err, state
	b.checked = b.clock.Now()
	if err == nil {
		b.downState = ""
	}
	return err
}

// recheckLoop checks a down backend every RecheckInterval (on the
// backend's clock) until it is up or closed: a login that came back is
// available within one interval, whether or not anyone asks. A check
// loads the start page; it sends no prompt and is not a request.
func (b *Backend) recheckLoop() {
	for {
		select {
		case <-b.clock.After(b.cfg.RecheckInterval):
		case <-b.life.Done():
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), b.cfg.StartTimeout)
		_ = b.Health(ctx)
		cancel()
		b.mu.Lock()
		if b.down == nil || b.closed {
			b.rechecking = false // decided under mu: a new down starts a new loop
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
	}
}

// upSignal returns a channel closed when the backend is next up (at once
// if it is up now).
func (b *Backend) upSignal() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.up
}

// setCondition records a passing condition of an up backend (zero: none).
func (b *Backend) setCondition(c gateway.Condition) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cond = c
}

// Condition implements gateway.Conditioner: down (login wall, a profile
// that does not match the site, no browser) with the time of the next
// check, or a passing condition (usage cap until the time the site named,
// a stalled answer, a page that went away), else ready.
func (b *Backend) Condition() gateway.Condition {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	switch {
	case b.closed:
		return gateway.Condition{State: gateway.StateDown, Reason: "backend closed"}
	case b.down != nil:
		c := gateway.Condition{State: b.downState, Reason: b.down.Error()}
		var f *gateway.Fault
		if errors.As(b.down, &f) {
			c = f.Condition // a page that needs a person: its own words and action
		}
		c.Until = b.checked.Add(b.cfg.RecheckInterval)
		return c
	case b.cond.State != "" && (b.cond.Until.IsZero() || now.Before(b.cond.Until)):
		return b.cond
	}
	return gateway.Condition{State: gateway.StateReady}
}

// ready makes sure a browser is running and the backend is up (rechecking
// a down backend when it is due), recycling an old browser first.
// Called with sem held.
func (b *Backend) ready(ctx context.Context) error {
	b.mu.Lock()
	down, checked := b.down, b.checked
	b.mu.Unlock()
	if down != nil {
		if b.clock.Since(checked) < b.cfg.RecheckInterval {
			return unsent(down)
		}
		if err := b.check(ctx); err != nil {
			return unsent(err)
		}
	}
	if b.bc != nil && b.recycleDue() {
		b.log.Info().Str("event", "gateway.browser.recycle").Int("requests", b.served).
			Dur("age", b.clock.Since(b.launched)).Msg("restarting the browser")
		_ = b.closeBrowser()
		b.mu.Lock()
		b.stats.Recycles++
		b.mu.Unlock()
	}
	if b.bc == nil {
		if err := b.start(ctx); err != nil {
			if ctx.Err() != nil {
				return err // not a verdict on the browser
			}
			return b.setDown(err)
		}
	}
	return nil
}

// unsent is err for a request refused before its prompt left: a page
// that needs a person, seen by an earlier request after it sent its
// prompt, costs this one no quota.
func unsent(err error) error {
	var f *gateway.Fault
	if errors.As(err, &f) && !f.NotSent {
		c := *f
		c.NotSent = true
		return &c
	}
	return err
}

func (b *Backend) recycleDue() bool {
	if n := b.cfg.RecycleAfterRequests; n > 0 && b.served >= n {
		return true
	}
	if h := b.cfg.RecycleAfter; h > 0 && b.clock.Since(b.launched) >= h {
		return true
	}
	if n := b.cfg.RecycleAboveBytes; n > 0 && b.MemoryBytes() > n {
		return true
	}
	return false
}

// start launches Chromium on the profile. Called with sem held.
func (b *Backend) start(ctx context.Context) error {
	if err := ensureProfileDir(b.cfg.ProfileDir); err != nil {
		return gateway.Unavailable(b.name, "browser profile directory %s: %v", b.cfg.ProfileDir, err)
	}
	if b.pw == nil {
		pw, release, err := acquire()
		if err != nil {
			return gateway.Unavailable(b.name, "%v", err)
		}
		b.pw, b.release = pw, release
	}
	timeout := time.Minute
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	if err := ctx.Err(); err != nil {
		return b.ctxErr(ctx, "starting the browser")
	}
	bc, err := launch(b.pw, launchOptions{
		Executable: b.cfg.Executable, ProfileDir: b.cfg.ProfileDir, Headless: b.cfg.Headless,
		ExtraArgs: b.cfg.ExtraArgs, Timeout: timeout,
	})
	if err != nil {
		if ctx.Err() != nil {
			return b.ctxErr(ctx, "starting the browser")
		}
		return gateway.Unavailable(b.name, "%v", err)
	}
	b.bc, b.launched, b.served = bc, b.clock.Now(), 0
	b.mu.Lock()
	b.stats.Launches++
	b.mu.Unlock()
	b.log.Info().Str("event", "gateway.browser.launch").Str("profile_dir", b.cfg.ProfileDir).
		Bool("headless", b.cfg.Headless).Msg("browser started")
	return nil
}

// closeBrowser closes the page and the browser. Called with sem held.
func (b *Backend) closeBrowser() error {
	b.dropPage()
	b.memMu.Lock()
	b.memBytes = 0 // a reading of the old browser must not recycle the next
	b.memMu.Unlock()
	if b.bc == nil {
		return nil
	}
	err := b.bc.Close()
	b.bc = nil
	switch {
	case errors.Is(err, playwright.ErrTargetClosed):
		// Already gone (the driver or browser got the shutdown signal too).
		b.log.Debug().Str("event", "gateway.browser.already_closed").Err(err).Msg("browser was already closed")
		return nil
	case err != nil:
		return fmt.Errorf("%s: closing the browser: %w", b.name, err)
	}
	return nil
}

// dropPage closes the current page (a running answer or navigation ends
// with it); the next request opens a fresh one.
func (b *Backend) dropPage() {
	if b.page != nil {
		_ = b.page.Close()
		forget(b.page)
		b.page = nil
	}
}

// openPage returns the page, opening one (and relaunching a browser that
// died) when needed. Called with sem held.
func (b *Backend) openPage(ctx context.Context) (playwright.Page, error) {
	if b.page != nil && !isClosed(b.page) {
		return b.page, nil
	}
	b.page = nil
	for attempt := 0; ; attempt++ {
		if b.bc == nil {
			if err := b.start(ctx); err != nil {
				return nil, err
			}
		}
		var pages []playwright.Page
		pages = b.bc.Pages()
		if len(pages) > 0 {
			// A page of a context just started or still alive: watched from
			// now on; a dead one fails its first use and is replaced.
			watchClose(pages[0])
			if _, err := pages[0].Evaluate("1"); err == nil {
				b.page = pages[0]
				return b.page, nil
			}
			forget(pages[0])
		}
		p, err := b.bc.NewPage()
		if err == nil {
			watchClose(p)
			b.page = p
			return p, nil
		}
		// The browser is gone (crashed, killed): start it again, once.
		_ = b.closeBrowser()
		if attempt > 0 {
			return nil, b.fail(ctx, "opening a page", err)
		}
	}
}

// load opens target in the page. A browser that died since it was last
// used (crashed, killed) is started again, once.
func (b *Backend) load(ctx context.Context, target string) (playwright.Page, error) {
	page, err := b.openPage(ctx)
	if err != nil {
		return nil, err
	}
	err = b.goTo(ctx, page, target)
	if err != nil && ctx.Err() == nil && errors.Is(err, playwright.ErrTargetClosed) {
		b.log.Warn().Str("event", "gateway.browser.restart").Err(err).Msg("the browser is gone; starting it again")
		_ = b.closeBrowser()
		if page, err = b.openPage(ctx); err != nil {
			return nil, err
		}
		err = b.goTo(ctx, page, target)
	}
	if err != nil {
		return nil, b.fail(ctx, "loading "+target, err)
	}
	return page, nil
}

// do runs fn, a blocking Playwright call, and returns its error, or ctx's
// error when ctx ends first; then the page is closed so that fn returns
// at once.
func (b *Backend) do(ctx context.Context, fn func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		select {
		case err := <-done: // fn had finished too: the page is in use
			return err
		default:
		}
		b.dropPage()
		<-done
		return ctx.Err()
	}
}

//go:embed poll.js
var pollJS string

//go:embed count.js
var countJS string

//go:embed deepmode.js
var deepModeJS string

// pageState is one reading of the page (poll.js).
type pageState struct {
	Answers    int    `json:"answers"`
	Text       string `json:"text"`
	Generating bool   `json:"generating"`
	Prompt     bool   `json:"prompt"`
	Login      bool   `json:"login"`
	LoggedIn   bool   `json:"logged_in"`
	Banner     string `json:"banner"`
	Done       bool   `json:"done"` // the profile's complete signal follows the last answer
	Gone       bool   `json:"gone"` // the profile's conversation_gone notice shows
	URL        string `json:"url"`
	Title      string `json:"title"`
	// Challenge: a marker of the profile's bot-check page is on the page.
	Challenge bool `json:"challenge"`
	// ErrorTurn is the text of the error-turn containers of the last
	// answer (profile error_turn.in); error_turn.match decides.
	ErrorTurn string `json:"error_turn"`
}

// read reads the page once.
func (b *Backend) read(ctx context.Context, page playwright.Page) (pageState, error) {
	arg := pollArg(b.p)
	var st pageState
	var raw any
	if err := b.evaluate(ctx, page, pollJS, arg, &raw); err != nil {
		return st, err
	}
	err := remarshal(raw, &st)
	st.URL = page.URL()
	return st, err
}

func remarshal(in, out any) error {
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

// judged is how a reading of the page is judged now (settled: the page
// had its load time).
func (b *Backend) judged(settled bool) readAt {
	return readAt{now: b.clock.Now(), settled: settled, recheck: b.cfg.RecheckInterval}
}

// check loads the start page and verifies the profile against it: no
// login wall, every startup selector matches, every selector is valid CSS.
// It records the result (setDown) and returns it. Called with sem held.
func (b *Backend) check(ctx context.Context) error {
	if b.bc == nil {
		if err := b.start(ctx); err != nil {
			if ctx.Err() != nil {
				return err // not a verdict on the site
			}
			return b.setDown(err)
		}
	}
	page, err := b.load(ctx, b.p.StartURL)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		return b.setDown(gateway.Unavailable(b.name, "start page %s did not load: %v", b.p.StartURL, err))
	}
	all := profileSelectors(b.p)
	for k, v := range controlSelectors(b.p) {
		all[k] = v // checked for valid CSS only: they show once a menu opens
	}
	deadline := time.Now().Add(b.p.loadTimeout())
	var challenged time.Time // when a bot check was first seen
	for {
		counts, err := b.count(ctx, page, all)
		if err != nil {
			if ctx.Err() != nil {
				return b.ctxErr(ctx, "checking the start page")
			}
			return b.setDown(gateway.Unavailable(b.name, "checking the start page %s: %v", b.p.StartURL, err))
		}
		var invalid []string
		for _, k := range sortedKeys(all) {
			if counts[k] < 0 {
				invalid = append(invalid, fmt.Sprintf("%s %q", k, all[k]))
			}
		}
		if len(invalid) > 0 {
			return b.setDown(gateway.Unavailable(b.name, "site profile %s: invalid CSS selector %s", b.p.Name, strings.Join(invalid, ", ")))
		}
		st, err := b.read(ctx, page)
		if err != nil {
			if ctx.Err() != nil {
				return b.ctxErr(ctx, "checking the start page")
			}
			return b.setDown(gateway.Unavailable(b.name, "checking the start page %s: %v", b.p.StartURL, err))
		}
		settled := time.Now().After(deadline)
		switch v := b.p.recognise(st, b.judged(settled)); v.Row {
		case rowChallenge:
			if challenged.IsZero() {
				challenged = time.Now()
			}
			if settled || time.Since(challenged) >= b.p.challengeWait() {
				return b.personFault(v, false)
			}
		case rowLoginWall, rowLoginURL, rowGuest:
			return b.personFault(v, false)
		default:
			challenged = time.Time{}
		}
		var missing []string
		for _, f := range b.p.StartupCheck {
			if counts["selectors."+f] == 0 {
				missing = append(missing, fmt.Sprintf("selectors.%s %q", f, b.p.Selectors.selector(f)))
			}
		}
		// Ready: every startup selector matches and the prompt input shows
		// (a page may hold a hidden composer while it decides to show its
		// login wall).
		if len(missing) == 0 && st.Prompt && (st.LoggedIn || b.p.Selectors.LoggedIn.Empty()) {
			return b.setDown(nil)
		}
		if settled {
			var err error
			if len(missing) > 0 {
				b.log.Error().Str("event", "gateway.browser.selector_missing").Strs("selectors", missing).Msg("site profile does not match the start page")
				err = gateway.Unavailable(b.name, "site profile %s: %s matched nothing on the start page %s within %s (fix it in site_profiles_file)",
					b.p.Name, strings.Join(missing, ", "), b.p.StartURL, b.p.loadTimeout())
			} else {
				err = gateway.Unavailable(b.name, "site profile %s: selectors.prompt %q is on the start page %s but did not show within %s",
					b.p.Name, b.p.Selectors.Prompt, b.p.StartURL, b.p.loadTimeout())
			}
			_ = b.closeBrowser()
			return b.setDown(err)
		}
		if err := sleepCtx(ctx, b.p.poll()); err != nil {
			return b.ctxErr(ctx, "checking the start page")
		}
	}
}

// count returns how many elements each selector matches (-1: invalid).
func (b *Backend) count(ctx context.Context, page playwright.Page, sels map[string]SelectorList) (map[string]int, error) {
	arg := make(map[string]any, len(sels)) // playwright-go serialises only map[string]any
	for k, v := range sels {
		arg[k] = v.js()
	}
	var raw any
	if err := b.evaluate(ctx, page, countJS, arg, &raw); err != nil {
		return nil, err
	}
	out := map[string]int{}
	err := remarshal(raw, &out)
	return out, err
}

func (b *Backend) goTo(ctx context.Context, page playwright.Page, target string) error {
	return b.do(ctx, func() error {
		_, err := page.Goto(target, playwright.PageGotoOptions{
			WaitUntil: playwright.WaitUntilStateDomcontentloaded,
			Timeout:   playwright.Float(float64(b.p.loadTimeout().Milliseconds())),
		})
		return err
	})
}

// exchange is one prompt and answer on the page. Continuing a
// conversation, it first makes sure the conversation is still there
// (ErrConversationGone if not) and, for an interrupted prompt, whether the
// page already holds its answer. Called with sem held.
func (b *Backend) exchange(ctx context.Context, req gateway.Request, images []string) (gateway.Response, error) {
	var none gateway.Response
	sel := b.p.Selectors
	target, continuing := b.p.StartURL, req.ConversationURL != ""
	if continuing {
		target = req.ConversationURL
	}
	b.taskType, b.continuing = req.TaskType, continuing
	page, err := b.load(ctx, target)
	if err != nil {
		return none, err
	}
	st, err := b.waitLoaded(ctx, page, req)
	if err != nil {
		return none, err
	}
	if continuing && req.Interrupted && (st.Answers > req.KnownAnswers || st.Generating) {
		// The prompt was sent before fano stopped and the site answered
		// it (or is still answering): use that answer, do not ask again.
		// A conversation whose address was recorded before its first
		// answer (KnownAnswers 0) is read the same way.
		b.log.Info().Str("event", "gateway.browser.answer_from_page").Str("task", req.TaskID).
			Int("answers", st.Answers).Int("known", req.KnownAnswers).Msg("interrupted prompt was answered; reading it from the page")
		r, err := b.waitAnswer(ctx, page, req.KnownAnswers, req.DeepMode, "")
		if err == nil {
			r, err = b.settle(ctx, page, req, req.KnownAnswers, r)
		}
		if err != nil {
			return none, err
		}
		return gateway.Response{Content: r.Text, ConversationURL: req.ConversationURL, FromPage: true, Incomplete: r.Why, Ended: r.Ended}, nil
	}
	prompt, primed := req.Prompt, 0
	if !continuing {
		prompt, primed = primePrompt(req.History, req.Prompt, b.cfg.PrimeTurns, b.cfg.PrimeChars)
		b.addressed = req.ConversationAddressed
		defer func() { b.addressed = nil }()
	}
	if err := b.setControls(ctx, page, req.DeepMode); err != nil {
		return none, err
	}
	if len(images) > 0 {
		if err := b.openUpload(ctx, page); err != nil {
			return none, err
		}
		err := b.do(ctx, func() error {
			return b.locate(page, sel.FileInput, false).SetInputFiles(images, playwright.LocatorSetInputFilesOptions{Timeout: b.actionMS()})
		})
		if err != nil {
			return none, b.fail(ctx, fmt.Sprintf("attaching %d image(s) with selectors.file_input %q", len(images), sel.FileInput), err)
		}
	}
	if st, err = b.read(ctx, page); err != nil {
		return none, b.fail(ctx, "reading the page", err)
	}
	if st.Banner != "" {
		// Shown before sending: a limit stops here; anything else was not
		// caused by this prompt and is not held against it.
		if err := b.onNotice(st.Banner, false, false); err != nil {
			return none, err
		}
	}
	before, staleError := st.Answers, st.ErrorTurn
	if err := b.do(ctx, func() error {
		return b.locate(page, sel.Prompt, true).Fill(prompt, playwright.LocatorFillOptions{Timeout: b.actionMS()})
	}); err != nil {
		return none, b.fail(ctx, fmt.Sprintf("typing the prompt into selectors.prompt %q", sel.Prompt), err)
	}
	// The click is not cut short by ctx (it takes at most the action
	// timeout, and closing the backend ends it): cut, it would close the
	// page with the prompt perhaps sent, leaving the answer running on the
	// site with no one to stop it. A ctx that ended meanwhile is seen by
	// waitAnswer, which stops the answer.
	if err := b.locate(page, sel.Send, true).Click(playwright.LocatorClickOptions{Timeout: b.actionMS()}); err != nil {
		if ctx.Err() == nil && (errors.Is(err, playwright.ErrTargetClosed) || isClosed(page)) {
			// The site may have the prompt already (a click returns after
			// the page has handled it): a hang, not a transient error.
			return none, b.pageGone(err)
		}
		return none, b.fail(ctx, fmt.Sprintf("clicking selectors.send %q", sel.Send), err)
	}
	r, err := b.waitAnswer(ctx, page, before, req.DeepMode, staleError)
	if err == nil {
		r, err = b.settle(ctx, page, req, before, r)
	}
	if err != nil {
		return none, err
	}
	convURL := b.lastURL
	if b.p.isPendingURL(convURL) {
		convURL = b.settledURL(ctx, page)
	}
	if convURL == b.p.StartURL {
		convURL = "" // the site gave this conversation no address of its own
	}
	return gateway.Response{Content: r.Text, ConversationURL: convURL, PrimedTurns: primed, Incomplete: r.Why, Ended: r.Ended}, nil
}

func (b *Backend) actionMS() *float64 {
	return playwright.Float(float64(b.cfg.ActionTimeout.Milliseconds()))
}

// waitLoaded waits until the prompt input shows (and, continuing a
// conversation, its earlier answers), stopping at a login wall or a
// rate-limit banner. A conversation that redirects elsewhere, shows the
// site's not-found notice or loads without any answer is gone.
func (b *Backend) waitLoaded(ctx context.Context, page playwright.Page, req gateway.Request) (pageState, error) {
	continuing := req.ConversationURL != ""
	deadline := time.Now().Add(b.p.loadTimeout())
	var challenged time.Time // when a bot check was first seen
	for {
		st, err := b.read(ctx, page)
		if err != nil {
			return st, b.fail(ctx, "reading the page", err)
		}
		settled := time.Now().After(deadline)
		switch v := b.p.recognise(st, b.judged(settled)); v.Row {
		case rowChallenge:
			if challenged.IsZero() {
				challenged = time.Now()
			}
			if settled || time.Since(challenged) >= b.p.challengeWait() {
				return st, b.personFault(v, false)
			}
		case rowLoginWall, rowLoginURL, rowGuest:
			return st, b.personFault(v, false)
		default:
			challenged = time.Time{}
		}
		if st.Banner != "" {
			if err := b.onNotice(st.Banner, false, false); err != nil {
				return st, err
			}
		}
		switch {
		case continuing && st.Gone:
			return st, b.gone(req, "the site shows its not-found notice (conversation_gone %q)", b.p.ConversationGone)
		case continuing && !samePage(st.URL, req.ConversationURL):
			return st, b.gone(req, "it redirected to %s", st.URL)
		}
		loggedIn := st.LoggedIn || b.p.Selectors.LoggedIn.Empty()
		// An interrupted prompt's conversation may show its first answer
		// still being generated, with no answer text yet.
		if st.Prompt && loggedIn && (!continuing || st.Answers > 0 || (req.Interrupted && st.Generating)) {
			return st, nil
		}
		if settled {
			b.dropPage()
			if !st.Prompt {
				return st, gateway.Transient(b.name, "selectors.prompt %q did not show within %s", b.p.Selectors.Prompt, b.p.loadTimeout())
			}
			return st, b.gone(req, "it showed no earlier answer (selectors.answer %q) within %s", b.p.Selectors.Answer, b.p.loadTimeout())
		}
		if err := sleepCtx(ctx, b.p.poll()); err != nil {
			return st, b.ctxErr(ctx, "loading the page")
		}
	}
}

// gone is the error for a conversation that is no longer there (deleted,
// another account's, a redirect to a new chat): the task starts a fresh
// one, never retries this URL.
func (b *Backend) gone(req gateway.Request, format string, args ...any) error {
	b.dropPage()
	why := fmt.Sprintf(format, args...)
	b.log.Warn().Str("event", "gateway.browser.conversation_gone").Str("task", req.TaskID).Str("reason", why).Msg("conversation is gone; the task starts a new one")
	return gateway.Classified(b.name, gateway.ErrConversationGone, "task %s: conversation %s is gone: %s", req.TaskID, req.ConversationURL, why)
}

// samePage reports whether the page at now still shows the conversation
// at want: same origin, and its path still holds the conversation's id
// (the last segment of want's path), since sites move a conversation
// under another prefix (a project, a custom GPT) without losing it.
func samePage(now, want string) bool {
	un, err1 := url.Parse(now)
	uw, err2 := url.Parse(want)
	if err1 != nil || err2 != nil {
		return now == want
	}
	if un.Scheme != uw.Scheme || un.Host != uw.Host {
		return false
	}
	id := path.Base(strings.TrimSuffix(uw.Path, "/"))
	if id == "/" || id == "." {
		return strings.TrimSuffix(un.Path, "/") == strings.TrimSuffix(uw.Path, "/")
	}
	return slices.Contains(strings.Split(un.Path, "/"), id)
}

// pageGone is the error for a page (or browser) that went away under a
// request: the page is dropped and the next request opens a new one,
// relaunching a browser that died.
func (b *Backend) pageGone(err error) error {
	b.dropPage()
	b.setCondition(gateway.Condition{State: gateway.StatePageGone, Reason: err.Error(), Until: b.clock.Now().Add(b.cfg.RecheckInterval)})
	return &gateway.Error{Backend: b.name, Kind: gateway.ErrHung, Msg: "page gone", Err: err}
}

//go:embed wait.js
var waitJS string

// waitChange waits for the page's next change, at most a poll interval.
func (b *Backend) waitChange(ctx context.Context, page playwright.Page) error {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.p.poll()+readTimeout)
	defer cancel()
	stop := context.AfterFunc(b.life, cancel)
	defer stop()
	// Not cut short by ctx (it takes at most a poll interval): the page
	// must stay for stopping the answer.
	_ = b.do(wctx, func() error { _, err := page.Evaluate(waitJS, b.p.Completion.PollMS); return err })
	return ctx.Err()
}

// readSoft is read for the answer loop: a read in progress when ctx ends
// may finish (it takes milliseconds), so that the page is still there to
// stop the answer. It is bounded by readTimeout and by Close.
func (b *Backend) readSoft(ctx context.Context, page playwright.Page) (pageState, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readTimeout)
	defer cancel()
	stop := context.AfterFunc(b.life, cancel)
	defer stop()
	return b.read(rctx, page)
}

// readTimeout bounds one reading of the page.
const readTimeout = 10 * time.Second

// abandon ends a request whose ctx ended: it stops the running answer
// (unless fano is shutting down: the site finishes it and the resumed task
// reads it from the page) and drops the page, so the next request starts
// clean.
func (b *Backend) abandon(ctx context.Context, page playwright.Page) {
	defer b.dropPage()
	if errors.Is(context.Cause(ctx), gateway.ErrShutdown) {
		return
	}
	b.stopAnswer(page)
}

// stopAnswer clicks the stop button of a running answer (best effort, a
// few seconds at most) and waits for the site to show it stopped.
func (b *Backend) stopAnswer(page playwright.Page) {
	stop := b.p.Selectors.StopSelector()
	if stop.Empty() || isClosed(page) || b.life.Err() != nil {
		return
	}
	loc := b.locate(page, stop, true)
	if vis, err := loc.IsVisible(); err != nil || !vis {
		return
	}
	if err := loc.Click(playwright.LocatorClickOptions{Timeout: playwright.Float(3000)}); err != nil {
		b.log.Debug().Str("event", "gateway.browser.stop_failed").Err(err).Msg("could not stop the answer")
		return
	}
	ctx, cancel := context.WithTimeout(b.life, 3*time.Second)
	defer cancel()
	for {
		st, err := b.read(ctx, page)
		if err != nil || !st.Generating {
			return
		}
		if sleepCtx(ctx, b.p.poll()) != nil {
			return
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
