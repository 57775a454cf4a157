package browser

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/gateway"
	"fano/gateway/browser/fakechat"
)

// sendAny sends req and returns the response however it ended.
func sendAny(t *testing.T, b *Backend, req gateway.Request) gateway.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	resp, err := b.Send(ctx, req)
	require.NoError(t, err)
	return resp
}

// notRecorded asserts that resp ended as want and that the one check every
// answer passes (gateway.Whole) refuses it as a transient fault.
func notRecorded(t *testing.T, b *Backend, resp gateway.Response, want gateway.Ending) {
	t.Helper()
	assert.Equal(t, want, resp.Ended)
	assert.NotEmpty(t, resp.Incomplete, "why it is not complete")
	err := gateway.Whole(b.Name(), resp)
	require.Error(t, err, "a %s answer is never recorded", want)
	assert.ErrorIs(t, err, gateway.ErrTransient)
	assert.ErrorIs(t, err, gateway.ErrCut)
}

// A stream that ends early (the stop button goes, no action bar under the
// turn) is not complete, though its text stays unchanged for the stable
// time: the answer is read again from its conversation. When the site
// finished it on its side, the page then shows it whole, with its signal.
func TestCutStreamReadAgainFromPage(t *testing.T) {
	for _, site := range []string{"chatgpt", "gemini"} {
		t.Run(site, func(t *testing.T) {
			t.Parallel()
			f := newFixture2026(t, site, fakechat.Control{})
			b := f.start(t)
			r1 := send(t, b, gateway.Request{TaskID: "t1", Prompt: "first"})
			f.site.SetControl(fakechat.Control{CutAfter: 6})
			loads := f.site.Loads()
			r := send(t, b, gateway.Request{TaskID: "t1", Prompt: "Describe the Fano plane.", ConversationURL: r1.ConversationURL})
			assert.Equal(t, answer("2", "Describe the Fano plane."), r.Content)
			assert.Equal(t, gateway.EndComplete, r.Ended)
			assert.Len(t, f.site.Sent(), 2, "read again, not asked again")
			assert.Equal(t, loads+2, f.site.Loads(), "the conversation was opened, then loaded once more to read the answer again")
		})
	}
}

// When the page still shows the answer cut after it was read again, the
// answer ends cut: it is never recorded.
func TestCutStreamKeptIsCut(t *testing.T) {
	f := newFixture2026(t, "chatgpt", fakechat.Control{})
	b := f.start(t)
	r1 := send(t, b, gateway.Request{TaskID: "t1", Prompt: "first"})
	f.site.SetControl(fakechat.Control{CutAfter: 6, CutKept: true})
	r := sendAny(t, b, gateway.Request{TaskID: "t1", Prompt: "Describe the Fano plane.", ConversationURL: r1.ConversationURL})
	assert.Equal(t, "Answer 2 to: Describe the Fano", r.Content, "the text the page shows")
	notRecorded(t, b, r, gateway.EndCut)
	assert.Contains(t, r.Incomplete, "without the site's completion signal")
	// The next prompt works as ever.
	f.site.SetControl(fakechat.Control{})
	r3 := send(t, b, gateway.Request{TaskID: "t1", Prompt: "next", ConversationURL: r1.ConversationURL})
	assert.Equal(t, answer("3", "next"), r3.Content)
}

// A new conversation cut before it has an address of its own cannot be
// read again: it ends cut.
func TestCutFirstAnswerWithoutAddress(t *testing.T) {
	f := newFixture2026(t, "chatgpt", fakechat.Control{CutAfter: 3, CutKept: true,
		Shape2026: fakechat.Shape2026{PendingURL: true}})
	b := f.start(t)
	r := sendAny(t, b, gateway.Request{TaskID: "t1", Prompt: "Describe the Fano plane."})
	notRecorded(t, b, r, gateway.EndCut)
}

// Claude marks the reply being written with data-is-streaming="true": a
// pause longer than the stable time while the flag stays is not the end,
// and the answer is complete once the flag is cleared.
func TestClaudeStreamingFlag(t *testing.T) {
	f := newFixture2026(t, "claude", fakechat.Control{PauseMS: 800})
	b := f.start(t)
	r := send(t, b, gateway.Request{TaskID: "t1", Prompt: "Count the lines."})
	assert.Equal(t, answer("1", "Count the lines."), r.Content)
	assert.Equal(t, gateway.EndComplete, r.Ended)
	assert.Equal(t, 0, f.site.Loads(), "whole at the first reading: not read again")
}

