package browser

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/gateway"
	"fano/gateway/browser/fakechat"
)

// The page-state table, row by row, on readings of a page: each row is
// recognised from what the page shows, with the condition and its end
// decided there; a page that shows none of them is no condition.
func TestPageStateTable(t *testing.T) {
	builtin, err := Builtin()
	require.NoError(t, err)
	chatgpt, claude := builtin["chatgpt"], builtin["claude"]
	now := time.Date(2026, 11, 23, 15, 0, 0, 0, time.Local)
	at := readAt{now: now, recheck: time.Minute}
	settled := readAt{now: now, recheck: time.Minute, settled: true}
	working := pageState{Prompt: true, LoggedIn: true, URL: "https://chatgpt.com/"}
	with := func(f func(*pageState)) pageState { st := working; f(&st); return st }
	for _, tc := range []struct {
		name  string
		p     *Profile
		st    pageState
		at    readAt
		row   string
		state gateway.State
		until time.Time
	}{
		{"working page", chatgpt, working, settled, rowNone, "", time.Time{}},
		{"challenge by title", chatgpt, pageState{Title: "Just a moment...", URL: "https://chatgpt.com/"}, at, rowChallenge, gateway.StateChallenge, time.Time{}},
		{"challenge by marker", chatgpt, pageState{Challenge: true, Title: "chatgpt.com"}, at, rowChallenge, gateway.StateChallenge, time.Time{}},
		{"challenge script beside a composer is no challenge", chatgpt, with(func(s *pageState) { s.Challenge = true }), settled, rowNone, "", time.Time{}},
		{"challenge title on a page with answers is no challenge", chatgpt, pageState{Title: "Just a moment...", Answers: 2}, at, rowNone, "", time.Time{}},
		{"login wall", chatgpt, pageState{Login: true}, at, rowLoginWall, gateway.StateLogin, time.Time{}},
		{"login page", claude, pageState{URL: "https://claude.ai/login"}, at, rowLoginURL, gateway.StateLogin, time.Time{}},
		{"guest mode once settled", chatgpt, with(func(s *pageState) { s.LoggedIn = false }), settled, rowGuest, gateway.StateLogin, time.Time{}},
		{"guest mode not yet", chatgpt, with(func(s *pageState) { s.LoggedIn = false }), at, rowNone, "", time.Time{}},
		{"throttle modal with its wait", chatgpt, with(func(s *pageState) {
			s.Banner = "Too many requests. You're making requests too quickly. Please wait a few minutes before trying again."
		}), at, rowRate, gateway.StateRateLimited, now.Add(3 * time.Minute)},
		{"throttle modal without a wait", chatgpt, with(func(s *pageState) { s.Banner = "Too many requests" }), at, rowRate, gateway.StateRateLimited, now.Add(time.Minute)},
		{"cap notice with its time", claude, with(func(s *pageState) {
			s.Banner = "You’ve hit your limit for Claude messages. Limits will reset at 9:30 AM."
		}), at, rowCap, gateway.StateCapped, time.Date(2026, 11, 24, 9, 30, 0, 0, time.Local)},
		{"a toast that is no limit", claude, with(func(s *pageState) { s.Banner = "Copied to clipboard" }), at, rowNone, "", time.Time{}},
		{"a degraded notice is no condition of its own", chatgpt, with(func(s *pageState) {
			s.Banner = "You’ve hit the Free plan limit for GPT-5. Responses will use another model until your limit resets after 7:13 PM."
		}), at, rowNone, "", time.Time{}},
		{"chatgpt error turn", chatgpt, with(func(s *pageState) {
			s.ErrorTurn = "Something went wrong while generating the response. If this issue persists please contact us. Retry"
		}), at, rowErrorTurn, "", time.Time{}},
		{"claude error turn", claude, with(func(s *pageState) {
			s.ErrorTurn = "Let me think about the Fano plane and\nClaude’s response could not be fully generated Retry"
		}), at, rowErrorTurn, "", time.Time{}},
		{"an answer is no error turn", claude, with(func(s *pageState) { s.ErrorTurn = "The Fano plane has seven points." }), at, rowNone, "", time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.p.recognise(tc.st, tc.at)
			assert.Equal(t, tc.row, v.Row)
			assert.Equal(t, tc.state, v.Condition.State)
			assert.True(t, tc.until.Equal(v.Condition.Until), "until %s, want %s", v.Condition.Until, tc.until)
			if tc.row != rowNone {
				assert.NotEmpty(t, v.Condition.Reason)
			}
			if tc.st.Banner != "" {
				assert.NotEmpty(t, v.Notice.Kind, "the notice is read whatever the row")
			}
		})
	}
}

