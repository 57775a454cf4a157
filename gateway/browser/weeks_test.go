package browser

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/gateway"
	"fano/gateway/browser/fakechat"
)

// Tests of what a browser backend needs to run for weeks (issue 12), on
// the fake "Turns" site driven by a user profile written from the README.

// turnsFixture is the Turns site with a profile whose stable time is long:
// only the complete signal can end an answer quickly.
func turnsFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t, "turns")
	f.cfg.Profile.Completion = Completion{StableMS: 60_000, PollMS: 30, StartTimeoutSeconds: 10, LoadTimeoutSeconds: 10}
	return f
}

// sendErr sends req and returns the error it must end with.
func sendErr(t *testing.T, b *Backend, req gateway.Request) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	_, err := b.Send(ctx, req)
	require.Error(t, err)
	return err
}

// The complete signal (the toolbar under a finished answer) ends the wait
// at once: with a 60 s stable time the answer arrives well inside the
// request's 30 s. A pause before the last token with the stop button shown
// must not end it early.
func TestCompleteSignalEndsAnswer(t *testing.T) {
	f := turnsFixture(t)
	f.site.SetControl(fakechat.Control{PauseMS: 300})
	b := f.start(t)
	r := send(t, b, gateway.Request{TaskID: "t1", Prompt: "Name the smallest projective plane."})
	assert.Equal(t, answer("1", "Name the smallest projective plane."), r.Content)
	assert.Empty(t, r.Incomplete)
	r2 := send(t, b, gateway.Request{TaskID: "t1", Prompt: "And the next?", ConversationURL: r.ConversationURL, KnownAnswers: 1})
	assert.Equal(t, answer("2", "And the next?"), r2.Content)
	assert.Equal(t, r.ConversationURL, r2.ConversationURL)
}

// complete is a selector list like the others: the first selector that
// matches anything on the page is the signal.
func TestCompleteSignalAsList(t *testing.T) {
	f := turnsFixture(t)
	f.cfg.Profile.Complete = SelectorList{"#no-such-toolbar", ".turn-actions"}
	b := f.start(t)
	r := send(t, b, gateway.Request{Prompt: "A list of signals?"})
	assert.Equal(t, answer("1", "A list of signals?"), r.Content)
	assert.Empty(t, r.Incomplete)
}

// answer_text: attribute reads the answer from an attribute instead of
// the text.
func TestAnswerTextAttribute(t *testing.T) {
	f := turnsFixture(t)
	f.cfg.Profile.Selectors.Answer = SelectorList{"div.turn.bot"}
	f.cfg.Profile.AnswerText = "attribute:class"
	b := f.start(t)
	assert.Equal(t, "turn bot", send(t, b, gateway.Request{Prompt: "hello"}).Content)
}

// A stalled answer (text stops growing, stop button stays) ends after
// max_stall_seconds, not at the request timeout: fano clicks stop, keeps
// the text the page shows (a cut answer, never recorded), and the backend
// takes the next request at once.
func TestStallStopsAnswerAndKeepsText(t *testing.T) {
	f := turnsFixture(t)
	f.cfg.Profile.MaxStallSeconds = 1
	f.site.SetControl(fakechat.Control{StallAfter: 4})
	b := f.start(t)
	stops, _ := f.site.Stops()
	start := time.Now()
	r := sendAny(t, b, gateway.Request{TaskID: "t1", Prompt: "Count the lines of the Fano plane."})
	assert.Less(t, time.Since(start), 20*time.Second)
	assert.Equal(t, "Answer 1 to: Count", r.Content)
	assert.Regexp(t, `^stalled at 18 chars for [12]s$`, r.Incomplete)
	notRecorded(t, b, r, gateway.EndCut)
	after, _ := f.site.Stops()
	assert.Equal(t, stops+1, after, "the stalled answer is stopped")
	c := b.Condition()
	assert.Equal(t, gateway.StateStalled, c.State)
	assert.Contains(t, c.Reason, "stalled at 18 chars")

	f.site.SetControl(fakechat.Control{})
	assert.Equal(t, answer("1", "next"), send(t, b, gateway.Request{Prompt: "next"}).Content)
	assert.Equal(t, gateway.StateReady, b.Condition().State)
}

