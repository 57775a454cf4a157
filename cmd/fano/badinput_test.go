package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Bad config input: one clear error naming the cause and its line, a
// non-zero exit, and nothing written (the data directory is not created).
func TestBadConfigChangesNothing(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown field", "backends:\n  a:\n    type: sim\n    bogus: 1\n", []string{"bogus", ":4:", "backends.a.bogus"}},
		{"wrong type", "backends:\n  a:\n    type: sim\n    hourly_limit: lots\n", []string{"hourly_limit", ":4:"}},
		{"negative limit", "backends:\n  a:\n    type: sim\n    hourly_limit: -5\n", []string{"backends.a.hourly_limit", ":4:"}},
		{"no backends", "backends: {}\n", []string{"backends"}},
		{"unknown backend type", "backends:\n  a:\n    type: telepathy\n", []string{"telepathy", ":3:"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := writeConfig(t, dir, c.yaml)
			dataDir := filepath.Join(dir, "data")
			for _, args := range [][]string{{"run"}, {"config", "validate"}, {"recover"}} {
				_, stderr, err := runFano(t, append(args, "--config", cfg, "--data-dir", dataDir)...)
				require.Error(t, err, "%v must fail", args)
				require.True(t, strings.HasPrefix(stderr, "fano: "), stderr)
				for _, w := range c.want {
					require.Contains(t, stderr, w, "%v", args)
				}
				require.NoDirExists(t, dataDir, "a bad config must not create the data directory")
			}
		})
	}
}

func TestUnwritableDataDirIsOneClearError(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o600))
	dataDir := filepath.Join(file, "data") // under a file: cannot be created, even as root
	_, stderr, err := runFano(t, "run", "--data-dir", dataDir)
	require.Error(t, err)
	require.Contains(t, stderr, dataDir)
	require.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, "one line: %s", stderr)
}

func TestCorruptDatabaseIsReportedAndKept(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(dir, 0o700))
	db := filepath.Join(dir, "fano.db")
	garbage := bytes.Repeat([]byte("not a database "), 1000)
	require.NoError(t, os.WriteFile(db, garbage, 0o600))
	cfg := writeConfig(t, t.TempDir(), coreConfig(10))
	for _, args := range [][]string{{"run"}, {"recover"}, {"wal", "inspect"}, {"status"}} {
		_, stderr, err := runFano(t, append(args, "--config", cfg, "--data-dir", dir)...)
		require.Error(t, err, "%v", args)
		require.Contains(t, stderr, db, "%v", args)
		got, rerr := os.ReadFile(db)
		require.NoError(t, rerr)
		require.Equal(t, garbage, got, "the corrupt file must be left as it was")
	}
	require.NoDirExists(t, filepath.Join(dir, "logs"), "nothing written next to it")
}

// A second fano on a data directory in use gets one clear error naming
// the pid of the first, and exits non-zero.
func TestLockedDatabaseNamesThePid(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, coreConfig(60000)) // requests hang: fano stays up
	dataDir := filepath.Join(dir, "data")
	first := fanoCmd(t, "run", "--config", cfg, "--data-dir", dataDir)
	require.NoError(t, first.Start())
	t.Cleanup(func() { _ = first.Process.Kill(); _ = first.Wait() })
	waitLogLines(t, filepath.Join(dataDir, "logs", "fano.log"), "cmd.fano.started", 1)

	start := time.Now()
	_, stderr, err := runFano(t, "run", "--config", cfg, "--data-dir", dataDir)
	require.Error(t, err)
	require.Less(t, time.Since(start), 10*time.Second, "a locked database is an error, not a hang")
	require.Contains(t, stderr, "data directory "+dataDir+" is in use by another fano (pid "+strconv.Itoa(first.Process.Pid)+")")

	require.NoError(t, first.Process.Signal(syscall.SIGTERM))
	require.NoError(t, first.Wait(), "the first fano exits cleanly on SIGTERM")
}

// `fano config validate` also loads browser site profiles: an unknown
// profile name or a broken site_profiles_file is named before fano runs.
func TestConfigValidateChecksSiteProfiles(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "backends:\n  web:\n    type: browser\n    browser: {profile: nosuchsite}\n")
	_, stderr, err := runFano(t, "config", "validate", "--config", cfg, "--data-dir", filepath.Join(dir, "data"))
	require.Error(t, err)
	require.Contains(t, stderr, "backends.web")
	require.Contains(t, stderr, "nosuchsite")

	profiles := filepath.Join(dir, "sites.yaml")
	require.NoError(t, os.WriteFile(profiles, []byte("profiles:\n  mysite:\n    bogus_field: 1\n"), 0o600))
	cfg = writeConfig(t, dir, "site_profiles_file: "+profiles+"\nbackends:\n  web:\n    type: browser\n    browser: {profile: mysite}\n")
	_, stderr, err = runFano(t, "config", "validate", "--config", cfg, "--data-dir", filepath.Join(dir, "data"))
	require.Error(t, err)
	require.Contains(t, stderr, profiles)

	// A selector that is not CSS is named with its file, line and field.
	require.NoError(t, os.WriteFile(profiles, []byte("profiles:\n  chatgpt:\n    selectors:\n      answer: \".prose[[[\"\n"), 0o600))
	cfg = writeConfig(t, dir, "site_profiles_file: "+profiles+"\nbackends:\n  chatgpt:\n    type: browser\n")
	_, stderr, err = runFano(t, "config", "validate", "--config", cfg, "--data-dir", filepath.Join(dir, "data"))
	require.Error(t, err)
	require.Contains(t, stderr, profiles+":4: profiles.chatgpt.selectors.answer")
	require.Contains(t, stderr, "not a valid CSS selector")

	cfg = writeConfig(t, dir, "backends:\n  chatgpt:\n    type: browser\n")
	out, stderr, err := runFano(t, "config", "validate", "--config", cfg, "--data-dir", filepath.Join(dir, "data"))
	require.NoError(t, err, stderr)
	require.Contains(t, out, "ok")
}
