package browser

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/gateway"
	"fano/gateway/browser/fakechat"
	"fano/internal/testctx"
)

// These tests drive the real Chromium (headless) against the fake chat UIs
// of testdata/chatui. One Playwright driver serves the whole package.

var (
	driverOnce    sync.Once
	driverErr     error
	driverRelease func()
)

func TestMain(m *testing.M) {
	code := m.Run()
	if driverRelease != nil {
		driverRelease()
	}
	os.Exit(code)
}

// needBrowser fails (not skips) the test when Chromium or the driver is
// missing: `make test` installs both.
func needBrowser(t testing.TB) {
	t.Helper()
	driverOnce.Do(func() {
		if _, err := findExecutable(""); err != nil {
			driverErr = err
			return
		}
		driverRelease, driverErr = AcquireDriver()
	})
	if driverErr != nil {
		t.Fatalf("browser tests need Chromium and the Playwright driver; run `make deps`: %v", driverErr)
	}
}

// offline keeps Chromium's own lookups (Google services) off the network.
var offline = []string{"--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"}

// testProfile is the profile of a 2025-shaped fake site (the former
// built-in, testdata/chatui/legacy-profiles.yaml) pointed at it, named like
// the site, with timings fit for tests. The "turns" site has the user
// profile written for it (testdata/chatui/turns/profile.yaml).
func testProfile(t testing.TB, site *fakechat.Server) *Profile {
	t.Helper()
	dir, err := fakechat.Dir()
	require.NoError(t, err)
	key := "legacy-" + site.Site()
	profiles, err := LoadProfiles(filepath.Join(dir, "legacy-profiles.yaml"))
	if site.Site() == "turns" {
		key = "turns"
		profiles, err = LoadProfiles(filepath.Join(dir, "turns", "profile.yaml"))
	}
	require.NoError(t, err)
	p, err := profiles[key].WithBaseURL(site.URL())
	require.NoError(t, err)
	p.Name = site.Site()
	p.Completion = Completion{StableMS: 150, PollMS: 30, StartTimeoutSeconds: 10, LoadTimeoutSeconds: 10}
	return p
}

type fixture struct {
	site  *fakechat.Server
	clock *clockwork.FakeClock
	cfg   Config
}

func newFixture(t testing.TB, siteName string) *fixture {
	t.Helper()
	needBrowser(t)
	site, err := fakechat.New(siteName)
	require.NoError(t, err)
	t.Cleanup(site.Close)
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 10, 15, 0, 0, 0, time.Local))
	return &fixture{site: site, clock: clock, cfg: Config{
		Name:       "test-" + siteName,
		Profile:    testProfile(t, site),
		ProfileDir: ProfileDir(t.TempDir(), "test-"+siteName),
		Headless:   true,
		ExtraArgs:  offline,
		Clock:      clock,
		Logger:     zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel),
	}}
}

func (f *fixture) start(t *testing.T) *Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := New(ctx, f.cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func send(t *testing.T, b *Backend, req gateway.Request) gateway.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := b.Send(ctx, req)
	require.NoError(t, err)
	require.NoError(t, gateway.Whole(b.Name(), resp), "the answer ended complete")
	return resp
}

func answer(turn, prompt string) string {
	return "Answer " + turn + " to: " + prompt + " " + fakechat.Tail
}

