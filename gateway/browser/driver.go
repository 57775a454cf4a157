package browser

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/playwright-community/playwright-go"
)

// DefaultExecutable is Debian's Chromium, which `make deps` installs.
const DefaultExecutable = "/usr/bin/chromium"

// DriverDir is where the Playwright driver lives: $PLAYWRIGHT_DRIVER_PATH,
// else ~/.cache/fano/playwright-driver (what `make deps` fills).
func DriverDir() string {
	if d := os.Getenv("PLAYWRIGHT_DRIVER_PATH"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "fano-playwright-driver")
	}
	return filepath.Join(home, ".cache", "fano", "playwright-driver")
}

// The Playwright driver (one node process, about 1.5 s to start) is shared
// by every browser backend of the process and stopped when the last user
// releases it.
var shared struct {
	mu   sync.Mutex
	pw   *playwright.Playwright
	refs int
}

// AcquireDriver starts the shared Playwright driver if it is not running
// and takes a reference to it; call release (once) when done. It never
// downloads anything: a missing driver is an error that says to run
// `make deps`. Safe for concurrent use.
func AcquireDriver() (release func(), err error) {
	_, release, err = acquire()
	return release, err
}

func acquire() (*playwright.Playwright, func(), error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.pw == nil {
		dir := DriverDir()
		pw, err := playwright.Run(&playwright.RunOptions{DriverDirectory: dir, SkipInstallBrowsers: true})
		if err != nil {
			return nil, nil, fmt.Errorf("playwright driver in %s is missing or broken (run `make deps`, or set PLAYWRIGHT_DRIVER_PATH): %w", dir, err)
		}
		shared.pw = pw
	}
	shared.refs++
	pw := shared.pw
	var once sync.Once
	return pw, func() { once.Do(releaseDriver) }, nil
}

func releaseDriver() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	shared.refs--
	if shared.refs == 0 && shared.pw != nil {
		_ = shared.pw.Stop()
		shared.pw = nil
	}
}

// launchOptions are how fano starts Chromium on a persistent profile.
type launchOptions struct {
	Executable string
	ProfileDir string
	Headless   bool
	ExtraArgs  []string
	Timeout    time.Duration
}

// baseArgs keep Chromium quiet and predictable for unattended use.
// --password-store=basic keeps the login cookies readable without a
// desktop keyring (no keyring prompt in `fano login`, and a profile made
// on a desktop can be copied to a server); the profile directory's 0700
// mode is what protects them.
var baseArgs = []string{
	"--disable-gpu",
	"--disable-quic",
	"--no-first-run",
	"--no-default-browser-check",
	"--disable-background-networking",
	"--disable-component-update",
	"--disable-sync",
	"--password-store=basic",
	"--disable-blink-features=AutomationControlled",
}

// findExecutable resolves the Chromium binary or says how to install it.
func findExecutable(exe string) (string, error) {
	if exe == "" {
		exe = DefaultExecutable
	}
	if _, err := os.Stat(exe); err == nil {
		return exe, nil
	}
	if !strings.ContainsRune(exe, '/') {
		if p, err := exec.LookPath(exe); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil && exe == DefaultExecutable {
		return p, nil
	}
	return "", fmt.Errorf("chromium not found at %s (run `make deps`, or apt-get install chromium)", exe)
}

// launch starts Chromium on o.ProfileDir and returns its context.
func launch(pw *playwright.Playwright, o launchOptions) (playwright.BrowserContext, error) {
	exe, err := findExecutable(o.Executable)
	if err != nil {
		return nil, err
	}
	if pid, ok := waitProfileFree(o.ProfileDir, profileFreeWait, time.Sleep); ok {
		return nil, fmt.Errorf("browser profile %s is in use by process %d (a `fano login` or another fano?); close it first", o.ProfileDir, pid)
	}
	args := append([]string{}, baseArgs...)
	if os.Geteuid() == 0 {
		args = append(args, "--no-sandbox") // Chromium refuses to run sandboxed as root
	}
	args = append(args, o.ExtraArgs...)
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	bc, err := pw.Chromium.LaunchPersistentContext(o.ProfileDir, playwright.BrowserTypeLaunchPersistentContextOptions{
		ExecutablePath:    &exe,
		Headless:          &o.Headless,
		Args:              args,
		IgnoreDefaultArgs: []string{"--enable-automation"},
		Timeout:           playwright.Float(float64(timeout.Milliseconds())),
		AcceptDownloads:   playwright.Bool(false),
		// fano handles signals and closes its browsers itself: a ctrl-C
		// that reaches the driver's process group must not kill the
		// browser under a request that is being shut down gracefully.
		HandleSIGINT:  playwright.Bool(false),
		HandleSIGTERM: playwright.Bool(false),
		HandleSIGHUP:  playwright.Bool(false),
	})
	if err != nil {
		return nil, fmt.Errorf("starting %s on profile %s: %w", exe, o.ProfileDir, err)
	}
	return bc, nil
}

// profileFreeWait is how long a launch waits for the holder of its
// profile to end. A Chromium just killed (the crash a relaunch recovers
// from) keeps its lock until the kernel has torn it down, which takes a
// moment on a loaded machine; a holder still alive after that is another
// program (a `fano login`, another fano).
const profileFreeWait = 5 * time.Second

// waitProfileFree waits up to wait, in steps of sleep, for no live
// Chromium to hold dir's profile; it returns the holder if one still does.
func waitProfileFree(dir string, wait time.Duration, sleep func(time.Duration)) (int, bool) {
	const step = 20 * time.Millisecond
	for waited := time.Duration(0); ; waited += step {
		pid, inUse := profileInUse(dir)
		if !inUse || waited >= wait {
			return pid, inUse
		}
		sleep(step)
	}
}

// profileInUse reports whether a live Chromium holds the profile's
// SingletonLock (a symlink to "host-pid"). A stale lock of a dead process
// is not in use: Chromium takes it over.
func profileInUse(dir string) (int, bool) {
	target, err := os.Readlink(filepath.Join(dir, "SingletonLock"))
	if err != nil {
		return 0, false
	}
	i := strings.LastIndexByte(target, '-')
	if i < 0 {
		return 0, false
	}
	pid, err := strconv.Atoi(target[i+1:])
	if err != nil || pid <= 0 {
		return 0, false
	}
	host, _ := os.Hostname()
	if host != "" && target[:i] != host {
		return 0, false // another machine's lock (a copied profile)
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return 0, false
	}
	// A reused pid of some other program does not hold the profile.
	if cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && !strings.Contains(strings.ToLower(string(cmd)), "chrom") {
		return 0, false
	}
	return pid, true
}

// ensureProfileDir creates dir (and its parent) with mode 0700 and
// tightens an existing one: it holds login cookies.
func ensureProfileDir(dir string) error {
	if dir == "" {
		return errors.New("no profile directory")
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700)
}

// ProfileDir is where the backend named name keeps its browser profile:
// <data-dir>/browser/<name>.
func ProfileDir(dataDir, name string) string {
	return filepath.Join(dataDir, "browser", name)
}

// sleepCtx waits d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
