package control

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// What the browser tests share: where screenshots go, and the Playwright
// driver and Chromium they need.

// artifactDir keeps the screenshot (gitignored: /testdata/artifacts/).
var artifactDir = filepath.Join("..", "testdata", "artifacts")

// browserDeps finds the Playwright driver and Chromium, or fails the test
// saying how to install them: a missing browser must not pass as a skip.
func browserDeps(t *testing.T) (driverDir, chromium string) {
	t.Helper()
	driverDir = os.Getenv("PLAYWRIGHT_DRIVER_PATH")
	if driverDir == "" {
		home, _ := os.UserHomeDir()
		driverDir = filepath.Join(home, ".cache", "fano", "playwright-driver")
	}
	var missing []string
	for _, p := range []string{filepath.Join(driverDir, "node"), filepath.Join(driverDir, "package", "cli.js")} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, "the Playwright driver ("+p+")")
			break
		}
	}
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		missing = append(missing, "Chromium (no chromium on $PATH)")
	}
	if len(missing) > 0 {
		t.Fatalf("the control panel's browser test needs %s: run `make deps` (scripts/install-test-deps.sh)", strings.Join(missing, " and "))
	}
	return driverDir, chromium
}

// BrowserDeps is browserDeps for the end-to-end test (package control_test).
func BrowserDeps(t *testing.T) (driverDir, chromium string) { return browserDeps(t) }

// ArtifactDir is artifactDir for the end-to-end test.
func ArtifactDir() string { return artifactDir }
