package pipeline

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const badPipeline = `name: bad-name!
items: {source: missing.jsonl, key: id}
models: [m1]
steps:
  - name: ask
    llm:
      prompt: |
        first line
        uses {{.steps.count}} without needing it
      schema: {type: objekt}
      rules: ['output.x >']
  - name: count
    needs: [nothere]
    expression: '1 +'
  - name: both
    expression: '1'
    llm: {prompt: x}
`

// Every problem of a bad file is reported at once, each at its line.
func TestParseReportsEveryProblemAtItsLine(t *testing.T) {
	_, err := Parse([]byte(badPipeline), "bad.yaml")
	var ps Problems
	require.True(t, errors.As(err, &ps), "%v", err)
	got := map[int]string{}
	for _, p := range ps {
		assert.Equal(t, "bad.yaml", p.File)
		got[p.Line] += p.Msg + ";"
		t.Log(p.Error())
	}
	assert.Contains(t, got[1], "name")
	assert.Contains(t, got[2], "missing.jsonl")
	assert.Contains(t, got[9], "add count to the step's needs")
	assert.Contains(t, got[10], "objekt")
	assert.Contains(t, got[11], "rule 1")
	assert.Contains(t, got[13], `"nothere"`)
	assert.Contains(t, got[14], "expression")
	assert.Contains(t, got[15], "exactly one of llm, expression, group")
	assert.Len(t, ps, 8)
}

func TestParseRejectsUnknownFieldsAndCycles(t *testing.T) {
	_, err := Parse([]byte("name: x\nitems: {cross: {a: [1]}}\nstepz: []\n"), "f.yaml")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "f.yaml:3:")
	_, err = Parse([]byte(`name: x
items: {cross: {a: [1]}}
steps:
  - name: a
    needs: [b]
    expression: '1'
  - name: b
    needs: [a]
    expression: '2'
`), "c.yaml")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cycle")
}

func TestItemSources(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
		return p
	}
	write("a.csv", "id,claim\nx,one\ny,\"two, quoted\"\n")
	write("dup.jsonl", "{\"id\": 1}\n{\"id\": 2}\n{\"id\": 1}\n")
	load := func(items string) ([]*Item, error) {
		path := write("p.yaml", "name: p\nitems: "+items+"\nsteps: [{name: e, expression: 'key'}]\n")
		d, err := Load(path)
		if err != nil {
			return nil, err
		}
		return d.LoadItems()
	}
	its, err := load("{source: a.csv, key: id}")
	require.NoError(t, err)
	require.Len(t, its, 2)
	assert.Equal(t, "two, quoted", its[1].Fields()["claim"])
	assert.Equal(t, int32(3), its[1].Line)

	// A key is its text as written (a whole number without its ".0");
	// an item without one, or with an empty one, is refused by its line.
	write("keys.jsonl", "{\"id\": \"k/1\"}\n{\"id\": 7.0}\n{\"id\": true}\n")
	its, err = load("{source: keys.jsonl, key: id}")
	require.NoError(t, err)
	assert.Equal(t, []string{"k/1", "7", "true"}, []string{its[0].Key, its[1].Key, its[2].Key})
	write("nokey.jsonl", "{\"id\": \"a\"}\n{\"id\": \"\"}\n")
	_, err = load("{source: nokey.jsonl, key: id}")
	require.ErrorContains(t, err, `nokey.jsonl:2: the item has no key field "id"`)
	write("nokey2.jsonl", "{\"id\": \"a\"}\n{\"other\": 1}\n")
	_, err = load("{source: nokey2.jsonl, key: id}")
	require.ErrorContains(t, err, `nokey2.jsonl:2: the item has no key field "id"`)

	_, err = load("{source: dup.jsonl, key: id}")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `key "1" appears twice (line 1 and line 3)`)

	its, err = load("{permutations: {of: [a, b, c], size: 2}}")
	require.NoError(t, err)
	assert.Len(t, its, 6)
	assert.Equal(t, "a+b", its[0].Key)

	its, err = load("{cross: {tone: [formal, casual], len: [s, l]}}")
	require.NoError(t, err)
	require.Len(t, its, 4)
	assert.Equal(t, "s+formal", its[0].Key)
	assert.Equal(t, map[string]any{"len": "s", "tone": "formal"}, its[0].Fields())
}

// timeout_seconds, when: and limits.max_items are checked, each problem at
// its line.
func TestParseChecksTimeoutsAndWhen(t *testing.T) {
	_, err := Parse([]byte(`name: p
items: {source: items.jsonl, key: id}
models: [m1]
limits: {max_items: -3}
steps:
  - name: ask
    when: 'steps.nope == 1'
    llm:
      prompt: 'x {{.item.a}}'
      timeout_seconds: -1
`), "p.yaml")
	var ps Problems
	require.True(t, errors.As(err, &ps), "%v", err)
	got := map[int]string{}
	for _, p := range ps {
		got[p.Line] += p.Msg + ";"
	}
	assert.Contains(t, got[4], "limits: a limit is zero (none) or positive")
	assert.Contains(t, got[7], "step ask: when: {{.steps.nope}} is not a step")
	assert.Contains(t, got[10], "step ask: timeout_seconds must be from 0.001 to 604800")
}

// A JSONL item's line is read back from the file when the item opens, as
// it was written (CRLF ends, blank lines, leading spaces, a line longer
// than the read buffer); a line edited in place since is refused by
// file, line and key, never rendered as another item's prompt.
func TestJSONLLinesAreReadBackAsTheirItems(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("x", 10000)
	text := "{\"id\": \"a\", \"claim\": \"one\"}\r\n\n   {\"id\": \"b\", \"claim\": \"" + long + "\"}\n\t{\"id\": 3, \"claim\": \"three\"}"
	src := filepath.Join(dir, "items.jsonl")
	require.NoError(t, os.WriteFile(src, []byte(text), 0o644))
	path := filepath.Join(dir, "p.yaml")
	require.NoError(t, os.WriteFile(path, []byte("name: p\nitems: {source: items.jsonl, key: id}\nsteps: [{name: e, expression: 'key'}]\n"), 0o644))
	d, err := Load(path)
	require.NoError(t, err)
	its, err := d.LoadItems()
	require.NoError(t, err)
	require.Len(t, its, 3)
	want := map[string]any{"a": "one", "b": long, "3": "three"}
	for _, it := range its {
		f, err := it.fields()
		require.NoError(t, err, it.Key)
		assert.Equal(t, want[it.Key], f["claim"], it.Key)
		it.release()
	}
	assert.Equal(t, []int32{1, 3, 4}, []int32{its[0].Line, its[1].Line, its[2].Line})

	// The same length, another key: edited in place.
	edited := strings.Replace(text, `"id": "a"`, `"id": "z"`, 1)
	f, err := os.OpenFile(src, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte(edited), 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	_, err = its[0].fields()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "items.jsonl:1: the file changed while the run was going")
	assert.Contains(t, err.Error(), `no longer item "a" (its key is "z")`)
	_, err = its[1].fields()
	require.NoError(t, err, "the other lines are as they were")
}
