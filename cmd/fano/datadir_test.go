package main

import (
	"bufio"
	"crypto/sha256"
	fanoapp "fano/app"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"fano/control"
	"fano/wal"
)

// dirState is every file of a directory tree: path -> size, mode, content
// hash. Equal states mean nothing was created, removed or changed.
func dirState(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			out[rel] = fmt.Sprintf("dir %v", fi.Mode())
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out[rel] = fmt.Sprintf("%d %v %x", fi.Size(), fi.Mode(), sha256.Sum256(b))
		return nil
	}))
	return out
}

// A data directory with real state, made by a real `fano run --until-idle`.
func finishedDataDir(t *testing.T) (cfg, dataDir string) {
	t.Helper()
	dir := t.TempDir()
	dataDir = filepath.Join(dir, "data")
	cfg = writeConfig(t, dir, slowConfig(1))
	_, errOut, err := runQuick(t, "run", "--until-idle", "--config", cfg, "--data-dir", dataDir)
	require.NoError(t, err, errOut)
	return cfg, dataDir
}

// Commands that only read leave every byte of the data directory as it
// was, fano.db included (no meta page rewritten, no PID file, no log).
func TestReadOnlyCommandsWriteNothing(t *testing.T) {
	cfg, dataDir := finishedDataDir(t)
	before := dirState(t, dataDir)
	require.Contains(t, before, "fano.db")
	for _, args := range [][]string{
		{"status"}, {"tasks"}, {"verify"}, {"wal", "inspect"}, {"recover", "--dry-run"},
	} {
		out, errOut, code := runCmd(append(args, "--config", cfg, "--data-dir", dataDir)...)
		require.Equal(t, 0, code, "%v: %s%s", args, out, errOut)
		require.Equal(t, before, dirState(t, dataDir), "fano %v changed the data directory", args)
	}

	// With no state at all, readers create nothing either.
	empty := filepath.Join(t.TempDir(), "empty")
	require.NoError(t, os.Mkdir(empty, 0o700))
	for _, args := range [][]string{{"status"}, {"verify"}, {"wal", "inspect"}} {
		out, errOut, code := runCmd(append(args, "--config", cfg, "--data-dir", empty)...)
		require.Equal(t, 0, code, "%v: %s%s", args, out, errOut)
		ents, err := os.ReadDir(empty)
		require.NoError(t, err)
		require.Empty(t, ents, "fano %v wrote into an empty data directory", args)
	}
}

// A fano.db cut short is one clear error from every command, naming the
// file and what to do; the file is left as it was and nothing crashes.
func TestTruncatedWALIsOneClearError(t *testing.T) {
	cfg, dataDir := finishedDataDir(t)
	db := filepath.Join(dataDir, "fano.db")
	fi, err := os.Stat(db)
	require.NoError(t, err)
	cut := fi.Size() / 2
	f, err := os.OpenFile(db, os.O_RDWR, 0)
	require.NoError(t, err)
	buf := make([]byte, cut)
	_, err = io.ReadFull(f, buf)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(cut))
	require.NoError(t, f.Close())
	before := dirState(t, dataDir)

	for _, args := range [][]string{{"verify"}, {"recover"}, {"status"}, {"wal", "inspect"}} {
		out, errOut, code := runCmd(append(args, "--config", cfg, "--data-dir", dataDir)...)
		require.NotEqual(t, 0, code, "%v: %s", args, out)
		require.Contains(t, errOut, db, args)
		require.Contains(t, errOut, "is damaged", args)
		require.Contains(t, errOut, "fano wal salvage", args)
		require.NotContains(t, errOut, "panic", args)
		require.Equal(t, before, dirState(t, dataDir), "fano %v changed the data directory", args)
	}
	// run as a subprocess: a clear error and a non-zero exit, no fault.
	_, errOut, err := runQuick(t, "run", "--until-idle", "--config", cfg, "--data-dir", dataDir)
	require.Error(t, err)
	require.Contains(t, errOut, "is damaged")
	require.NotContains(t, errOut, "SIGSEGV")
	require.Equal(t, before, dirState(t, dataDir))
}