// A row of the table on a fake page: the fault the request ends with and
// the condition the backend shows.
func personFaultOf(t *testing.T, err error) *gateway.Fault {
	t.Helper()
	var f *gateway.Fault
	require.True(t, errors.As(err, &f), "a *gateway.Fault: %v", err)
	return f
}

// The table's rows on the fake pages, through a real Chromium: a bot
// check, a login wall, guest mode, a rate notice and a cap notice each put
// the backend in their condition, with the action a person takes where
// one must, and nothing is sent to a page that needs a person.
func TestPageStatesOnFakePages(t *testing.T) {
	local := func(h, m int) time.Time { return time.Date(2026, 3, 10, h, m, 0, 0, time.Local) }
	for _, tc := range []struct {
		name, site string
		ctl        fakechat.Control
		// second: the state shows at the second prompt (a limit reached
		// by the first); later: the page shows it from after the start
		// (recognised before the prompt, not by the start-up check).
		second, later bool
		state         gateway.State
		until         func(now time.Time) time.Time
		action        string
		tweak         func(p *Profile)
	}{
		{name: "chatgpt-challenge", site: "chatgpt", ctl: fakechat.Control{Challenge: true}, state: gateway.StateChallenge,
			action: "clear the site's bot check"},
		{name: "claude-challenge", site: "claude", ctl: fakechat.Control{Challenge: true}, state: gateway.StateChallenge,
			action: "clear the site's bot check"},
		{name: "gemini-challenge-before-the-prompt", site: "gemini", later: true, ctl: fakechat.Control{Challenge: true}, state: gateway.StateChallenge,
			action: "clear the site's bot check"},
		{name: "chatgpt-guest-before-the-prompt", site: "chatgpt", later: true, ctl: fakechat.Control{Shape2026: fakechat.Shape2026{Guest: true}},
			state: gateway.StateLogin, action: "fano login test-chatgpt"},
		{name: "claude-login-page", site: "claude", ctl: fakechat.Control{LoginWall: true}, state: gateway.StateLogin,
			action: "fano login test-claude"},
		{name: "claude-login-page-by-address", site: "claude", ctl: fakechat.Control{LoginWall: true}, state: gateway.StateLogin,
			action: "fano login test-claude", tweak: func(p *Profile) { p.Selectors.LoginWall = nil }},
		{name: "chatgpt-login-wall", site: "chatgpt", ctl: fakechat.Control{LoginWall: true}, state: gateway.StateLogin,
			action: "fano login test-chatgpt"},
		{name: "gemini-guest", site: "gemini", ctl: fakechat.Control{Shape2026: fakechat.Shape2026{Guest: true}}, state: gateway.StateLogin,
			action: "fano login test-gemini"},
		{name: "chatgpt-too-many-requests", site: "chatgpt", second: true, state: gateway.StateRateLimited,
			ctl: fakechat.Control{Limit: 1, Banner: "Too many requests. You're making requests too quickly. " +
				"We've temporarily limited access to your conversations to protect your data. Please wait a few minutes before trying again."},
			until: func(now time.Time) time.Time { return now.Add(3 * time.Minute) }},
		{name: "gemini-cap", site: "gemini", second: true, state: gateway.StateCapped,
			ctl:   fakechat.Control{Limit: 1, Banner: "You’ve reached your limit on 3 Pro until Mar 10, 7:12 PM."},
			until: func(time.Time) time.Time { return local(19, 12) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctl := tc.ctl
			if tc.later {
				ctl = fakechat.Control{}
			}
			f := newFixture2026(t, tc.site, ctl)
			f.cfg.Profile.Completion.LoadTimeoutSeconds = 2
			f.cfg.Profile.Challenge.WaitSeconds = 1
			if tc.tweak != nil {
				tc.tweak(f.cfg.Profile)
			}
			b := f.start(t)
			if tc.later {
				require.NoError(t, b.Health(context.Background()))
				f.site.SetControl(tc.ctl)
			}
			req := gateway.Request{TaskID: "t1", Prompt: "first"}
			if tc.second {
				r := send(t, b, req)
				req = gateway.Request{TaskID: "t1", Prompt: "second", ConversationURL: r.ConversationURL}
			}
			sentBefore := len(f.site.Sent())
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := b.Send(ctx, req)
			require.Error(t, err)
			fault := personFaultOf(t, err)
			assert.Equal(t, tc.state, fault.Condition.State, "%v", err)
			c := b.Condition()
			assert.Equal(t, tc.state, c.State)
			if tc.until != nil {
				want := tc.until(f.clock.Now())
				assert.True(t, want.Equal(fault.Condition.Until), "until %s, want %s", fault.Condition.Until, want)
				assert.True(t, want.Equal(c.Until), "condition until %s, want %s", c.Until, want)
				var rl *gateway.RateLimitedError
				assert.ErrorAs(t, err, &rl, "routed as a limit")
				return
			}
			assert.True(t, gateway.NeedsPerson(tc.state))
			assert.Contains(t, err.Error(), tc.action)
			assert.Contains(t, c.Reason, tc.action, "the condition names what a person must do")
			assert.Equal(t, f.clock.Now().Add(time.Minute), c.Until, "until the next check")
			assert.True(t, fault.NotSent, "seen before the prompt left: no quota spent")
			assert.ErrorIs(t, err, gateway.ErrUnavailable, "routed as a backend that cannot work, not a fault of the task")
			assert.Len(t, f.site.Sent(), sentBefore, "nothing is sent to a page that needs a person")
		})
	}
}

