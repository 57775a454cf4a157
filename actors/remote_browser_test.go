//go:build !race

package actors

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/gateway"
	"fano/gateway/browser"
	"fano/gateway/browser/fakechat"
	"fano/modules/probe"
	"fano/pb"
	"fano/remote"
)

// These tests run three actor systems on 127.0.0.1: the orchestrator's,
// the hub it listens for gateway hosts with, and a gateway host whose
// browser backend drives a real Chromium against a fake chat site.
// protoactor-go remote has data races of its own: not under -race.

// hostedBrowser is the fake Turns site, a browser backend on it and what
// it needs to start again on the same profile.
type hostedBrowser struct {
	t          *testing.T
	site       *fakechat.Server
	profile    *browser.Profile
	profileDir string
	recheck    time.Duration
}

func newHostedBrowser(t *testing.T) *hostedBrowser {
	t.Helper()
	site := turnsSite(t)
	dir, err := fakechat.Dir()
	require.NoError(t, err)
	profiles, err := browser.LoadProfiles(filepath.Join(dir, "turns", "profile.yaml"))
	require.NoError(t, err)
	profile, err := profiles["turns"].WithBaseURL(site.URL())
	require.NoError(t, err)
	profile.Completion = browser.Completion{StableMS: 150, PollMS: 30, StartTimeoutSeconds: 10, LoadTimeoutSeconds: 10}
	return &hostedBrowser{t: t, site: site, profile: profile, profileDir: browser.ProfileDir(t.TempDir(), "chatgpt"),
		recheck: time.Minute}
}

// backend starts a browser backend named chatgpt on the profile.
func (hb *hostedBrowser) backend() *browser.Backend {
	hb.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	be, err := browser.New(ctx, browser.Config{Name: "chatgpt", Profile: hb.profile, ProfileDir: hb.profileDir, Headless: true,
		RecheckInterval: hb.recheck, Logger: zerolog.New(zerolog.NewTestWriter(hb.t)).Level(zerolog.WarnLevel), ExtraArgs: []string{"--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"}})
	require.NoError(hb.t, err)
	hb.t.Cleanup(func() { _ = be.Close() })
	return be
}

// testHub is the orchestrator's side, with host desk holding chatgpt.
type testHub struct {
	*remote.Hub
	mu      sync.Mutex
	changed chan struct{} // closed and replaced at every change of a host's state
}

func startTestHub(t *testing.T) *testHub {
	t.Helper()
	h := &testHub{changed: make(chan struct{})}
	hub, err := remote.StartHub(remote.HubConfig{Transport: remote.Transport{Listen: "127.0.0.1:0", Plaintext: true},
		Version: "v-test", Ledger: "ledger-test", Routed: map[string][]string{"desk": {"chatgpt"}},
		Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
		OnChange: func(remote.HostStatus) {
			h.mu.Lock()
			close(h.changed)
			h.changed = make(chan struct{})
			h.mu.Unlock()
		}})
	require.NoError(t, err)
	h.Hub = hub
	t.Cleanup(hub.Close)
	return h
}

// waitFor waits until host desk is in state.
func (h *testHub) waitFor(t *testing.T, state remote.HostState) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		h.mu.Lock()
		changed := h.changed
		h.mu.Unlock()
		for _, st := range h.Status() {
			if st.Name == "desk" && st.State == state {
				return
			}
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("host desk not %s: %+v", state, h.Status())
		}
	}
}

// startBrowserHost starts host desk holding be, on listen, noting the
// prompts it hands the browser in journal.
func startBrowserHost(t *testing.T, hub *testHub, be gateway.Backend, listen, journal string) *remote.Host {
	t.Helper()
	host, err := remote.StartHost(remote.HostConfig{Name: "desk", Version: "v-test", Orchestrator: hub.Address(),
		Transport: remote.Transport{Listen: listen, Plaintext: true}, Backends: []gateway.Backend{be},
		Types: map[string]string{"chatgpt": "browser"}, JournalFile: journal,
		Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)})
	require.NoError(t, err)
	t.Cleanup(host.Close)
	return host
}

// hostedSetup is the orchestrator whose only backend, chatgpt, is held by
// host desk; a backend parked for a person is re-checked every
// personRecheck.
func hostedSetup(t *testing.T, hub *testHub, pc probe.Config, personRecheck time.Duration) *bundle {
	return setup(t, setupOpts{backends: []string{"chatgpt"}, probe: pc,
		mutate: func(o *Options) {
			o.Backends[0] = hub.Backend("chatgpt", "desk")
			o.CredentialsRecheck = personRecheck
		}})
}

