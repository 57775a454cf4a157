package browser

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/gateway"
	"fano/gateway/browser/fakechat"
)

// These tests drive the built-in profiles against the fake pages shaped
// like the sites in 2026 (testdata/chatui/2026). With
// FANO_TEST_2026_PROFILES=legacy they drive the profiles fano had built in
// before (testdata/chatui/legacy-profiles.yaml) instead, which must fail
// them: that is how the tests were checked to catch the old profiles.

func profile2026(t *testing.T, site *fakechat.Server) *Profile {
	t.Helper()
	base := site.Site()[:len(site.Site())-len("-2026")]
	var p *Profile
	if os.Getenv("FANO_TEST_2026_PROFILES") == "legacy" {
		dir, err := fakechat.Dir()
		require.NoError(t, err)
		profiles, err := LoadProfiles(filepath.Join(dir, "legacy-profiles.yaml"))
		require.NoError(t, err)
		p = profiles["legacy-"+base]
	} else {
		builtin, err := Builtin()
		require.NoError(t, err)
		p = builtin[base]
	}
	p, err := p.WithBaseURL(site.URL())
	require.NoError(t, err)
	p.Completion = Completion{StableMS: 150, PollMS: 30, StartTimeoutSeconds: 5, LoadTimeoutSeconds: 5}
	return p
}

func newFixture2026(t *testing.T, site string, ctl fakechat.Control) *fixture {
	t.Helper()
	needBrowser(t)
	srv, err := fakechat.New(site + "-2026")
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	srv.SetControl(ctl)
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 10, 15, 0, 0, 0, time.Local))
	return &fixture{site: srv, clock: clock, cfg: Config{
		Name:          "test-" + site,
		Profile:       profile2026(t, srv),
		ProfileDir:    ProfileDir(t.TempDir(), "test-"+site),
		Headless:      true,
		ExtraArgs:     offline,
		Clock:         clock,
		ActionTimeout: 5 * time.Second,
		Logger:        zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel),
	}}
}

func testImage(t *testing.T) string {
	img := filepath.Join(t.TempDir(), "figure.png")
	require.NoError(t, os.WriteFile(img, []byte("\x89PNG fake"), 0o600))
	return img
}

// Deep mode through each site's menu, an image through its upload, and
// the answer read from the 2026 markup; deep mode is switched off again.
func TestSites2026DeepModeUploadAnswer(t *testing.T) {
	for _, tc := range []struct {
		site string
		ctl  fakechat.Control
	}{
		{"chatgpt", fakechat.Control{}},
		{"chatgpt", fakechat.Control{Shape2026: fakechat.Shape2026{NewMarkup: true}}},
		{"claude", fakechat.Control{Shape2026: fakechat.Shape2026{ArtifactPanel: "const artifact = 1"}}},
		{"gemini", fakechat.Control{}},
	} {
		name := tc.site
		if tc.ctl.NewMarkup {
			name += "-new-markup"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFixture2026(t, tc.site, tc.ctl)
			b := f.start(t)
			require.NoError(t, b.Health(context.Background()))
			img := testImage(t)

			r1 := send(t, b, gateway.Request{TaskID: "t1", Prompt: "Prove it.", DeepMode: true, Images: []string{img}})
			assert.Equal(t, "[deep mode] Answer 1 to: Prove it. [attachments: figure.png] "+fakechat.Tail, r1.Content)
			assert.Empty(t, r1.Model)
			r2 := send(t, b, gateway.Request{TaskID: "t1", Prompt: "Shorter.", ConversationURL: r1.ConversationURL})
			assert.Equal(t, answer("2", "Shorter."), r2.Content)

			sent := f.site.Sent()
			require.Len(t, sent, 2)
			assert.True(t, sent[0].Deep)
			assert.Equal(t, []string{"figure.png"}, sent[0].Attachments)
			assert.False(t, sent[1].Deep, "deep mode is switched off for a request without it")
		})
	}
}

