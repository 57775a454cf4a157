package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// --max-items N runs the first N items only, --items FILE those it
// lists; a later run goes on with the rest, no pair asked twice. A key
// no item has is refused naming the file and line, before any write.
func TestMaxItemsAndItemsFileNarrowARun(t *testing.T) {
	fano.Require(t)
	e := newEnv(t, verdictPipeline, simConfig(0, 4), 20)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	type summary struct {
		Items     int `json:"items"`
		ItemsDone int `json:"items_done"`
	}
	run := func(args ...string) summary {
		t.Helper()
		out, err := e.cmd(ctx, append([]string{"pipeline", "run", e.def, "--no-progress", "--json"}, args...)...).Output()
		require.NoError(t, err, "%s", out)
		var s summary
		require.NoError(t, json.Unmarshal(out, &s), "%s", out)
		return s
	}
	first := run("--max-items", "5")
	assert.Equal(t, summary{Items: 5, ItemsDone: 5}, first)
	w := readRun(t, e.data)
	require.Len(t, w.okCount, 15, "five items, three models")
	for id := range w.okCount {
		assert.Regexp(t, `/c0000[0-4]$`, id)
	}

	keys := filepath.Join(e.dir, "keys.txt")
	require.NoError(t, os.WriteFile(keys, []byte("# two more\nc00012\n\nc00017\n"), 0o644))
	assert.Equal(t, summary{Items: 2, ItemsDone: 2}, run("--items", keys))
	require.Len(t, readRun(t, e.data).okCount, 21)

	require.NoError(t, os.WriteFile(keys, []byte("c00001\nnope\n"), 0o644))
	before := readRun(t, e.data).lastSeq
	out, err := e.cmd(ctx, "pipeline", "run", e.def, "--no-progress", "--items", keys).CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), keys+`:2: no item has key "nope"`)
	assert.Equal(t, before, readRun(t, e.data).lastSeq, "a refused run writes nothing")

	assert.Equal(t, summary{Items: 20, ItemsDone: 20}, run())
	after := readRun(t, e.data)
	assert.Len(t, after.okCount, 60)
	for id, n := range after.okCount {
		assert.Equal(t, 1, n, id)
	}
}