// An answer that never starts is a hang, named as such, after the start
// timeout; so is one that runs past max_answer_seconds with nothing shown.
func TestHangNeverStarted(t *testing.T) {
	f := turnsFixture(t)
	f.cfg.Profile.Completion.StartTimeoutSeconds = 1
	f.site.SetControl(fakechat.Control{NoStart: true})
	b := f.start(t)
	err := sendErr(t, b, gateway.Request{Prompt: "anyone?"})
	assert.Equal(t, "hung", gateway.Kind(err))
	assert.Contains(t, err.Error(), "never started")
	assert.Equal(t, gateway.StateStalled, b.Condition().State)
}

// A conversation deleted on the site (its URL goes to a new chat) is gone:
// one clear error, nothing sent into the new chat. The task's next request
// starts a new conversation primed with its history.
func TestConversationGoneAndPrimedAgain(t *testing.T) {
	f := turnsFixture(t)
	b := f.start(t)
	r := send(t, b, gateway.Request{TaskID: "t1", Prompt: "first question"})
	f.site.Forget(f.site.ConversationID(r.ConversationURL))
	n := len(f.site.Sent())

	err := sendErr(t, b, gateway.Request{TaskID: "t1", Prompt: "second question", ConversationURL: r.ConversationURL, KnownAnswers: 1})
	assert.Equal(t, "conversation_gone", gateway.Kind(err))
	assert.Contains(t, err.Error(), r.ConversationURL)
	assert.Len(t, f.site.Sent(), n, "nothing is sent into the chat the site redirected to")

	history := []gateway.Message{{Role: "user", Content: "first question"}, {Role: "assistant", Content: r.Content}}
	r2 := send(t, b, gateway.Request{TaskID: "t1", Prompt: "second question", History: history})
	assert.Equal(t, 1, r2.PrimedTurns)
	assert.NotEqual(t, r.ConversationURL, r2.ConversationURL)
	sent := f.site.Sent()
	primed := sent[len(sent)-1].Prompt
	assert.Contains(t, primed, "User: first question")
	assert.Contains(t, primed, "Assistant: "+r.Content)
	assert.True(t, strings.HasSuffix(primed, "\n\nsecond question"), primed)
	assert.True(t, strings.HasPrefix(r2.Content, "Answer 1 to: [This continues an earlier conversation"), r2.Content)
}

// A conversation of another account (another backend's browser profile on
// the same site) is not found there: gone, never opened as if it were this
// account's. A second origin keeps its own login: its wall puts only its
// backend down.
func TestForeignConversationAndSecondOrigin(t *testing.T) {
	f := turnsFixture(t)
	a := f.start(t)
	r := send(t, a, gateway.Request{TaskID: "t1", Prompt: "on account A"})

	cfgB := f.cfg
	cfgB.Name = "test-turns-b"
	cfgB.ProfileDir = ProfileDir(t.TempDir(), "test-turns-b")
	b, err := New(context.Background(), cfgB)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	err = sendErr(t, b, gateway.Request{TaskID: "t1", Prompt: "on account B", ConversationURL: r.ConversationURL, KnownAnswers: 1})
	assert.Equal(t, "conversation_gone", gateway.Kind(err))
	assert.Contains(t, err.Error(), "is gone") // the notice or the redirect, whichever the page shows first

	other, err := fakechat.New("turns")
	require.NoError(t, err)
	t.Cleanup(other.Close)
	other.SetControl(fakechat.Control{LoginWall: true})
	cfgC := f.cfg
	cfgC.Name = "test-turns-c"
	cfgC.ProfileDir = ProfileDir(t.TempDir(), "test-turns-c")
	cfgC.Profile, err = f.cfg.Profile.WithBaseURL(other.URL())
	require.NoError(t, err)
	c, err := New(context.Background(), cfgC)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	assert.Equal(t, gateway.StateLogin, c.Condition().State)
	assert.Equal(t, gateway.StateReady, a.Condition().State)
	// Another origin's URL is refused before anything is loaded.
	err = sendErr(t, c, gateway.Request{TaskID: "t1", Prompt: "x", ConversationURL: r.ConversationURL})
	assert.NotEqual(t, "conversation_gone", gateway.Kind(err))
}

