package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"fano/wal"
)

// Damage inside a real fano.db — a meta page, a branch page, a leaf page,
// a cut in the middle of a page — is one clear error from recover, verify
// and run (a subprocess: a crash would show as a signal), naming the file
// and what to do; the data directory keeps every byte.
func TestDamagedWALPagesAreOneClearError(t *testing.T) {
	cfg, dataDir := finishedDataDir(t)
	db := filepath.Join(dataDir, "fano.db")
	whole, err := os.ReadFile(db)
	require.NoError(t, err)
	ps, newest, kinds, err := wal.PageKinds(db)
	require.NoError(t, err)
	require.NotEmpty(t, kinds["branch"], "a real run's file has branch pages: %v", kinds)
	require.NotEmpty(t, kinds["leaf"])
	branch, leaf := int64(kinds["branch"][0]), int64(kinds["leaf"][len(kinds["leaf"])/2])

	flip := func(off int64, mask byte) func([]byte) []byte {
		return func(b []byte) []byte {
			b = append([]byte(nil), b...)
			b[off] ^= mask
			return b
		}
	}
	cases := []struct {
		name   string
		damage func([]byte) []byte
		want   string
	}{
		{"meta", flip(int64(newest)*ps+16+48, 0x01), "meta page"},
		{"branch page", flip(branch*ps+8, 0x20), "page type"},
		{"branch child", flip(branch*ps+16+8+5, 0x40), "outside pages"},
		{"leaf page", flip(leaf*ps, 0x10), "carries the id"},
		{"leaf entries", flip(leaf*ps+11, 0x40), "do not fit"},
		{"cut mid-page", func(b []byte) []byte { return b[:leaf*ps+ps/3] }, "cut short"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.NoError(t, os.WriteFile(db, c.damage(whole), 0o600))
			before := dirState(t, dataDir)
			for _, args := range [][]string{{"verify"}, {"recover"}, {"recover", "--dry-run"}, {"status"}} {
				out, errOut, code := runCmd(append(args, "--config", cfg, "--data-dir", dataDir)...)
				require.NotEqual(t, 0, code, "%v: %s", args, out)
				require.Equal(t, 1, strings.Count(errOut, "is damaged"), "%v: %s", args, errOut)
				require.Contains(t, errOut, db, args)
				require.Contains(t, errOut, c.want, args)
				require.Contains(t, errOut, "fano wal salvage", args)
				require.Equal(t, before, dirState(t, dataDir), "fano %v changed the data directory", args)
			}
			_, errOut, err := runQuick(t, "run", "--until-idle", "--config", cfg, "--data-dir", dataDir)
			require.Error(t, err)
			require.Contains(t, errOut, "is damaged")
			require.Contains(t, errOut, c.want)
			for _, crash := range []string{"SIGSEGV", "SIGBUS", "panic", "goroutine "} {
				require.NotContains(t, errOut, crash)
			}
			require.Equal(t, before, dirState(t, dataDir), "fano run changed the data directory")
		})
	}
}

// A completed task keeps no conversation in memory (it is archived with
// its completion); `fano tasks ID` on a stopped directory reads it back
// and shows every answer.
func TestTasksShowsArchivedConversation(t *testing.T) {
	cfg, dataDir := finishedDataDir(t)
	facts := readWAL(t, dataDir)
	require.NotEmpty(t, facts.archived)
	for id, whole := range facts.archived {
		light, ok := facts.tasks.Task(id)
		require.True(t, ok)
		require.Empty(t, light.GetConversation().GetMessages(), "left memory")
		out, errOut, code := runCmd("tasks", id, "--config", cfg, "--data-dir", dataDir)
		require.Equal(t, 0, code, errOut)
		require.NotEmpty(t, whole.GetConversation().GetMessages())
		for _, m := range whole.GetConversation().GetMessages() {
			require.Contains(t, out, m.GetContent())
		}
	}
}
