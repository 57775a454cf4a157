package browser

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/gateway"
	"fano/gateway/browser/fakechat"
)

func killChromium(t *testing.T, profileDir string) {
	t.Helper()
	roots, _ := chromiumProcesses(profileDir)
	require.NotEmpty(t, roots, "no Chromium on %s", profileDir)
	for _, pid := range roots {
		require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	}
}

// A Chromium killed under a running answer ends that request as a hang
// ("page gone"), shows page_gone, and the next request starts a new
// browser on the same profile; killed between requests, the next request
// just works. Memory is reported for the running browser.
func TestCrashedBrowserRestarts(t *testing.T) {
	f := turnsFixture(t)
	b := f.start(t)
	send(t, b, gateway.Request{Prompt: "warm up"})
	mem := b.MemoryBytes()
	assert.Greater(t, mem, int64(10<<20), "Chromium and its renderers use more than 10 MB")

	f.site.SetControl(fakechat.Control{TokenMS: 200})
	_, sent := f.site.Sends()
	errCh := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := b.Send(ctx, gateway.Request{Prompt: "crash during this"})
		errCh <- err
	}()
	<-sent
	killChromium(t, f.cfg.ProfileDir)
	err := <-errCh
	require.Error(t, err)
	assert.Equal(t, "hung", gateway.Kind(err), err.Error())
	assert.Contains(t, err.Error(), "page gone")
	assert.Equal(t, gateway.StatePageGone, b.Condition().State)

	f.site.SetControl(fakechat.Control{})
	assert.Equal(t, answer("1", "after the crash"), send(t, b, gateway.Request{Prompt: "after the crash"}).Content)
	assert.Equal(t, gateway.StateReady, b.Condition().State)

	killChromium(t, f.cfg.ProfileDir)
	assert.Equal(t, answer("1", "after another crash"), send(t, b, gateway.Request{Prompt: "after another crash"}).Content)
	assert.Equal(t, 3, b.Stats().Launches)
}

// A Chromium killed after the site has the prompt but before the click
// on send returned is page gone too (the prompt may have cost quota),
// not a transient error that would send it again at once.
func TestKilledBeforeTheClickReturnsIsPageGone(t *testing.T) {
	f := turnsFixture(t)
	f.site.SetControl(fakechat.Control{SendHoldMS: 20_000})
	b := f.start(t)
	_, sent := f.site.Sends()
	errCh := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := b.Send(ctx, gateway.Request{Prompt: "crash while clicking"})
		errCh <- err
	}()
	<-sent
	killChromium(t, f.cfg.ProfileDir)
	err := <-errCh
	require.Error(t, err)
	assert.Equal(t, "hung", gateway.Kind(err), err.Error())
	assert.Contains(t, err.Error(), "page gone")
	assert.Equal(t, gateway.StatePageGone, b.Condition().State)

	f.site.SetControl(fakechat.Control{})
	assert.Equal(t, answer("1", "after the crash"), send(t, b, gateway.Request{Prompt: "after the crash"}).Content)
}

// Above RecycleAboveBytes the browser is restarted before the next
// request (the profile, and the login, stay).
func TestRecycleAboveMemory(t *testing.T) {
	f := turnsFixture(t)
	f.cfg.RecycleAboveBytes = 1 // every running browser is above it
	b := f.start(t)
	for i, p := range []string{"one", "two", "three"} {
		assert.Equal(t, answer("1", p), send(t, b, gateway.Request{Prompt: p}).Content, i)
	}
	st := b.Stats()
	assert.Equal(t, 3, st.Recycles, "the browser New started and two more")
	assert.Equal(t, 4, st.Launches)
}
