package actors

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/actors/allocator"
	"fano/actors/scheduler"
	"fano/gateway"
	"fano/gateway/browser"
	"fano/gateway/browser/fakechat"
	"fano/internal/fanotest"
	"fano/modules"
	"fano/modules/probe"
	"fano/pb"
	"fano/remote"
	"fano/wal"
)

// The actors test binary, re-executed with these variables, is a process
// the tests below kill with SIGKILL: a fano whose only backend is a
// browser on the fake Turns site (envFirstPromptFano), or a gateway host
// holding that browser (envBrowserHost). envTurnsSite is the site's URL.
const (
	envFirstPromptFano = "FANO_TEST_FIRST_PROMPT_FANO" // the data directory
	envBrowserHost     = "FANO_TEST_BROWSER_HOST"      // the orchestrator's address
	envTurnsSite       = "FANO_TEST_TURNS_SITE"
	envHostProfile     = "FANO_TEST_HOST_PROFILE"
	envHostJournal     = "FANO_TEST_HOST_JOURNAL"
)

// firstPrompt is the probe of these tests: one task, one prompt, in a new
// conversation.
var firstPrompt = probe.Config{Questions: questions(1), Turns: 1}

// turnsProfileAt is the fake Turns site's profile pointed at siteURL,
// with timings fit for tests.
func turnsProfileAt(siteURL string) (*browser.Profile, error) {
	dir, err := fakechat.Dir()
	if err != nil {
		return nil, err
	}
	profiles, err := browser.LoadProfiles(filepath.Join(dir, "turns", "profile.yaml"))
	if err != nil {
		return nil, err
	}
	p, err := profiles["turns"].WithBaseURL(siteURL)
	if err != nil {
		return nil, err
	}
	p.Completion = browser.Completion{StableMS: 150, PollMS: 30, StartTimeoutSeconds: 10, LoadTimeoutSeconds: 10}
	return p, nil
}

// turnsBackend starts the browser backend chatgpt on the Turns site at
// siteURL, in the Chromium profile profileDir.
func turnsBackend(siteURL, profileDir string, logger zerolog.Logger) (*browser.Backend, error) {
	p, err := turnsProfileAt(siteURL)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return browser.New(ctx, browser.Config{Name: "chatgpt", Profile: p, ProfileDir: profileDir, Headless: true, Logger: logger,
		ExtraArgs: []string{"--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"}})
}

// signIn gives profileDir its account on the site and keeps it on disk
// (a browser closed in order writes its cookies): a browser killed later
// on that profile comes back as the same account, which alone may open
// the conversations it made.
func signIn(t *testing.T, site *fakechat.Server, profileDir string) {
	t.Helper()
	be, err := turnsBackend(site.URL(), profileDir, zerolog.Nop())
	require.NoError(t, err)
	require.NoError(t, be.Health(context.Background()))
	require.NoError(t, be.Close())
}

// firstPromptFano runs fano on the WAL in dir with the first-prompt probe
// and kills itself (SIGKILL) as soon as the address of the task's new
// conversation is applied: durable, with the answer still streaming.
func firstPromptFano(dir, siteURL string) int {
	log, err := wal.Open(filepath.Join(dir, "fano.db"), wal.Options{LockTimeout: 5 * time.Second})
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	be, err := turnsBackend(siteURL, browser.ProfileDir(dir, "chatgpt"), zerolog.Nop())
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	clock := clockwork.NewRealClock()
	completed := make(chan struct{}, 1)
	sys, err := Start(Options{
		Log: log, Clock: clock, Logger: zerolog.Nop(),
		Scheduler: scheduler.Config{PreemptionThreshold: 20, MaxPending: 100000, MessageLimit: 50},
		Allocator: allocator.Config{BufferPercent: 10, Backends: []allocator.BackendConfig{{Name: "chatgpt", Kind: "sim", HourlyLimit: 1000, MaxConcurrency: 1}}},
		Backends:  []gateway.Backend{be}, Modules: []modules.Module{probe.New(firstPrompt)},
		TickInterval: 10 * time.Millisecond, MaxRunning: 64,
		RetryBackoff: []time.Duration{time.Second, 2 * time.Second, 3 * time.Second},
		OutputDir:    filepath.Join(dir, "output"),
		Observe: func(_ string, e *pb.Event) {
			if e.GetLlmConversationAddressed() != nil {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // the signal ends the process
			}
			if e.GetTaskCompleted() != nil {
				select {
				case completed <- struct{}{}:
				default:
				}
			}
		},
	})
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	// The task completed without its conversation's address written
	// first: the process ends by itself, which the test reads as the
	// rule broken.
	select {
	case <-completed:
	case <-time.After(2 * time.Minute):
	}
	_ = sys.Stop()
	return 0
}