// An error turn ("Something went wrong while generating the response.",
// "Claude's response could not be fully generated") is asked again with
// the site's own Retry control, not by sending the prompt again: one
// failed attempt, one click, a whole answer.
func TestErrorTurnRetriedWithSiteControl(t *testing.T) {
	for _, site := range []string{"chatgpt", "claude", "gemini"} {
		t.Run(site, func(t *testing.T) {
			t.Parallel()
			f := newFixture2026(t, site, fakechat.Control{ErrorTurns: 1, ErrorAfter: 5})
			b := f.start(t)
			r := send(t, b, gateway.Request{TaskID: "t1", Prompt: "Let me think about the Fano plane."})
			assert.Equal(t, answer("1", "Let me think about the Fano plane."), r.Content)
			assert.Equal(t, gateway.EndComplete, r.Ended)
			assert.Equal(t, 1, f.site.Retries(), "the site's Retry was clicked once")
			assert.Len(t, f.site.Sent(), 1, "the prompt was not sent again")
		})
	}
}

// Retry is bounded (error_turn.retries): a turn that keeps failing ends
// as an error turn, which is never recorded (the text the turn kept is
// not an answer), and the backend takes the next prompt.
func TestErrorTurnThatKeepsFailing(t *testing.T) {
	for _, site := range []string{"chatgpt", "claude"} {
		t.Run(site, func(t *testing.T) {
			t.Parallel()
			f := newFixture2026(t, site, fakechat.Control{ErrorTurns: 10, ErrorAfter: 5})
			b := f.start(t)
			r := sendAny(t, b, gateway.Request{TaskID: "t1", Prompt: "Let me think about the Fano plane."})
			notRecorded(t, b, r, gateway.EndErrorTurn)
			assert.Contains(t, r.Incomplete, "ended the answer with an error")
			assert.Equal(t, 2, f.site.Retries(), "Retry clicked error_turn.retries times, no more")
			assert.Len(t, f.site.Sent(), 1)
			assert.NotEqual(t, gateway.StateStalled, b.Condition().State)

			// A resend in the same conversation: the old error turn on the
			// page is not this answer's, though it is the last turn there
			// until the site starts the new answer.
			f.site.SetControl(fakechat.Control{Shape2026: fakechat.Shape2026{StartDelayMS: 400}})
			r2 := send(t, b, gateway.Request{TaskID: "t1", Prompt: "Again, please.", ConversationURL: r.ConversationURL})
			assert.Equal(t, answer("2", "Again, please."), r2.Content)
			assert.Equal(t, 2, f.site.Retries(), "the old error turn was not taken for the new answer's")
		})
	}
}

// An interrupted prompt whose answer the page shows cut (the site kept it
// so) is read from the page as cut, never as complete; one the site
// finished is read whole.
func TestInterruptedAnswerReadFromPageEndsTruthfully(t *testing.T) {
	f := newFixture2026(t, "chatgpt", fakechat.Control{})
	b := f.start(t)
	r := send(t, b, gateway.Request{TaskID: "t1", Prompt: "first"})

	f.site.SetControl(fakechat.Control{CutAfter: 4, CutKept: true})
	sendAny(t, b, gateway.Request{TaskID: "t1", Prompt: "second", ConversationURL: r.ConversationURL, KnownAnswers: 1})
	cut := sendAny(t, b, gateway.Request{TaskID: "t1", Prompt: "second", ConversationURL: r.ConversationURL, KnownAnswers: 1, Interrupted: true})
	assert.True(t, cut.FromPage)
	notRecorded(t, b, cut, gateway.EndCut)
	assert.Len(t, f.site.Sent(), 2, "the interrupted prompt is not sent again")

	f.site.SetControl(fakechat.Control{CutAfter: 4})
	sendAny(t, b, gateway.Request{TaskID: "t1", Prompt: "third", ConversationURL: r.ConversationURL, KnownAnswers: 2})
	whole := send(t, b, gateway.Request{TaskID: "t1", Prompt: "third", ConversationURL: r.ConversationURL, KnownAnswers: 2, Interrupted: true})
	assert.True(t, whole.FromPage)
	assert.Equal(t, answer("3", "third"), whole.Content)
}