// Each built-in profile drives its fake site: a new conversation, then two
// more turns in it with deep mode switched on and off and an image.
func TestSitesSendReceiveContinue(t *testing.T) {
	convPath := map[string]*regexp.Regexp{
		"chatgpt": regexp.MustCompile(`^/c/[0-9a-f-]{36}$`),
		"gemini":  regexp.MustCompile(`^/app/[0-9a-f]{16}$`),
		"claude":  regexp.MustCompile(`^/chat/[0-9a-f-]{36}$`),
		"turns":   regexp.MustCompile(`^/c/[0-9a-f-]{36}$`),
	}
	img := filepath.Join(t.TempDir(), "figure.png")
	require.NoError(t, os.WriteFile(img, []byte("\x89PNG fake"), 0o600))
	for _, name := range fakechat.Sites {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // mostly waiting on streaming timers
			f := newFixture(t, name)
			// A pause before the last token, longer than the stable time,
			// with the stop button still shown: completion must wait for it.
			f.site.SetControl(fakechat.Control{PauseMS: 400})
			b := f.start(t)
			require.NoError(t, b.Health(context.Background()))

			r1 := send(t, b, gateway.Request{TaskID: "t1", Prompt: "Is every projective plane of order 6 impossible?"})
			assert.Equal(t, answer("1", "Is every projective plane of order 6 impossible?"), r1.Content)
			require.NotEmpty(t, r1.ConversationURL)
			assert.Regexp(t, convPath[name], r1.ConversationURL[len(f.site.URL()):])

			r2 := send(t, b, gateway.Request{TaskID: "t1", Prompt: "Look at this figure.", DeepMode: true,
				Images: []string{img}, ConversationURL: r1.ConversationURL})
			assert.Equal(t, "[deep mode] Answer 2 to: Look at this figure. [attachments: figure.png] "+fakechat.Tail, r2.Content)
			assert.Equal(t, r1.ConversationURL, r2.ConversationURL)

			r3 := send(t, b, gateway.Request{TaskID: "t1", Prompt: "And without deep mode?", ConversationURL: r2.ConversationURL})
			assert.Equal(t, answer("3", "And without deep mode?"), r3.Content)

			sent := f.site.Sent()
			require.Len(t, sent, 3)
			assert.Equal(t, []bool{false, true, false}, []bool{sent[0].Deep, sent[1].Deep, sent[2].Deep})
			assert.Len(t, f.site.Conversation(f.site.ConversationID(r1.ConversationURL)), 6)
			assert.Equal(t, Stats{Launches: 1, Requests: 3}, b.Stats())
		})
	}
}

func TestRateLimitBanner(t *testing.T) {
	f := newFixture(t, "chatgpt")
	b := f.start(t)
	for _, tc := range []struct {
		name   string
		ctl    fakechat.Control
		retry  time.Duration
		before bool // the banner shows on load: nothing may be sent
	}{
		{"relative", fakechat.Control{Limit: 1, Banner: "You've reached the current usage cap. Try again in 27 minutes."}, 27 * time.Minute, false},
		// The fake clock says 15:00 local time.
		{"absolute", fakechat.Control{Limit: 1, Banner: "You've hit your limit. Please try again after 3:45 PM."}, 45 * time.Minute, false},
		{"none", fakechat.Control{Limit: 1, BannerOnLoad: true, Banner: "You've reached our limit of messages per hour. Please try again later."}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.site.SetControl(tc.ctl)
			send(t, b, gateway.Request{Prompt: "first"}) // within the limit
			n := len(f.site.Sent())
			_, err := b.Send(context.Background(), gateway.Request{Prompt: "second"})
			var rl *gateway.RateLimitedError
			require.ErrorAs(t, err, &rl)
			assert.Equal(t, "rate_limited", gateway.Kind(err))
			assert.Equal(t, b.Name(), rl.Backend)
			assert.Equal(t, tc.retry, rl.RetryAfter)
			assert.Contains(t, rl.Reason, tc.ctl.Banner)
			if tc.before {
				assert.Len(t, f.site.Sent(), n, "a banner on load must stop the send")
			} else {
				assert.Len(t, f.site.Sent(), n+1)
			}
		})
	}
	// The limit is gone: the backend works again (a rate limit is not "down").
	f.site.SetControl(fakechat.Control{})
	assert.Equal(t, answer("1", "after the window"), send(t, b, gateway.Request{Prompt: "after the window"}).Content)
}

func TestLoginWall(t *testing.T) {
	f := newFixture(t, "claude")
	f.site.SetControl(fakechat.Control{LoginWall: true})
	b := f.start(t)

	// Seen at start-up: down, nothing sent, the error says what to do.
	err := b.Health(context.Background())
	require.ErrorIs(t, err, gateway.ErrUnavailable)
	assert.Contains(t, err.Error(), "test-claude")
	assert.Contains(t, err.Error(), "login required")
	assert.Contains(t, err.Error(), "fano login test-claude")
	_, err = b.Send(context.Background(), gateway.Request{Prompt: "hello"})
	require.ErrorIs(t, err, gateway.ErrUnavailable)
	assert.Empty(t, f.site.Sent())

	// After a login (here: the wall goes away) the recheck brings it back.
	f.site.SetControl(fakechat.Control{})
	require.ErrorIs(t, b.Health(context.Background()), gateway.ErrUnavailable, "rechecked only after the interval")
	up := b.upSignal()
	f.clock.BlockUntil(1) // the backend's own recheck waits for the interval
	f.clock.Advance(time.Minute)
	waitUp(t, up)
	require.NoError(t, b.Health(context.Background()))
	assert.Equal(t, answer("1", "hello"), send(t, b, gateway.Request{Prompt: "hello"}).Content)

	// The session expires while running: the next request meets the wall.
	f.site.SetControl(fakechat.Control{LoginWall: true})
	_, err = b.Send(context.Background(), gateway.Request{Prompt: "again"})
	require.ErrorIs(t, err, gateway.ErrUnavailable)
	assert.Equal(t, "unavailable", gateway.Kind(err))
	require.ErrorIs(t, b.Health(context.Background()), gateway.ErrUnavailable)
}

