package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const twoSteps = `
name: judged
items: {source: items.jsonl, key: id}
models: [m1]
steps:
  - name: verdict
    llm:
      prompt: 'Is this claim true? {{.item.claim}}'
      schema: {type: object, required: [verdict], properties: {verdict: {type: boolean}}}
  - name: reason
    needs: [verdict]
    llm:
      prompt: 'Why? {{.item.claim}}'
      schema: {type: object, required: [text], properties: {text: {type: string}}}
  - name: tags
    llm:
      prompt: 'Tags for {{.item.claim}}'
      schema: {type: object, required: [words], properties: {words: {type: array, items: {type: string}}}}
`

// A step whose prompt changed between runs is refused, naming it and the
// steps that need it, without a write; --rerun-changed asks it and them
// again (and nothing else), --keep keeps the earlier answers.
func TestChangedStepIsRefusedUnlessRerunOrKept(t *testing.T) {
	fano.Require(t)
	e := newEnv(t, twoSteps, simConfig(0, 4), 5)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out, err := e.cmd(ctx, "pipeline", "run", e.def, "--no-progress").CombinedOutput()
	require.NoError(t, err, "%s", out)
	first := readRun(t, e.data)
	require.Len(t, first.okCount, 15)

	edited := strings.Replace(twoSteps, "Is this claim true?", "Is this claim false?", 1)
	require.NoError(t, os.WriteFile(e.def, []byte(edited), 0o644))
	out, err = e.cmd(ctx, "pipeline", "run", e.def, "--no-progress").CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), "step(s) verdict changed since the last run")
	assert.Contains(t, string(out), "reason need(s) them")
	assert.Equal(t, first.lastSeq, readRun(t, e.data).lastSeq, "refused before any write")

	out, err = e.cmd(ctx, "pipeline", "run", e.def, "--no-progress", "--rerun-changed").CombinedOutput()
	require.NoError(t, err, "%s", out)
	again := readRun(t, e.data)
	asked := map[string]int{}
	for id, n := range again.okCount {
		asked[strings.Split(id, "/")[2]] += n
	}
	assert.Equal(t, map[string]int{"verdict": 10, "reason": 10, "tags": 5}, asked, "verdict and reason asked again, tags not")

	// Changed again, kept: nothing is asked.
	require.NoError(t, os.WriteFile(e.def, []byte(strings.Replace(edited, "Why?", "Why so?", 1)), 0o644))
	out, err = e.cmd(ctx, "pipeline", "run", e.def, "--no-progress", "--keep").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, len(again.requests), len(readRun(t, e.data).requests))
	out, err = e.cmd(ctx, "pipeline", "run", e.def, "--no-progress").CombinedOutput()
	require.NoError(t, err, "kept: the run directory has the new definition now: %s", out)
}

// An item whose line was edited between runs has answers given to what it
// said before: the run is refused, naming its line and key, without a
// write; --rerun-changed asks that item's pairs again (and nothing else),
// --keep keeps its answers. Lines added at the end are new work, not a
// change, and a run of some items (--items) keeps the record of the
// others.
func TestChangedItemIsRefusedUnlessRerunOrKept(t *testing.T) {
	fano.Require(t)
	e := newEnv(t, twoSteps, simConfig(0, 4), 5)
	items := filepath.Join(e.dir, "items.jsonl")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	run := func(args ...string) (string, error) {
		out, err := e.cmd(ctx, append([]string{"pipeline", "run", e.def, "--no-progress"}, args...)...).CombinedOutput()
		return string(out), err
	}
	edit := func(from, to string) {
		t.Helper()
		b, err := os.ReadFile(items)
		require.NoError(t, err)
		require.Contains(t, string(b), from)
		require.NoError(t, os.WriteFile(items, []byte(strings.Replace(string(b), from, to, 1)), 0o644))
	}
	out, err := run()
	require.NoError(t, err, out)
	first := readRun(t, e.data)
	require.Len(t, first.okCount, 15)

	// A line added: asked, nothing refused.
	f, err := os.OpenFile(items, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"id": "c00005", "claim": "claim number 5"}` + "\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	out, err = run()
	require.NoError(t, err, out)
	added := readRun(t, e.data)
	require.Len(t, added.okCount, 18)

	edit("claim number 2", "claim number two")
	out, err = run()
	require.Error(t, err)
	assert.Contains(t, out, "1 item(s) changed since the last run")
	assert.Contains(t, out, "line 3: c00002")
	assert.Equal(t, added.lastSeq, readRun(t, e.data).lastSeq, "refused before any write")

	out, err = run("--rerun-changed")
	require.NoError(t, err, out)
	again := readRun(t, e.data)
	asked := map[string]int{}
	for id, n := range again.okCount {
		parts := strings.Split(id, "/") // pipeline/<type>/<step>/<model>/<generation>/<item>
		asked[parts[len(parts)-1]] += n
	}
	assert.Equal(t, map[string]int{"c00000": 3, "c00001": 3, "c00002": 6, "c00003": 3, "c00004": 3, "c00005": 3}, asked,
		"c00002's three steps asked again, nothing else")

	// A run of some items only, then an edit of another: still seen.
	keys := filepath.Join(e.dir, "keys.txt")
	require.NoError(t, os.WriteFile(keys, []byte("c00001\n"), 0o644))
	out, err = run("--items", keys)
	require.NoError(t, err, out)
	edit("claim number 4", "claim number four")
	out, err = run()
	require.Error(t, err)
	assert.Contains(t, out, "line 5: c00004")

	out, err = run("--keep")
	require.NoError(t, err, out)
	assert.Equal(t, len(again.requests), len(readRun(t, e.data).requests), "kept: nothing asked")
	out, err = run()
	require.NoError(t, err, "kept: the run directory records the new line now: %s", out)
}