// A bot check that passes by itself within challenge.wait_seconds (an
// automatic check) is no condition: the request goes on.
func TestChallengeThatClearsItself(t *testing.T) {
	f := newFixture2026(t, "chatgpt", fakechat.Control{Challenge: true, ChallengeClearMS: 300})
	f.cfg.Profile.Challenge.WaitSeconds = 20
	b := f.start(t)
	require.NoError(t, b.Health(context.Background()))
	f.site.SetControl(fakechat.Control{Challenge: true, ChallengeClearMS: 300})
	r := send(t, b, gateway.Request{TaskID: "t1", Prompt: "after the check"})
	assert.Equal(t, answer("1", "after the check"), r.Content)
	assert.Equal(t, 2, f.site.Challenges(), "a check at start-up and one before the prompt")
	assert.Equal(t, gateway.StateReady, b.Condition().State)
}

// A bot check recognised when the backend starts puts it in the challenge
// state with the time of its next check; once a person cleared it, the
// backend is ready at that check.
func TestChallengeAtStartAndRecovery(t *testing.T) {
	f := newFixture2026(t, "claude", fakechat.Control{Challenge: true})
	f.cfg.Profile.Challenge.WaitSeconds = 1
	f.cfg.RecheckInterval = 5 * time.Minute
	b := f.start(t)
	c := b.Condition()
	assert.Equal(t, gateway.StateChallenge, c.State)
	assert.Contains(t, c.Reason, "Just a moment...")
	assert.Equal(t, f.clock.Now().Add(5*time.Minute), c.Until)
	err := b.Health(context.Background())
	assert.Equal(t, gateway.StateChallenge, personFaultOf(t, err).Condition.State)

	f.site.SetControl(fakechat.Control{})
	up := b.upSignal()
	f.clock.BlockUntil(1)
	f.clock.Advance(5 * time.Minute)
	waitUp(t, up)
	assert.Equal(t, gateway.StateReady, b.Condition().State)
	assert.Empty(t, f.site.Sent())
}

// A page that needs a person, met by a request after its prompt left (a
// login wall that showed mid-answer), is that request's fault as sent;
// every later request refused for it never left, and costs no quota.
func TestLaterRequestsRefusedByAPersonFaultAreNotSent(t *testing.T) {
	f := newFixture2026(t, "chatgpt", fakechat.Control{})
	b := f.start(t)
	met := &gateway.Fault{Backend: b.Name(), Condition: gateway.Condition{State: gateway.StateLogin, Reason: "login required"}}
	require.Error(t, b.setDownAs(gateway.StateLogin, met))
	_, err := b.Send(context.Background(), gateway.Request{TaskID: "t2", Prompt: "hi"})
	assert.True(t, personFaultOf(t, err).NotSent, "refused before it left: %v", err)
	assert.ErrorIs(t, err, gateway.ErrNotSent)
	assert.False(t, met.NotSent, "the fault of the request that met the wall stays as it was")
	assert.Empty(t, f.site.Sent())
}
