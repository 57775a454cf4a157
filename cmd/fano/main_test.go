package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The test binary doubles as fano: with FANO_BE_MAIN=1 it runs the CLI on
// its arguments, so end-to-end tests run real `fano` subprocesses without
// building a separate binary.
func TestMain(m *testing.M) {
	if os.Getenv("FANO_BE_MAIN") == "1" {
		survivePipe()
		os.Exit(executeWith(os.Args[1:], os.Stdout, os.Stderr, testModules))
	}
	os.Exit(m.Run())
}

// fanoCmd returns a `fano args...` subprocess.
func fanoCmd(t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	// atexit_sleep_ms=0: the race detector's 1 s pause at every exit of a
	// subprocess adds up over the suite.
	cmd.Env = append(os.Environ(), "FANO_BE_MAIN=1", "GORACE=atexit_sleep_ms=0")
	return cmd
}

// runFano runs fano to the end and returns stdout, stderr and the error.
func runFano(t testing.TB, args ...string) (string, string, error) {
	t.Helper()
	cmd := fanoCmd(t, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// writeConfig writes a config file into dir and returns its path.
func writeConfig(t testing.TB, dir, yaml string) string {
	t.Helper()
	path := filepath.Join(dir, "fano.yaml")
	require.NoError(t, os.WriteFile(path, []byte(yaml), 0o600))
	return path
}

// waitLogLines waits until the JSON log holds n lines containing needle.
// It polls the file on a short ticker; the deadline only stops a broken test.
func waitLogLines(t testing.TB, path, needle string, n int) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(60 * time.Second)
	for {
		if countLines(path, needle) >= n {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s: fewer than %d lines with %q", path, n, needle)
		}
	}
}

func countLines(path, needle string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), needle) {
			n++
		}
	}
	return n
}