func TestContinueAfterBrowserRestart(t *testing.T) {
	f := newFixture(t, "gemini")
	// Earlier turns show well after the composer: the backend must wait
	// for them before counting answers.
	f.site.SetControl(fakechat.Control{HistoryDelayMS: 500})
	b1 := f.start(t)
	r1 := send(t, b1, gateway.Request{Prompt: "Start a conversation."})
	require.NoError(t, b1.Close())

	st, err := os.Stat(f.cfg.ProfileDir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), st.Mode().Perm())

	b2 := f.start(t) // same profile directory
	r2 := send(t, b2, gateway.Request{Prompt: "Continue it.", ConversationURL: r1.ConversationURL})
	assert.Equal(t, answer("2", "Continue it."), r2.Content)
	assert.Equal(t, r1.ConversationURL, r2.ConversationURL)
	assert.Equal(t, []fakechat.Message{
		{Role: "user", Content: "Start a conversation."}, {Role: "assistant", Content: answer("1", "Start a conversation.")},
		{Role: "user", Content: "Continue it."}, {Role: "assistant", Content: answer("2", "Continue it.")},
	}, f.site.Conversation(f.site.ConversationID(r1.ConversationURL)))
}

func TestGenerateForeverEndsWithContext(t *testing.T) {
	f := newFixture(t, "chatgpt")
	b := f.start(t)
	f.site.SetControl(fakechat.Control{Forever: true})
	_, stopped := f.site.Stops()
	_, streaming := f.site.Streams()

	// The deadline passes once the answer shows, however slow the machine.
	deadline := testctx.NewDeadline()
	errCh := make(chan error, 1)
	go func() { _, err := b.Send(deadline, gateway.Request{Prompt: "never ending"}); errCh <- err }()
	<-streaming
	deadline.Pass()
	err := <-errCh
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, "transient", gateway.Kind(err))
	assert.Contains(t, err.Error(), "test-chatgpt")
	select {
	case <-stopped: // the backend clicked the stop button
	case <-time.After(10 * time.Second):
		t.Fatal("the answer was not stopped")
	}

	f.site.SetControl(fakechat.Control{})
	assert.Equal(t, answer("1", "a normal one"), send(t, b, gateway.Request{Prompt: "a normal one"}).Content)

	// A caller that gives up (shutdown) gets a cancellation, not a failure.
	f.site.SetControl(fakechat.Control{Forever: true})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := b.Send(ctx, gateway.Request{Prompt: "cancel me"}); done <- err }()
	waitSends(t, f.site, 3)
	cancel()
	err = <-done
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, "cancelled", gateway.Kind(err))
	require.NoError(t, b.Health(context.Background()))
}

func TestSelectorMatchingNothing(t *testing.T) {
	f := newFixture(t, "chatgpt")
	p := f.cfg.Profile.clone()
	p.Selectors.Prompt = SelectorList{"#no-such-input"}
	p.Completion.LoadTimeoutSeconds = 1
	f.cfg.Profile = p
	b := f.start(t) // New does not fail: the rest of fano runs

	err := b.Health(context.Background())
	require.ErrorIs(t, err, gateway.ErrUnavailable)
	assert.Equal(t, `test-chatgpt: unavailable: site profile chatgpt: selectors.prompt "#no-such-input" matched nothing on the start page `+
		f.site.URL()+`/ within 1s (fix it in site_profiles_file)`, err.Error())
	_, sendErr := b.Send(context.Background(), gateway.Request{Prompt: "hi"})
	assert.Equal(t, err, sendErr)
	assert.Empty(t, f.site.Sent())

	// A selector that is not CSS at all is named too.
	p = f.cfg.Profile.clone()
	p.Selectors.Prompt = SelectorList{"#prompt-textarea"}
	p.Selectors.Answer = SelectorList{"div[["}
	f.cfg.Profile = p
	f.cfg.ProfileDir += "-2"
	err = f.start(t).Health(context.Background())
	require.ErrorIs(t, err, gateway.ErrUnavailable)
	assert.Contains(t, err.Error(), `test-chatgpt: unavailable: site profile chatgpt: invalid CSS selector selectors.answer "div[["`)
}

