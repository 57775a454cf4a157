package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// smallDisk mounts a tmpfs of size and returns its path; the test skips
// where mounting is not allowed (it needs root).
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a small tmpfs (needs root): %v %s", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

func fillDisk(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	chunk := make([]byte, 16<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			require.True(t, errors.Is(err, syscall.ENOSPC), "%v", err)
			return
		}
	}
}

// A full disk under a running fano: it stops new work, logs the fault
// (not a flood), retries, and when space comes back resumes by itself and
// finishes, nothing lost, nothing twice; `fano verify` is clean after.
func TestFullDiskHoldsThenResumes(t *testing.T) {
	disk := smallDisk(t, "16m")
	dataDir := filepath.Join(disk, "data")
	dir := t.TempDir()
	cfg := writeConfig(t, dir, slowConfig(50)+"orchestrator: {health: {min_disk_space_gb: 0.001}}\n")
	errPath := filepath.Join(dir, "stderr")
	ef, err := os.Create(errPath)
	require.NoError(t, err)
	defer ef.Close()
	cmd := quickFano(t, "run", "--until-idle", "--config", cfg, "--data-dir", dataDir)
	cmd.Stderr = ef
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-done
		}
	})
	waitLogLines(t, errPath, `"event":"cmd.fano.llm_request"`, 1)

	filler := filepath.Join(disk, "filler")
	fillDisk(t, filler)
	waitLogLines(t, errPath, `"event":"actors.storage.write_failed"`, 1)
	select {
	case err := <-done:
		t.Fatalf("fano exited on a full disk instead of waiting: %v", err)
	default:
	}
	require.NoError(t, os.Remove(filler))
	waitLogLines(t, errPath, `"event":"actors.storage.recovered"`, 1)
	select {
	case err := <-done:
		require.NoError(t, err, tail(errPath))
	case <-time.After(60 * time.Second):
		t.Fatalf("fano did not finish after the disk recovered:\n%s", tail(errPath))
	}
	require.Equal(t, 1, countLines(errPath, `"event":"actors.storage.write_failed"`))
	require.LessOrEqual(t, countLines(errPath, `"event":"actors.storage.still_failing"`), 1, "at most a line a minute")
	out, errOut, code := runCmd("verify", "--config", cfg, "--data-dir", dataDir)
	require.Equal(t, 0, code, "%s%s", out, errOut)
	require.Contains(t, out, "clean")
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Below the low-disk threshold no new work starts; --until-idle does not
// claim "no work left" but exits non-zero saying why it stopped.
func TestUntilIdleStopsWithReasonOnLowDisk(t *testing.T) {
	disk := smallDisk(t, "16m")
	dataDir := filepath.Join(disk, "data")
	dir := t.TempDir()
	cfg := writeConfig(t, dir, slowConfig(50)+"orchestrator: {health: {min_disk_space_gb: 0.1}}\n")
	out, errOut, err := runQuick(t, "run", "--until-idle", "--config", cfg, "--data-dir", dataDir)
	require.Error(t, err)
	require.NotContains(t, out, "no work left")
	require.Contains(t, errOut, "stopped with work left")
	require.Contains(t, errOut, "low disk space")
}