// Notices: limits with their kind and time, the free-plan notice that
// keeps answering with another model, and messages in the same containers
// that are no limit.
func TestSites2026Notices(t *testing.T) {
	mdt := time.FixedZone("MDT", -6*3600)
	local := func(h, m int) time.Time { return time.Date(2026, 3, 10, h, m, 0, 0, time.Local) }
	for _, tc := range []struct {
		name, site string
		ctl        fakechat.Control
		taskType   string
		check      func(t *testing.T, resp gateway.Response, err error)
	}{
		{"chatgpt-throttle", "chatgpt", fakechat.Control{Limit: 1,
			Banner: "Too many requests. You're making requests too quickly. We've temporarily limited access to your conversations to protect your data. Please wait a few minutes before trying again."},
			"", func(t *testing.T, _ gateway.Response, err error) {
				var rl *gateway.RateLimitedError
				require.ErrorAs(t, err, &rl)
				assert.False(t, rl.Cap, "a throttle is a rate limit, not a usage cap")
			}},
		{"chatgpt-free-plan-waits", "chatgpt", fakechat.Control{Limit: 1, Shape2026: fakechat.Shape2026{BannerAnswers: true, NoticeContainer: "toast"},
			Banner: "You’ve hit the Free plan limit for GPT-5. Responses will use another model until your limit resets after 7:13 PM."},
			"synthesis", func(t *testing.T, _ gateway.Response, err error) {
				var rl *gateway.RateLimitedError
				require.ErrorAs(t, err, &rl)
				assert.True(t, rl.Cap)
				assert.True(t, local(19, 13).Equal(rl.Until), "until %s", rl.Until)
				assert.Contains(t, rl.Reason, "another model")
			}},
		{"chatgpt-free-plan-accepted", "chatgpt", fakechat.Control{Limit: 1, Shape2026: fakechat.Shape2026{BannerAnswers: true, NoticeContainer: "toast"},
			Banner: "You’ve hit the Free plan limit for GPT-5. Responses will use another model until your limit resets after 7:13 PM."},
			"survey", func(t *testing.T, resp gateway.Response, err error) {
				require.NoError(t, err)
				assert.Equal(t, answer("2", "again"), resp.Content)
				assert.Contains(t, resp.Model, "not GPT-5")
			}},
		{"chatgpt-error-line", "chatgpt", fakechat.Control{Limit: 1, Shape2026: fakechat.Shape2026{NoticeContainer: "error"},
			Banner: "Something went wrong while generating the response."},
			"", func(t *testing.T, _ gateway.Response, err error) {
				require.ErrorIs(t, err, gateway.ErrTransient)
				assert.Equal(t, "transient", gateway.Kind(err), "an ordinary error is no limit: %v", err)
			}},
		{"claude-5-hour", "claude", fakechat.Control{Limit: 1,
			Banner: "You've reached your 5-hour limit. It resets at 5:00 PM MDT on Sep 9."},
			"", func(t *testing.T, _ gateway.Response, err error) {
				var rl *gateway.RateLimitedError
				require.ErrorAs(t, err, &rl)
				assert.True(t, rl.Cap)
				assert.True(t, time.Date(2026, 9, 9, 17, 0, 0, 0, mdt).Equal(rl.Until), "until %s", rl.Until)
			}},
		{"gemini-limit", "gemini", fakechat.Control{Limit: 1,
			Banner: "You’ve reached your limit on 3 Pro until Mar 11, 3:12 PM. Try Google AI Ultra for higher limits."},
			"", func(t *testing.T, _ gateway.Response, err error) {
				var rl *gateway.RateLimitedError
				require.ErrorAs(t, err, &rl)
				assert.True(t, rl.Cap)
				assert.True(t, time.Date(2026, 3, 11, 15, 12, 0, 0, time.Local).Equal(rl.Until), "until %s", rl.Until)
			}},
		{"gemini-snack-bar-error", "gemini", fakechat.Control{Limit: 1, Banner: "Something went wrong. Try again later."},
			"", func(t *testing.T, _ gateway.Response, err error) {
				assert.Equal(t, "transient", gateway.Kind(err), "%v", err)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture2026(t, tc.site, tc.ctl)
			f.cfg.AcceptDegraded = []string{"survey"}
			b := f.start(t)
			r1 := send(t, b, gateway.Request{TaskID: "t1", Prompt: "first"})
			assert.Equal(t, answer("1", "first"), r1.Content)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			resp, err := b.Send(ctx, gateway.Request{TaskID: "t1", TaskType: tc.taskType, Prompt: "again", ConversationURL: r1.ConversationURL})
			tc.check(t, resp, err)
		})
	}
}