// browserHostProcess serves the browser backend chatgpt on the Turns site
// as gateway host desk until it is killed.
func browserHostProcess(orchestrator string) int {
	be, err := turnsBackend(os.Getenv(envTurnsSite), os.Getenv(envHostProfile), zerolog.Nop())
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	h, err := remote.StartHost(remote.HostConfig{Name: "desk", Version: "v-test", Orchestrator: orchestrator,
		Transport: remote.Transport{Listen: "127.0.0.1:0", Plaintext: true}, Backends: []gateway.Backend{be},
		Types: map[string]string{"chatgpt": "browser"}, JournalFile: os.Getenv(envHostJournal), Logger: zerolog.Nop()})
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	fmt.Printf("SERVING %s\n", h.Address())
	// SIGTERM ends it in order: its browser closes before it exits.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM)
	<-stop
	h.Close()
	_ = be.Close()
	return 0
}

// killedProcess is the test binary as one of the processes above, in a
// process group of its own (with its Playwright driver and Chromium),
// which the test's end kills if it is still there.
func killedProcess(t *testing.T, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	t.Cleanup(func() {
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	})
	return cmd
}

// fano is killed (SIGKILL) while the first prompt of a task's new browser
// conversation is being answered, once the site had given the
// conversation its address. After the restart the answer is read from
// that page: the site received the prompt once, and the task completes
// with the site's answer to it.
func TestKilledDuringFirstPromptReadsTheAnswerFromThePage(t *testing.T) {
	site := streamingTurns(t)
	dir := t.TempDir()
	signIn(t, site, browser.ProfileDir(dir, "chatgpt"))

	cmd := killedProcess(t, envFirstPromptFano+"="+dir, envTurnsSite+"="+site.URL())
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "fano must be killed, got %v:\n%s", err, out)
	ws, ok := exit.Sys().(syscall.WaitStatus)
	require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL,
		"fano must die by SIGKILL at the conversation's address, before the answer: %v\n%s", err, out)
	require.Len(t, site.Sent(), 1)

	// The WAL as the kill left it: the address, no answer.
	check, err := wal.Open(filepath.Join(dir, "fano.db"), wal.Options{LockTimeout: 5 * time.Second})
	require.NoError(t, err)
	var url string
	for _, e := range fanotest.Events(t, check, ownerScheduler) {
		if a := e.GetLlmConversationAddressed(); a != nil {
			url = a.Url
		}
		require.Nil(t, e.GetLlmResponseReceived(), "the answer was not recorded before the kill")
	}
	require.NoError(t, check.Close())
	require.NotEmpty(t, url)

	b := setup(t, setupOpts{backends: []string{"chatgpt"}, probe: firstPrompt, mutate: func(o *Options) {
		be, err := turnsBackend(site.URL(), browser.ProfileDir(dir, "chatgpt"), zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel))
		require.NoError(t, err)
		t.Cleanup(func() { _ = be.Close() })
		o.Backends[0] = be
	}})
	b.log = fanotest.OpenWALWith(t, dir, wal.Options{})
	b.opts.Log = b.log
	b.start()
	b.waitCompleted(1)

	sent := site.Sent()
	require.Len(t, sent, 1, "the prompt in flight at the kill was not sent again")
	answers := probeAnswers(t, b.sys)
	require.Len(t, answers, 1)
	for _, a := range answers {
		assert.Equal(t, []string{"Answer 1 to: " + sent[0].Prompt + " " + fakechat.Tail}, a, "the answer read from the page, whole")
	}
	fromPage := b.logged(t, func(e *pb.Event) bool { return e.GetLlmResponseReceived().GetFromPage() })
	assert.Equal(t, 1, fromPage, "the answer came from the page")
	tk, ok := b.sys.Task(b.sys.Tasks(nil, 0)[0].Id)
	require.True(t, ok)
	assert.Equal(t, pb.TaskState_TASK_STATE_COMPLETED, tk.State)
	conv := tk.Conversation.Backends["chatgpt"]
	require.NotNil(t, conv)
	assert.Equal(t, url, conv.Url, "the conversation is the one whose address was written")
	assert.EqualValues(t, 1, conv.Answers)
}

func probeAnswers(t *testing.T, sys *System) map[string][]string {
	t.Helper()
	var answers map[string][]string
	require.NoError(t, sys.WithModule(probe.Name, func(m modules.Module) { answers = m.(*probe.Module).Answers() }))
	return answers
}

// turnsSite takes the browser driver and starts the fake Turns site,
// both released when the test ends.
func turnsSite(t *testing.T) *fakechat.Server {
	t.Helper()
	release, err := browser.AcquireDriver()
	require.NoError(t, err, "browser tests need Chromium and the Playwright driver; run `make deps`")
	t.Cleanup(release)
	site, err := fakechat.New("turns")
	require.NoError(t, err)
	t.Cleanup(func() { site.Close() })
	return site
}

// streamingTurns is turnsSite with answers that stream for seconds (a
// stop lands mid-answer).
func streamingTurns(t *testing.T) *fakechat.Server {
	t.Helper()
	site := turnsSite(t)
	site.SetControl(fakechat.Control{TokenMS: 60})
	return site
}