// A task's two turns go to a browser backend on a gateway host: the host
// drives Chromium on the fake site, each answer comes back whole and is
// recorded, and the second turn continues the first's conversation (its
// URL crossed both ways).
func TestBrowserBackendOnAGatewayHost(t *testing.T) {
	hb := newHostedBrowser(t)
	hub := startTestHub(t)
	startBrowserHost(t, hub, hb.backend(), "127.0.0.1:0", filepath.Join(t.TempDir(), "prompts.jsonl"))
	hub.waitFor(t, remote.HostConnected)

	b := hostedSetup(t, hub, probe.Config{Questions: questions(1), Turns: 2}, time.Minute)
	b.start()
	b.waitCompleted(1)

	sent := hb.site.Sent()
	require.Len(t, sent, 2, "each prompt reached the site once")
	answers := probeAnswers(t, b.sys)
	require.Len(t, answers, 1)
	for _, a := range answers {
		require.Len(t, a, 2)
		assert.Equal(t, "Answer 1 to: "+sent[0].Prompt+" "+fakechat.Tail, a[0])
		assert.Equal(t, "Answer 2 to: "+sent[1].Prompt+" "+fakechat.Tail, a[1])
	}
	tk, ok := b.sys.Task(b.sys.Tasks(nil, 0)[0].Id)
	require.True(t, ok)
	assert.Equal(t, pb.TaskState_TASK_STATE_COMPLETED, tk.State)
	conv := tk.Conversation.Backends["chatgpt"]
	require.NotNil(t, conv)
	assert.EqualValues(t, 2, conv.Answers)
	id := hb.site.ConversationID(conv.Url)
	assert.Equal(t, id, sent[1].Conversation, "the second turn continued the task's conversation")
	assert.Len(t, hb.site.Conversation(id), 4, "one conversation: two prompts, two answers")
}

// The fake site shows a login wall: the browser on the host finds it, and
// the orchestrator sees its backend as `login`, a person's condition. The
// task waits, not FAILED, and nothing reaches the site. Once the person
// has logged in, the browser's own re-check on the host and the
// orchestrator's of its parked backend bring it back, and the prompt is
// sent once.
func TestLoginWallOnAGatewayHost(t *testing.T) {
	hb := newHostedBrowser(t)
	hb.recheck = 2 * time.Second
	hb.site.SetControl(fakechat.Control{LoginWall: true})
	hub := startTestHub(t)
	startBrowserHost(t, hub, hb.backend(), "127.0.0.1:0", filepath.Join(t.TempDir(), "prompts.jsonl"))
	hub.waitFor(t, remote.HostConnected)

	b := hostedSetup(t, hub, probe.Config{Questions: questions(1), Turns: 1}, 500*time.Millisecond)
	b.start()
	b.waitEvent("login condition", func(n Notice) bool {
		c := n.Event.GetBackendConditionRecorded()
		return c.GetBackend() == "chatgpt" && c.GetState() == string(gateway.StateLogin)
	})
	q := b.sys.Quotas()[0]
	assert.Equal(t, "login", q.State)
	assert.Equal(t, "person", q.Class)
	assert.False(t, q.Available)
	for _, tk := range b.sys.Tasks(nil, 0) {
		assert.NotEqual(t, pb.TaskState_TASK_STATE_FAILED, tk.State, "a login wall failed task %s", tk.Id)
	}
	assert.Empty(t, hb.site.Sent(), "a prompt reached a site behind its login wall")

	hb.site.SetControl(fakechat.Control{}) // the person logged in
	b.waitCompleted(1)
	sent := hb.site.Sent()
	require.Len(t, sent, 1, "the prompt was sent once")
	for _, a := range probeAnswers(t, b.sys) {
		assert.Equal(t, []string{"Answer 1 to: " + sent[0].Prompt + " " + fakechat.Tail}, a)
	}
	assert.Zero(t, b.logged(t, func(e *pb.Event) bool { return e.GetTaskFailed() != nil }), "a task failed")
}

// The host process stops while its browser's answer to a task's second
// prompt still streams (the site goes on answering). The orchestrator's
// call ends as host_lost; when a new host process on the same browser
// profile registers, the task's request comes again and the host, which
// noted the prompt as in flight, has the browser read the answer from the
// page instead of sending the prompt a second time.
func TestRestartedGatewayHostReadsTheAnswerFromThePage(t *testing.T) {
	hb := newHostedBrowser(t)
	hb.site.SetControl(fakechat.Control{TokenMS: 60}) // the second answer still streams when the host stops
	journal := filepath.Join(t.TempDir(), "prompts.jsonl")
	hub := startTestHub(t)
	first := hb.backend()
	host := startBrowserHost(t, hub, first, "127.0.0.1:0", journal)
	hub.waitFor(t, remote.HostConnected)

	b := hostedSetup(t, hub, probe.Config{Questions: questions(1), Turns: 2}, time.Minute)
	b.start()
	_, firstSend := hb.site.Sends()
	<-firstSend
	n, secondSend := hb.site.Sends()
	if n < 2 {
		<-secondSend
	}
	host.Close()
	require.NoError(t, first.Close()) // frees the profile for the next process
	hub.waitFor(t, remote.HostLost)
	stops, _ := hb.site.Stops()
	require.Zero(t, stops, "a stopping host does not stop the site's answer")

	startBrowserHost(t, hub, hb.backend(), "127.0.0.1:0", journal)
	b.waitCompleted(1)

	sent := hb.site.Sent()
	require.Len(t, sent, 2, "the prompt in flight was sent again")
	for _, a := range probeAnswers(t, b.sys) {
		require.Len(t, a, 2)
		assert.Equal(t, "Answer 2 to: "+sent[1].Prompt+" "+fakechat.Tail, a[1], "the answer read from the page, whole")
	}
	tk, ok := b.sys.Task(b.sys.Tasks(nil, 0)[0].Id)
	require.True(t, ok)
	assert.Equal(t, pb.TaskState_TASK_STATE_COMPLETED, tk.State)
	assert.EqualValues(t, 2, tk.Conversation.Backends["chatgpt"].Answers)
}