// A damaged fano.db is salvaged into a new file and reported; a backup
// taken before the damage is restored and the directory verifies clean.
func TestBackupSalvageRestore(t *testing.T) {
	cfg, dataDir := finishedDataDir(t)
	args := func(a ...string) []string { return append(a, "--config", cfg, "--data-dir", dataDir) }
	out, errOut, code := runCmd(args("wal", "backup")...)
	require.Equal(t, 0, code, errOut)
	names, err := fanoapp.BackupFiles(fanoapp.BackupDir(dataDir))
	require.NoError(t, err)
	require.Len(t, names, 1)
	require.Contains(t, out, names[0])
	backup := filepath.Join(fanoapp.BackupDir(dataDir), names[0])

	db := filepath.Join(dataDir, "fano.db")
	fi, err := os.Stat(db)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(db, fi.Size()/2))
	damaged := dirState(t, dataDir)["fano.db"]

	salvaged := filepath.Join(t.TempDir(), "salvaged.db")
	out, errOut, code = runCmd(args("wal", "salvage", "--to", salvaged)...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "salvaged "+db)
	require.Contains(t, out, "entries copied")
	require.FileExists(t, salvaged)
	require.Equal(t, damaged, dirState(t, dataDir)["fano.db"], "salvage never writes fano.db")

	out, errOut, code = runCmd(args("wal", "restore", backup)...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "kept as")
	out, errOut, code = runCmd(args("verify")...)
	require.Equal(t, 0, code, "%s%s", out, errOut)
	require.Contains(t, out, "clean")
}

func TestBackupsKeepTheNewest(t *testing.T) {
	dataDir := t.TempDir()
	log, err := wal.Open(filepath.Join(dataDir, "fano.db"), wal.Options{NoSync: true})
	require.NoError(t, err)
	defer log.Close()
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	for i := 0; i < 5; i++ {
		_, err := fanoapp.TakeBackup(log, dataDir, t0.Add(time.Duration(i)*time.Hour), 3)
		require.NoError(t, err)
	}
	names, err := fanoapp.BackupFiles(fanoapp.BackupDir(dataDir))
	require.NoError(t, err)
	require.Equal(t, []string{fanoapp.BackupName(t0.Add(2 * time.Hour)), fanoapp.BackupName(t0.Add(3 * time.Hour)), fanoapp.BackupName(t0.Add(4 * time.Hour))}, names)
}

// A missing or empty fano.db beside earlier runs' output is refused,
// naming what is there, unless --fresh says to start anew.
func TestMissingWALBesideOutputIsRefused(t *testing.T) {
	cfg, dataDir := finishedDataDir(t)
	db := filepath.Join(dataDir, "fano.db")
	require.NoError(t, os.MkdirAll(filepath.Join(dataDir, "output"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dataDir, "output", "DOCUMENT.md"), []byte("# kept\n"), 0o600))
	require.NoError(t, os.Rename(db, filepath.Join(t.TempDir(), "elsewhere.db")))
	before := dirState(t, dataDir)

	for _, prepare := range []func(){
		func() {},
		func() { require.NoError(t, os.WriteFile(db, nil, 0o600)) },
	} {
		prepare()
		before = dirState(t, dataDir)
		_, errOut, err := runQuick(t, "run", "--until-idle", "--config", cfg, "--data-dir", dataDir)
		require.Error(t, err)
		require.Contains(t, errOut, "output/")
		require.Contains(t, errOut, "logs/")
		require.Contains(t, errOut, "--fresh")
		require.Equal(t, before, dirState(t, dataDir), "a refused start writes nothing")
	}
	_, errOut, err := runQuick(t, "run", "--until-idle", "--fresh", "--config", cfg, "--data-dir", dataDir)
	require.NoError(t, err, errOut)
	fi, err := os.Stat(db)
	require.NoError(t, err)
	require.Positive(t, fi.Size())
}

// With the panel's port taken, `fano run` stops before its first write:
// a clear error, and the data directory exactly as it was (or still
// absent). (An --until-idle run takes a free port instead: see
// TestRunTwiceAndPanelPortInUse.)
func TestPortTakenWritesNothing(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	_, dataDir := finishedDataDir(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, strings.Replace(slowConfig(1), "control: {enabled: false}",
		fmt.Sprintf("control: {enabled: true, address: %q}", taken.Addr().String()), 1))
	before := dirState(t, dataDir)
	_, errOut, err := runQuick(t, "run", "--config", cfg, "--data-dir", dataDir)
	require.Error(t, err)
	require.Contains(t, errOut, "control.address")
	require.Contains(t, errOut, "address already in use")
	require.Equal(t, before, dirState(t, dataDir), "a failed start writes nothing")

	fresh := filepath.Join(dir, "fresh")
	_, _, err = runQuick(t, "run", "--config", cfg, "--data-dir", fresh)
	require.Error(t, err)
	require.NoDirExists(t, fresh)
}