func TestRecycle(t *testing.T) {
	f := newFixture(t, "claude")
	f.cfg.RecycleAfterRequests = 2
	f.cfg.RecycleAfter = time.Hour
	b := f.start(t)
	r := send(t, b, gateway.Request{Prompt: "one"})
	send(t, b, gateway.Request{Prompt: "two"})
	// The third request gets a new browser; the profile (and the site's
	// conversation) carries over.
	r3 := send(t, b, gateway.Request{Prompt: "three", ConversationURL: r.ConversationURL})
	assert.Equal(t, answer("2", "three"), r3.Content)
	assert.Equal(t, Stats{Launches: 2, Recycles: 1, Requests: 3}, b.Stats())
	f.clock.Advance(time.Hour) // old enough
	assert.Equal(t, answer("1", "four"), send(t, b, gateway.Request{Prompt: "four"}).Content)
	assert.Equal(t, Stats{Launches: 3, Recycles: 2, Requests: 4}, b.Stats())
}

func TestCloseEndsRunningSend(t *testing.T) {
	f := newFixture(t, "gemini")
	b := f.start(t)
	f.site.SetControl(fakechat.Control{Forever: true})
	done := make(chan error, 1)
	go func() { _, err := b.Send(context.Background(), gateway.Request{Prompt: "forever"}); done <- err }()
	waitSends(t, f.site, 1)
	require.NoError(t, b.Close())
	err := <-done
	require.ErrorIs(t, err, gateway.ErrUnavailable)
	assert.Contains(t, err.Error(), "closed")
	require.ErrorIs(t, b.Health(context.Background()), gateway.ErrUnavailable)
	_, err = b.Send(context.Background(), gateway.Request{Prompt: "after close"})
	require.ErrorIs(t, err, gateway.ErrUnavailable)
}

func TestBadRequests(t *testing.T) {
	builtin, err := Builtin()
	require.NoError(t, err)
	// No browser needed: these fail before the browser is touched.
	b := &Backend{name: "x", p: builtin["chatgpt"]}
	for _, tc := range []struct {
		req  gateway.Request
		want string
	}{
		{gateway.Request{TaskID: "a/b/c"}, "x: permanent: task a/b/c: empty prompt"},
		{gateway.Request{TaskID: "t", Prompt: "p", ConversationURL: "https://evil.example/c/1"}, `x: permanent: task t: conversation URL "https://evil.example/c/1" is not on https://chatgpt.com`},
		{gateway.Request{TaskID: "t", Prompt: "p", Images: []string{"/no/such.png"}}, "x: permanent: task t: image /no/such.png: stat /no/such.png: no such file or directory"},
	} {
		_, err := b.checkRequest(tc.req)
		require.ErrorIs(t, err, gateway.ErrPermanent)
		assert.Equal(t, tc.want, err.Error())
	}
	p := builtin["chatgpt"].clone()
	p.Controls = nil
	b.p = p
	_, err = b.checkRequest(gateway.Request{TaskID: "t", Prompt: "p", DeepMode: true})
	assert.EqualError(t, err, "x: permanent: task t: deep mode requested but site profile chatgpt has no controls.deep_mode")
}

// waitSends waits until the fake site has received n sends.
func waitSends(t *testing.T, site *fakechat.Server, n int) {
	t.Helper()
	timeout := time.After(15 * time.Second)
	for {
		got, next := site.Sends()
		if got >= n {
			return
		}
		select {
		case <-next:
		case <-timeout:
			t.Fatalf("the site received %d sends, want %d", got, n)
		}
	}
}

func TestLogin(t *testing.T) {
	f := newFixture(t, "claude")
	var out strings.Builder
	// Enter pressed while the site still shows its login wall.
	f.site.SetControl(fakechat.Control{LoginWall: true})
	err := login(context.Background(), f.cfg, strings.NewReader("\n"), &out, true)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "test-claude: still logged out")
	assert.Contains(t, out.String(), "Log in there.")

	// Logged in: the backend can use the same profile afterwards.
	f.site.SetControl(fakechat.Control{})
	out.Reset()
	require.NoError(t, login(context.Background(), f.cfg, strings.NewReader("\n"), &out, true))
	assert.Contains(t, out.String(), "Logged in: backend test-claude")
	st, err := os.Stat(f.cfg.ProfileDir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), st.Mode().Perm())

	// ctrl-C ends it too.
	out.Reset()
	r, w := io.Pipe()
	t.Cleanup(func() { _ = w.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- login(ctx, f.cfg, r, &syncWriter{w: &out}, true) }()
	cancel()
	require.NoError(t, <-done)

	b := f.start(t)
	require.NoError(t, b.Health(context.Background()))
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