// hostProcess is a gateway host process started by startHostProcess.
type hostProcess struct {
	cmd    *exec.Cmd
	lines  chan string
	exited chan struct{} // closed once the process has ended
}

// kill ends the process with SIGKILL, as a machine's crash would.
func (p *hostProcess) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	<-p.exited
}

// startHostProcess starts the test binary as gateway host desk serving
// the browser backend chatgpt on the Turns site, and waits until it
// serves.
func startHostProcess(t *testing.T, hub *testHub, site *fakechat.Server, profileDir, journal string) *hostProcess {
	t.Helper()
	cmd := killedProcess(t, envBrowserHost+"="+hub.Address(), envTurnsSite+"="+site.URL(),
		envHostProfile+"="+profileDir, envHostJournal+"="+journal)
	// Its own pipe: the browser it starts may hold stdout after it ended.
	out, w, err := os.Pipe()
	require.NoError(t, err)
	cmd.Stdout = w
	require.NoError(t, cmd.Start())
	_ = w.Close()
	p := &hostProcess{cmd: cmd, lines: make(chan string, 64), exited: make(chan struct{})}
	go func() {
		defer out.Close()
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	go func() {
		_, _ = cmd.Process.Wait()
		close(p.exited)
	}()
	// Registered after its killedProcess's: runs first. A host still
	// serving at the test's end closes its browser before its profile
	// directory goes.
	t.Cleanup(func() {
		select {
		case <-p.exited:
			return
		default:
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
		}
	})
	timeout := time.After(time.Minute)
	for {
		select {
		case l, ok := <-p.lines:
			require.True(t, ok, "the host process ended before it served")
			require.False(t, strings.HasPrefix(l, "ERROR"), l)
			if strings.HasPrefix(l, "SERVING") {
				return p
			}
		case <-timeout:
			t.Fatal("the host process did not serve within a minute")
		}
	}
}

// The gateway host process is killed (SIGKILL) while its browser answers
// the first prompt of a task's new conversation, once the orchestrator
// has written that conversation's address. A new host process on the
// same browser profile reads the answer from that page: the site got the
// prompt once, and the task completes with the site's answer.
func TestKilledGatewayHostReadsTheFirstAnswerFromThePage(t *testing.T) {
	site := streamingTurns(t)
	profileDir := browser.ProfileDir(t.TempDir(), "chatgpt")
	signIn(t, site, profileDir)
	journal := filepath.Join(t.TempDir(), "prompts.jsonl")
	hub := startTestHub(t)
	host := startHostProcess(t, hub, site, profileDir, journal)
	hub.waitFor(t, remote.HostConnected)

	b := hostedSetup(t, hub, firstPrompt, time.Minute)
	b.start()
	addressed := b.waitEvent("the new conversation's address, before its answer", func(n Notice) bool {
		require.Nil(t, n.Event.GetLlmResponseReceived(), "the answer came before the conversation's address")
		return n.Event.GetLlmConversationAddressed() != nil
	}).Event.GetLlmConversationAddressed()
	host.kill(t)
	hub.waitFor(t, remote.HostLost)
	require.Len(t, site.Sent(), 1)

	startHostProcess(t, hub, site, profileDir, journal)
	b.waitCompleted(1)

	sent := site.Sent()
	require.Len(t, sent, 1, "the prompt in flight when its host was killed was not sent again")
	answers := probeAnswers(t, b.sys)
	require.Len(t, answers, 1)
	for _, a := range answers {
		assert.Equal(t, []string{"Answer 1 to: " + sent[0].Prompt + " " + fakechat.Tail}, a, "the answer read from the page, whole")
	}
	assert.Equal(t, 1, b.logged(t, func(e *pb.Event) bool { return e.GetLlmResponseReceived().GetFromPage() }), "the answer came from the page")
	tk, ok := b.sys.Task(b.sys.Tasks(nil, 0)[0].Id)
	require.True(t, ok)
	assert.Equal(t, pb.TaskState_TASK_STATE_COMPLETED, tk.State)
	conv := tk.Conversation.Backends["chatgpt"]
	require.NotNil(t, conv)
	assert.Equal(t, addressed.Url, conv.Url, "the conversation is the one whose address was written")
	assert.EqualValues(t, 1, conv.Answers)
}
