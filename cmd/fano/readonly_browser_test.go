package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Commands that only read the data directory never start a browser or
// touch a browser backend's profile: a `fano run` starting at that moment
// would find the profile locked and its backend down. Chromium is a
// wrapper that leaves a mark when anything launches it; the profile
// directory a person logged in with is compared byte for byte and by
// modification time before and after each command.
func TestReadOnlyCommandsStartNoBrowser(t *testing.T) {
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
	// The profile a person made with `fano login chatgpt`.
	profile := filepath.Join(dataDir, "browser", "chatgpt")
	require.NoError(t, os.MkdirAll(filepath.Join(profile, "Default"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(profile, "Default", "Cookies"), []byte("session"), 0o600))
	past := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(filepath.Join(profile, "Default", "Cookies"), past, past))

	marker := filepath.Join(dir, "chromium-launched")
	chromium := filepath.Join(dir, "chromium")
	require.NoError(t, os.WriteFile(chromium, []byte("#!/bin/sh\necho \"$@\" >> '"+marker+"'\nexec /usr/bin/chromium \"$@\"\n"), 0o700))

	before := snapshotTree(t, filepath.Join(dataDir, "browser"))
	for _, args := range [][]string{
		{"status"},
		{"tasks"},
		{"verify"},
		{"recover", "--dry-run"},
		{"config", "validate"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			cmd := quickFano(t, append(args, "--config", cfg, "--data-dir", dataDir)...)
			cmd.Env = append(cmd.Env, "FANO_CHROMIUM="+chromium)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			require.NoFileExists(t, marker, "fano %s launched Chromium", strings.Join(args, " "))
			require.Equal(t, before, snapshotTree(t, filepath.Join(dataDir, "browser")),
				"fano %s changed the browser directory", strings.Join(args, " "))
		})
	}
}

// snapshotTree lists every file and directory under root with its size,
// mode and modification time.
func snapshotTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		out[rel] = fi.Mode().String() + " " + fi.ModTime().UTC().Format(time.RFC3339Nano)
		if !d.IsDir() {
			out[rel] += " " + strings.Repeat("x", int(fi.Size()))
		}
		return nil
	}))
	return out
}
