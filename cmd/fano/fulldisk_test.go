package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"fano/internal/disktest"
)

// A full disk under a running fano: it stops new work, logs the fault
// (not a flood), retries, and when space comes back resumes by itself and
// finishes, nothing lost, nothing twice; `fano verify` is clean after.
func TestFullDiskHoldsThenResumes(t *testing.T) {
	disk := disktest.Small(t, "16m")
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
	disktest.Fill(t, filler)
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
	disk := disktest.Small(t, "16m")
	dataDir := filepath.Join(disk, "data")
	dir := t.TempDir()
	cfg := writeConfig(t, dir, slowConfig(50)+"orchestrator: {health: {min_disk_space_gb: 0.1}}\n")
	out, errOut, err := runQuick(t, "run", "--until-idle", "--config", cfg, "--data-dir", dataDir)
	require.Error(t, err)
	require.NotContains(t, out, "no work left")
	require.Contains(t, errOut, "stopped with work left")
	require.Contains(t, errOut, "low disk space")
}