// Login: Claude's redirect to /login, and guest chat on ChatGPT and
// Gemini, which shows a composer but no account.
func TestSites2026Login(t *testing.T) {
	for _, tc := range []struct {
		name, site string
		ctl        fakechat.Control
		want       string
	}{
		{"claude-login-redirect", "claude", fakechat.Control{LoginWall: true}, "login required"},
		{"chatgpt-guest", "chatgpt", fakechat.Control{Shape2026: fakechat.Shape2026{Guest: true}}, "guest mode"},
		{"gemini-guest", "gemini", fakechat.Control{Shape2026: fakechat.Shape2026{Guest: true}}, "guest mode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture2026(t, tc.site, tc.ctl)
			f.cfg.Profile.Completion.LoadTimeoutSeconds = 2
			b := f.start(t)
			err := b.Health(context.Background())
			require.ErrorIs(t, err, gateway.ErrUnavailable)
			assert.Contains(t, err.Error(), tc.want)
			_, err = b.Send(context.Background(), gateway.Request{TaskID: "t", Prompt: "hi"})
			require.ErrorIs(t, err, gateway.ErrUnavailable)
			assert.Empty(t, f.site.Sent(), "nothing is sent as a guest or to a login page")
			assert.Equal(t, gateway.StateLogin, b.Condition().State, "a guest page wants a login, as a login page does")

			// Once logged in, the backend comes back at its own next check
			// (which holds the browser while it runs: wait for it, not for
			// a Health call that would find the browser busy).
			f.site.SetControl(fakechat.Control{})
			up := b.upSignal()
			f.clock.BlockUntil(1)
			f.clock.Advance(10 * time.Minute)
			waitUp(t, up)
			require.NoError(t, b.Health(context.Background()))
		})
	}
}

// A control with always: true (a model or effort choice) is switched on
// before every prompt, through its menu, whatever the request asks.
func TestSites2026AlwaysControl(t *testing.T) {
	f := newFixture2026(t, "chatgpt", fakechat.Control{})
	profiles, err := ParseProfiles([]byte(`profiles:
  effort-high:
    extends: chatgpt
    selectors: {deep_mode: "", deep_mode_on: ""}
    controls:
      effort:
        steps: ["button.__composer-pill[aria-haspopup='menu']"]
        item: {css: "[role='menuitemradio']", text: "High"}
        always: true
`), "sites.yaml")
	require.NoError(t, err)
	p := profiles["effort-high"].clone()
	delete(p.Controls, "deep_mode")
	p, err = p.WithBaseURL(f.site.URL())
	require.NoError(t, err)
	p.Completion = f.cfg.Profile.Completion
	f.cfg.Profile = p
	b := f.start(t)
	r := send(t, b, gateway.Request{TaskID: "t", Prompt: "Go."})
	assert.Equal(t, "[deep mode] Answer 1 to: Go. "+fakechat.Tail, r.Content, "the fake site answers in deep mode when the effort is High")
	require.Len(t, f.site.Sent(), 1)
	assert.True(t, f.site.Sent()[0].Deep)
}