// A prompt interrupted by fano's shutdown is left to finish on the site;
// when the task asks it again, the answer is read from the page, not asked
// a second time.
func TestResumeReadsAnswerFromPage(t *testing.T) {
	f := turnsFixture(t)
	b := f.start(t)
	r := send(t, b, gateway.Request{TaskID: "t1", Prompt: "first"})

	f.site.SetControl(fakechat.Control{TokenMS: 200})
	ctx, cancel := context.WithCancelCause(context.Background())
	n, sentCh := f.site.Sends()
	errCh := make(chan error, 1)
	go func() {
		_, err := b.Send(ctx, gateway.Request{TaskID: "t1", Prompt: "second", ConversationURL: r.ConversationURL, KnownAnswers: 1})
		errCh <- err
	}()
	<-sentCh
	cancel(gateway.ErrShutdown)
	require.Error(t, <-errCh)
	stops, _ := f.site.Stops()
	assert.Equal(t, 0, stops, "a shutdown leaves the answer running on the site")

	f.site.SetControl(fakechat.Control{})
	r2 := send(t, b, gateway.Request{TaskID: "t1", Prompt: "second", ConversationURL: r.ConversationURL, KnownAnswers: 1, Interrupted: true})
	assert.True(t, r2.FromPage)
	assert.Equal(t, answer("2", "second"), r2.Content)
	assert.Len(t, f.site.Sent(), n+1, "the interrupted prompt is not sent again")

	// Not answered on the page (nothing beyond the known answers): asked.
	r3 := send(t, b, gateway.Request{TaskID: "t1", Prompt: "third", ConversationURL: r.ConversationURL, KnownAnswers: 2, Interrupted: true})
	assert.False(t, r3.FromPage)
	assert.Equal(t, answer("3", "third"), r3.Content)
}

// A login wall is the login state with the time of the next check. The
// backend checks itself every interval; checks send no prompt and are not
// requests; once the wall is gone the backend is ready at the next check,
// one interval later, without anyone sending to it.
func TestLoginWallStateAndRecovery(t *testing.T) {
	f := turnsFixture(t)
	f.cfg.RecheckInterval = 30 * time.Second
	f.site.SetControl(fakechat.Control{LoginWall: true})
	b := f.start(t)
	c := b.Condition()
	assert.Equal(t, gateway.StateLogin, c.State)
	assert.Contains(t, c.Reason, "login required")
	assert.Equal(t, f.clock.Now().Add(30*time.Second), c.Until)

	for range 3 { // still walled: each check keeps it down
		f.clock.BlockUntil(1)
		f.clock.Advance(30 * time.Second)
	}
	f.clock.BlockUntil(1)
	assert.Equal(t, gateway.StateLogin, b.Condition().State)

	f.site.SetControl(fakechat.Control{})
	up := b.upSignal()
	f.clock.Advance(30 * time.Second)
	waitUp(t, up)
	assert.Equal(t, gateway.StateReady, b.Condition().State)
	assert.Equal(t, 0, b.Stats().Requests, "checks are not requests")
	assert.Empty(t, f.site.Sent())
}

func waitUp(t *testing.T, up <-chan struct{}) {
	t.Helper()
	select {
	case <-up:
	case <-time.After(30 * time.Second):
		t.Fatal("the backend did not come up at its recheck")
	}
}

// A usage cap shows as capped until the time the banner named.
func TestCapCondition(t *testing.T) {
	f := newFixture(t, "chatgpt")
	f.site.SetControl(fakechat.Control{Limit: 1, Banner: "You've hit your limit. Please try again after 3:45 PM."})
	b := f.start(t)
	send(t, b, gateway.Request{Prompt: "first"})
	sendErr(t, b, gateway.Request{Prompt: "second"})
	c := b.Condition()
	assert.Equal(t, gateway.StateCapped, c.State)
	assert.Equal(t, f.clock.Now().Add(45*time.Minute), c.Until)
	f.clock.Advance(46 * time.Minute)
	assert.Equal(t, gateway.StateReady, b.Condition().State)
}

// answer_text copy:<selector> reads the answer through the site's copy
// button (its markdown), not the rendered text.
func TestAnswerTextCopyButton(t *testing.T) {
	f := turnsFixture(t)
	f.cfg.Profile.AnswerText = "copy:button[data-action='copy']"
	b := f.start(t)
	r := send(t, b, gateway.Request{Prompt: "quote me"})
	assert.Equal(t, "> "+answer("1", "quote me"), r.Content)
	r2 := send(t, b, gateway.Request{Prompt: "and again", ConversationURL: r.ConversationURL})
	assert.Equal(t, "> "+answer("2", "and again"), r2.Content, "the copy button of the last answer")
}
