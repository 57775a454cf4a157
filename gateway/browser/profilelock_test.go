package browser

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// holdProfile starts a process that looks like a Chromium (its argv[0]
// names one) and points dir's SingletonLock at it, as Chromium does.
func holdProfile(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	// It says it runs once its own script does: right after exec its
	// command line can still read empty, and it would not look like one.
	cmd := exec.Command("sh", "-c", "echo running; read forever")
	cmd.Args[0] = "chromium-test-holder"
	_, err := cmd.StdinPipe() // never written: read waits
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "running\n", line)
	host, _ := os.Hostname()
	require.NoError(t, os.Symlink(fmt.Sprintf("%s-%d", host, cmd.Process.Pid), filepath.Join(dir, "SingletonLock")))
	return cmd
}

// A launch waits for the holder of its profile to end: a Chromium just
// killed (the crash a relaunch recovers from) keeps its lock until the
// kernel has torn it down, which on a loaded machine outlasted the
// relaunch (TestCrashedBrowserRestarts once failed with "profile in use").
// A holder still alive when the wait is over is named.
func TestLaunchWaitsForTheHolderOfItsProfile(t *testing.T) {
	dir := t.TempDir()
	holder := holdProfile(t, dir)
	pid, inUse := profileInUse(dir)
	require.True(t, inUse)
	require.Equal(t, holder.Process.Pid, pid)

	sleeps := 0
	_, inUse = waitProfileFree(dir, profileFreeWait, func(time.Duration) {
		if sleeps++; sleeps == 1 { // the holder dies while the launch waits
			require.NoError(t, holder.Process.Kill())
			_ = holder.Wait()
		}
	})
	require.False(t, inUse, "free once its holder is gone")
	require.Equal(t, 1, sleeps)

	dir = t.TempDir()
	other := holdProfile(t, dir)
	var waited time.Duration
	pid, inUse = waitProfileFree(dir, time.Second, func(d time.Duration) { waited += d })
	require.True(t, inUse, "a holder that stays")
	require.Equal(t, other.Process.Pid, pid)
	require.GreaterOrEqual(t, waited, time.Second, "named only once the wait is over")
}