// A panel on an address other machines reach needs allow_remote, and is
// then served over TLS with a generated certificate printed by
// fingerprint; `fano status` still reaches it (trusting that certificate).
func TestRemotePanelNeedsAllowRemoteAndTLS(t *testing.T) {
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	base := strings.Replace(slowConfig(60_000), "control: {enabled: false}", "control: {enabled: true, address: \"0.0.0.0:0\"}", 1)
	cfg := writeConfig(t, dir, base)
	_, errOut, err := runQuick(t, "run", "--config", cfg, "--data-dir", dataDir)
	require.Error(t, err)
	require.Contains(t, errOut, "control.address")
	require.Contains(t, errOut, "allow_remote")
	require.NoDirExists(t, dataDir, "refused before anything is written")

	cfg = writeConfig(t, dir, strings.Replace(base, "address: \"0.0.0.0:0\"", "address: \"0.0.0.0:0\", allow_remote: true", 1))
	cmd := quickFano(t, "run", "--config", cfg, "--data-dir", dataDir)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		<-done
	}()
	sc := bufio.NewScanner(stdout)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if strings.Contains(sc.Text(), "fingerprint") {
			break
		}
	}
	out := strings.Join(lines, "\n")
	require.Contains(t, out, "fano control panel: https://127.0.0.1:")
	require.Contains(t, out, "SHA-256 fingerprint")
	require.NotContains(t, out, "[::1]")
	require.FileExists(t, filepath.Join(dataDir, control.TLSCertFile))
	go func() { _, _ = io.Copy(io.Discard, stdout) }()

	st, errOut, err := runQuick(t, "status", "--json", "--config", cfg, "--data-dir", dataDir)
	require.NoError(t, err, errOut)
	require.Contains(t, st, `"running"`)
}

// The leftover of a shrink killed midway is removed at the next start.
func TestStrayCompactFileRemoved(t *testing.T) {
	cfg, dataDir := finishedDataDir(t)
	stray := filepath.Join(dataDir, "fano.db.compact")
	require.NoError(t, os.WriteFile(stray, []byte("half a copy"), 0o600))
	_, errOut, err := runQuick(t, "run", "--until-idle", "--config", cfg, "--data-dir", dataDir)
	require.NoError(t, err, errOut)
	require.NoFileExists(t, stray)
	require.Contains(t, errOut, "cmd.fano.stray_removed")
}

// A start refused for a missing API key leaves no data directory behind.
func TestMissingKeyStartLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	cfg := writeConfig(t, dir, `
backends:
  remote:
    type: api
    hourly_limit: 100
    api: {base_url: "http://127.0.0.1:9", model: m, api_key_env: FANO_TEST_KEY_THAT_IS_NOT_SET}
explorer: {enabled: false}
documenter: {enabled: false}
researcher: {enabled: false}
control: {enabled: false}
`)
	_, errOut, err := runQuick(t, "run", "--until-idle", "--config", cfg, "--data-dir", dataDir)
	require.Error(t, err)
	require.Contains(t, errOut, "FANO_TEST_KEY_THAT_IS_NOT_SET")
	require.NoDirExists(t, dataDir, "a failed start writes nothing")
}

// `fano wal backup` beside a running fano asks it (through the panel) for
// an online backup; the copy is a whole log.
func TestBackupOfRunningFano(t *testing.T) {
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	cfg := writeConfig(t, dir, strings.Replace(slowConfig(60_000), "control: {enabled: false}", `control: {enabled: true, address: "127.0.0.1:0"}`, 1))
	cmd := quickFano(t, "run", "--config", cfg, "--data-dir", dataDir)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		<-done
	}()
	sc := bufio.NewScanner(stdout)
	require.True(t, sc.Scan(), "the panel banner")
	require.Contains(t, sc.Text(), "fano control panel")
	go func() { _, _ = io.Copy(io.Discard, stdout) }()

	out, errOut, err := runQuick(t, "wal", "backup", "--config", cfg, "--data-dir", dataDir)
	require.NoError(t, err, errOut)
	require.Contains(t, out, "backup written by the running fano")
	names, err := fanoapp.BackupFiles(fanoapp.BackupDir(dataDir))
	require.NoError(t, err)
	require.Len(t, names, 1)
	last, err := wal.CheckBackup(filepath.Join(fanoapp.BackupDir(dataDir), names[0]))
	require.NoError(t, err)
	require.Positive(t, last)
}

// A browser backend without the Playwright driver stops the start before
// anything is written.
func TestMissingDriverStartLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	cfg := writeConfig(t, dir, `
backends:
  chatgpt: {type: browser, hourly_limit: 10, browser: {profile: chatgpt}}
explorer: {enabled: false}
documenter: {enabled: false}
researcher: {enabled: false}
control: {enabled: false}
`)
	cmd := quickFano(t, "run", "--until-idle", "--config", cfg, "--data-dir", dataDir)
	cmd.Env = append(cmd.Env, "PLAYWRIGHT_DRIVER_PATH="+filepath.Join(dir, "no-driver-here"))
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "Playwright driver is not installed")
	require.NoDirExists(t, dataDir)
}
