package actors

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/gateway"
	"fano/gateway/browser"
	"fano/gateway/browser/fakechat"
	"fano/modules"
	"fano/modules/probe"
	"fano/pb"
)

// fano stopped (SIGTERM) while a browser answer streamed: the site is left
// to finish it, and after the restart the task reads that answer from the
// page instead of asking a second time. Real Chromium, the fake Turns site.
func TestShutdownMidAnswerResumesFromPage(t *testing.T) {
	release, err := browser.AcquireDriver()
	require.NoError(t, err, "browser tests need Chromium and the Playwright driver; run `make deps`")
	defer release()
	site, err := fakechat.New("turns")
	require.NoError(t, err)
	defer site.Close()
	dir, err := fakechat.Dir()
	require.NoError(t, err)
	profiles, err := browser.LoadProfiles(filepath.Join(dir, "turns", "profile.yaml"))
	require.NoError(t, err)
	profile, err := profiles["turns"].WithBaseURL(site.URL())
	require.NoError(t, err)
	profile.Completion = browser.Completion{StableMS: 150, PollMS: 30, StartTimeoutSeconds: 10, LoadTimeoutSeconds: 10}
	profileDir := browser.ProfileDir(t.TempDir(), "chatgpt")
	newBackend := func() gateway.Backend {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		be, err := browser.New(ctx, browser.Config{Name: "chatgpt", Profile: profile, ProfileDir: profileDir, Headless: true,
			ExtraArgs: []string{"--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"}})
		require.NoError(t, err)
		t.Cleanup(func() { _ = be.Close() })
		return be
	}
	// Slow streaming: the second answer is still streaming when fano stops.
	site.SetControl(fakechat.Control{TokenMS: 60})
	pc := probe.Config{Questions: questions(1), Turns: 2}

	b := setup(t, setupOpts{backends: []string{"chatgpt"}, probe: pc,
		mutate: func(o *Options) { o.Backends[0] = newBackend() }})
	sys := b.start()
	_, first := site.Sends()
	<-first
	n, second := site.Sends()
	if n < 2 {
		<-second
	}
	require.NoError(t, sys.Stop())
	stops, _ := site.Stops()
	assert.Zero(t, stops, "a shutdown does not stop the site's answer")

	b2 := setup(t, setupOpts{backends: []string{"chatgpt"}, probe: pc,
		mutate: func(o *Options) { o.Backends[0] = newBackend() }})
	b2.log, b2.opts.Log = b.log, b.log
	b2.opts.Modules[0] = b2.probe
	b2.start()
	b2.waitCompleted(1)

	sent := site.Sent()
	require.Len(t, sent, 2, "the interrupted prompt is not sent again")
	var answers map[string][]string
	require.NoError(t, b2.sys.WithModule(probe.Name, func(m modules.Module) { answers = m.(*probe.Module).Answers() }))
	for _, a := range answers {
		require.Len(t, a, 2)
		assert.Equal(t, "Answer 2 to: "+sent[1].Prompt+" "+fakechat.Tail, a[1])
	}
	// A finished task's conversation is read back from the archive.
	tk, ok := b2.sys.Task(b2.sys.Tasks(nil, 0)[0].Id)
	require.True(t, ok)
	assert.Equal(t, pb.TaskState_TASK_STATE_COMPLETED, tk.State)
	assert.EqualValues(t, 2, tk.Conversation.Backends["chatgpt"].Answers)
}

// fano stopped (SIGTERM) while the first prompt of a task's new
// conversation was answered, once the site had given the conversation its
// address: after the restart the answer is read from that page, and the
// prompt is not sent a second time in a new conversation.
func TestShutdownDuringFirstPromptResumesFromPage(t *testing.T) {
	site := streamingTurns(t)
	profileDir := browser.ProfileDir(t.TempDir(), "chatgpt")
	newBackend := func() gateway.Backend {
		be, err := turnsBackend(site.URL(), profileDir, zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel))
		require.NoError(t, err)
		t.Cleanup(func() { _ = be.Close() })
		return be
	}

	b := setup(t, setupOpts{backends: []string{"chatgpt"}, probe: firstPrompt,
		mutate: func(o *Options) { o.Backends[0] = newBackend() }})
	sys := b.start()
	addressed := b.waitEvent("the new conversation's address", func(n Notice) bool {
		require.Nil(t, n.Event.GetLlmResponseReceived(), "the answer came before the conversation's address")
		return n.Event.GetLlmConversationAddressed() != nil
	}).Event.GetLlmConversationAddressed()
	require.NoError(t, sys.Stop())
	stops, _ := site.Stops()
	assert.Zero(t, stops, "a shutdown does not stop the site's answer")

	b2 := setup(t, setupOpts{backends: []string{"chatgpt"}, probe: firstPrompt,
		mutate: func(o *Options) { o.Backends[0] = newBackend() }})
	b2.log, b2.opts.Log = b.log, b.log
	b2.start()
	b2.waitCompleted(1)

	sent := site.Sent()
	require.Len(t, sent, 1, "the interrupted first prompt is not sent again")
	for _, a := range probeAnswers(t, b2.sys) {
		assert.Equal(t, []string{"Answer 1 to: " + sent[0].Prompt + " " + fakechat.Tail}, a)
	}
	tk, ok := b2.sys.Task(b2.sys.Tasks(nil, 0)[0].Id)
	require.True(t, ok)
	assert.Equal(t, addressed.Url, tk.Conversation.Backends["chatgpt"].Url)
	assert.EqualValues(t, 1, tk.Conversation.Backends["chatgpt"].Answers)
}