// A control selector that is not valid CSS is named at start-up, before
// any menu is opened.
func TestSites2026InvalidControlSelector(t *testing.T) {
	f := newFixture2026(t, "claude", fakechat.Control{})
	p := f.cfg.Profile.clone()
	p.Controls["deep_mode"].Steps = []Target{{CSS: SelectorList{"button[data-testid='model-selector-dropdown']"}}, {CSS: SelectorList{"div[[", "div.ok"}}}
	f.cfg.Profile = p
	b := f.start(t)
	err := b.Health(context.Background())
	require.ErrorIs(t, err, gateway.ErrUnavailable)
	assert.Contains(t, err.Error(), `invalid CSS selector controls.deep_mode.steps[1] "div[[, div.ok"`)
}

// ChatGPT's interim /c/WEB:<id> address is never stored: fano waits for
// the real one.
func TestSites2026PendingConversationURL(t *testing.T) {
	f := newFixture2026(t, "chatgpt", fakechat.Control{Shape2026: fakechat.Shape2026{PendingURL: true}})
	b := f.start(t)
	r := send(t, b, gateway.Request{TaskID: "t", Prompt: "Where?"})
	assert.Regexp(t, `/c/[0-9a-f-]{36}$`, r.ConversationURL)
	r2 := send(t, b, gateway.Request{TaskID: "t", Prompt: "Here.", ConversationURL: r.ConversationURL})
	assert.Equal(t, answer("2", "Here."), r2.Content)
}

// A dialog that was already open before the prompt was sent is not the
// prompt's failure: the answer is read as usual.
func TestSites2026NoticeBeforeSending(t *testing.T) {
	f := newFixture2026(t, "chatgpt", fakechat.Control{Shape2026: fakechat.Shape2026{NoticeOnLoad: "What's new: projects can now hold files.", StartDelayMS: 300}})
	b := f.start(t)
	r := send(t, b, gateway.Request{TaskID: "t", Prompt: "Go on."})
	assert.Equal(t, answer("1", "Go on."), r.Content)
	assert.Empty(t, r.Model)
}

// A conversation the site says is full (its length limit) is not asked
// again: the task goes on in a new conversation, which answers; a new
// conversation that refuses the prompt as too long fails the request,
// which asking again would not change. One wording per site, each as
// the site's banner.
func TestSites2026ConversationFull(t *testing.T) {
	for _, tc := range []struct{ site, notice string }{
		{"chatgpt", "The conversation is too long, please start a new one."},
		{"claude", "Claude hit the maximum length for this conversation. Please start a new conversation to continue chatting with Claude."},
		{"gemini", "This chat has reached its maximum length. Start a new chat to continue."},
	} {
		t.Run(tc.site, func(t *testing.T) {
			t.Parallel()
			f := newFixture2026(t, tc.site, fakechat.Control{FullAfter: 1, FullBanner: tc.notice})
			b := f.start(t)
			r1 := send(t, b, gateway.Request{TaskID: "t1", Prompt: "first"})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := b.Send(ctx, gateway.Request{TaskID: "t1", Prompt: "again", ConversationURL: r1.ConversationURL})
			require.ErrorIs(t, err, gateway.ErrConversationGone, "%v", err)
			assert.Equal(t, "conversation_gone", gateway.Kind(err))
			assert.Contains(t, err.Error(), "length limit")
			assert.Equal(t, gateway.StateReady, b.Condition().State, "the backend is not in a condition")

			r2 := send(t, b, gateway.Request{TaskID: "t1", Prompt: "again"})
			assert.Equal(t, answer("1", "again"), r2.Content, "a new conversation answers")
			assert.NotEqual(t, r1.ConversationURL, r2.ConversationURL)

			// The site answers one more prompt, then refuses every prompt,
			// new conversations too.
			f.site.SetControl(fakechat.Control{Limit: 1, Banner: tc.notice})
			send(t, b, gateway.Request{TaskID: "t2", Prompt: "short"})
			_, err = b.Send(ctx, gateway.Request{TaskID: "t3", Prompt: "a very long prompt"})
			require.Error(t, err)
			assert.Equal(t, "permanent", gateway.Kind(err), "too long for a new conversation: %v", err)
			assert.Equal(t, gateway.StateReady, b.Condition().State)
		})
	}
}
