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

// A new conversation's address is told while its first answer still
// streams; fano stops right then (the answer is left to the site). Asked
// again for that address as interrupted, with no answer known there, the
// backend reads the answer from the page: the site got the prompt once.
func TestNewConversationAddressedThenReadFromPage(t *testing.T) {
	f := newFixture(t, "turns")
	b := f.start(t)
	f.site.SetControl(fakechat.Control{TokenMS: 60}) // the answer takes seconds

	ctx, stop := context.WithCancelCause(context.Background())
	defer stop(nil)
	addressed := make(chan string, 1)
	_, err := b.Send(ctx, gateway.Request{TaskID: "t1", Prompt: "first of its conversation", ConversationAddressed: func(url string) {
		addressed <- url
		stop(gateway.ErrShutdown) // fano stops as soon as the address is known
	}})
	require.ErrorIs(t, err, context.Canceled, "the send ended with the stop, before its answer")
	var url string
	select {
	case url = <-addressed:
	default:
		t.Fatal("the new conversation's address was not told before the answer completed")
	}
	id := f.site.ConversationID(url)
	require.NotEmpty(t, f.site.Conversation(id), "the address is the conversation's own: %s", url)
	stops, _ := f.site.Stops()
	require.Zero(t, stops, "a stop of fano leaves the answer to the site")

	f.site.SetControl(fakechat.Control{})
	resp := send(t, b, gateway.Request{TaskID: "t1", Prompt: "first of its conversation", ConversationURL: url, Interrupted: true,
		ConversationAddressed: func(string) { t.Error("a continued conversation is not addressed again") }})
	assert.True(t, resp.FromPage, "read from the page")
	assert.Equal(t, answer("1", "first of its conversation"), resp.Content)
	assert.Equal(t, url, resp.ConversationURL)
	require.Len(t, f.site.Sent(), 1, "the prompt reached the site once")
}

// The address is told once, and only for a new conversation.
func TestAddressToldOnceForANewConversation(t *testing.T) {
	f := newFixture(t, "turns")
	b := f.start(t)
	var told []string
	r1 := send(t, b, gateway.Request{TaskID: "t1", Prompt: "one", ConversationAddressed: func(url string) { told = append(told, url) }})
	require.Equal(t, []string{r1.ConversationURL}, told, "told once, the address the answer carries")
	r2 := send(t, b, gateway.Request{TaskID: "t1", Prompt: "two", ConversationURL: r1.ConversationURL, KnownAnswers: 1,
		ConversationAddressed: func(url string) { told = append(told, url) }})
	assert.Equal(t, r1.ConversationURL, r2.ConversationURL)
	assert.Len(t, told, 1, "a continued conversation is not addressed again")
}

// An address recorded before the first answer whose conversation is gone
// by the time the interrupted prompt is asked again (deleted on the site)
// is conversation_gone, as for any conversation: nothing is typed there.
func TestAddressedConversationGoneBeforeTheRetry(t *testing.T) {
	f := newFixture(t, "turns")
	b := f.start(t)
	var url string
	r := send(t, b, gateway.Request{TaskID: "t1", Prompt: "first", ConversationAddressed: func(u string) { url = u }})
	require.Equal(t, r.ConversationURL, url)
	f.site.Forget(f.site.ConversationID(url))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := b.Send(ctx, gateway.Request{TaskID: "t1", Prompt: "first", ConversationURL: url, Interrupted: true})
	require.ErrorIs(t, err, gateway.ErrConversationGone)
	assert.Len(t, f.site.Sent(), 1, "nothing was typed into a conversation that is gone")
}
