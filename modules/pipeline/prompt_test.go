package pipeline

import (
	"encoding/json"
	"fano/pb"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const promptKinds = `
name: prompts
items: {source: items.jsonl, key: id}
models: [m1]
steps:
  - name: plain
    llm: {prompt: "Claim {{.key}} for {{.model}}: {{.item.claim}} ({{.item.note}})\n{{- .item.claim -}}  !"}
  - name: number
    llm: {prompt: 'Size {{.item.size}} of {{.item.claim}}'}
  - name: missing
    llm: {prompt: 'Gone: {{.item.gone}}'}
  - name: piped
    llm: {prompt: 'Clipped: {{clip 5 .item.claim}}'}
  - name: later
    needs: [plain]
    llm: {prompt: 'After {{.steps.plain}}: {{.item.claim}}'}
`

// A simple prompt is filled from parts, the rest by text/template; both
// give the template's text for every item, and a field that is not a
// string (a number, null, missing) goes through the template, which
// prints or refuses it.
func TestSimplePromptsFillAsTheTemplateWould(t *testing.T) {
	dir := t.TempDir()
	lines := `{"id": "a", "claim": "the sky is blue", "note": "n<&>\u00e9", "size": "3 m"}
{"id": "b", "claim": "x", "note": null, "size": 1e6}
{"id": "c", "claim": "only a claim"}
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "items.jsonl"), []byte(lines), 0o644))
	path := filepath.Join(dir, "p.yaml")
	require.NoError(t, os.WriteFile(path, []byte(promptKinds), 0o644))
	def, err := Load(path)
	require.NoError(t, err)
	items, err := def.LoadItems()
	require.NoError(t, err)

	simple := map[string]bool{}
	for _, s := range def.Order() {
		simple[s.Name] = s.parts != nil
	}
	assert.Equal(t, map[string]bool{"plain": true, "number": true, "missing": true, "piped": false, "later": false}, simple)
	assert.NotNil(t, items[0].refsFor(def).refs, "item a's prompt fields are all text: kept from its line")
	assert.NotZero(t, items[1].refsFor(def).refText, "item b's claim is text")
	assert.Zero(t, items[1].refsFor(def).refText&(1<<1), "item b's note is null: its prompts with it go through the template")

	steps := map[string]any{"plain": map[string]any{"verdict": true}}
	for _, s := range def.Order() {
		for _, it := range items {
			got, gotErr := def.RenderPrompt(s, it, steps, "m1")
			var want strings.Builder
			wantErr := def.renderTemplate(&want, s, it, steps, "m1")
			if wantErr != nil {
				assert.Error(t, gotErr, "step %s, item %s", s.Name, it.Key)
				continue
			}
			require.NoError(t, gotErr, "step %s, item %s", s.Name, it.Key)
			assert.Equal(t, want.String()+s.promptTail, got, "step %s, item %s", s.Name, it.Key)
		}
	}
	got, err := def.RenderPrompt(def.Step("plain"), items[0], nil, "m1")
	require.NoError(t, err)
	assert.Equal(t, "Claim a for m1: the sky is blue (n<&>é)the sky is blue!", got)
}

// An answer's output is encoded without reflection, to the same bytes
// json.Marshal writes (results and later steps read them).
func TestEncodeValueIsJSONMarshal(t *testing.T) {
	for _, text := range []string{
		`{"verdict": true, "confidence": 0.95, "why": "a<b & \"q\" \t\u0001 ü \u2028"}`,
		`{"z": [1, 2.5, -0, 1e21, 1e-7, 123456789012345678, 0.000001, null, false], "a": {}, "m": {"y": [], "x": {"k": "v"}}}`,
		`[{"b": 1, "a": 2, "c": 3, "d": 4, "e": 5, "f": 6, "g": 7, "h": 8, "i": 9, "j": 10}]`,
		`"just text"`, `3.14`, `null`, `true`,
	} {
		var v any
		require.NoError(t, json.Unmarshal([]byte(text), &v))
		want, err := json.Marshal(v)
		require.NoError(t, err)
		got, err := encodeValue(v)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got), text)
	}
}

// The simulator writes its answers without building them: the same
// text as the drawn value through json.Marshal, the same numbers drawn.
func TestSimAnswerIsTheDrawnValueEncoded(t *testing.T) {
	for _, schema := range []string{
		`{"type":"object","required":["verdict"],"properties":{"verdict":{"type":"boolean"}}}`,
		`{"type":"object","properties":{"z":{"type":"number","minimum":-1e-9,"maximum":1e22},"a":{"type":"integer","minimum":3,"maximum":9},"t":{"type":"string","minLength":12,"maxLength":14},"e":{"enum":["x<y",2.5,null,{"k":[1]}]},"n":{"type":"null"},"l":{"type":"array","minItems":2,"items":{"type":"object","properties":{"b":{"type":"boolean"},"s":{"type":"string"}}}},"o":{"type":"object"},"bad":7}}`,
		`{"type":"array","items":{"type":"integer"}}`,
		`{"type":"string"}`,
	} {
		for seed := range uint64(20) {
			got := SimAnswer("q\n\n"+SchemaMarker+schema, rand.New(rand.NewPCG(seed, 1)))
			var s map[string]any
			require.NoError(t, json.Unmarshal([]byte(schema), &s))
			want, err := json.Marshal(sample(s, rand.New(rand.NewPCG(seed, 1))))
			require.NoError(t, err)
			assert.Equal(t, string(want), got, "schema %s, seed %d", schema, seed)
		}
	}
}

// results.jsonl's own writer (stored outputs, no maps built) writes what
// encoding/json writes of the decoded results, also for failed items
// whose group has only some of its steps.
func TestResultsOfFailedItemsAsDecodedOnesWould(t *testing.T) {
	def, items := writeDef(t, groupedNoExpr, 6)
	h := newHarness(t, def, items)
	h.answer = func(task *pb.Task, _ string) string {
		if field(task, "step") == "long" && field(task, "item") >= "i03" {
			return "no JSON here"
		}
		return `{"text": "fine", "n": 2}`
	}
	h.runAll()
	sum := h.m.Summary()
	require.Equal(t, 3, sum.ItemsDone)
	require.Equal(t, 3, sum.ItemsFailed)
	raw, err := h.m.results(true, nil)
	require.NoError(t, err)
	decoded, err := h.m.results(false, nil)
	require.NoError(t, err)
	assert.Equal(t, string(decoded), string(raw))
	assert.Contains(t, string(raw), `"drafts":{"short":{`, "a group with only its short step")
}

const chained = `
name: chained
items: {source: items.jsonl, key: id}
models: [api]
steps:
  - name: extract
    llm: {prompt: 'Extract the claim: {{.item.claim}}', schema: {type: object, required: [text], properties: {text: {type: string}}}}
  - name: judge
    needs: [extract]
    llm: {prompt: 'Judge: {{.steps.extract.text}} ({{.key}})', schema: {type: object, required: [verdict], properties: {verdict: {type: boolean}}}}
  - name: explain
    needs: [judge]
    llm: {prompt: 'Explain {{.steps.judge.verdict}} for {{.item.claim}}', schema: {type: object, required: [text], properties: {text: {type: string}}}}
`

// A later step's prompt that puts in a text field of an earlier step's
// output is filled from that output alone; one whose field is not text
// (a verdict) goes through the template; both as the template fills them.
func TestPromptsWithEarlierOutputsFillAsTheTemplateWould(t *testing.T) {
	def, items := writeDef(t, chained, 5)
	assert.NotNil(t, def.Step("judge").parts)
	assert.NotNil(t, def.Step("explain").parts, "simple, but its verdict is not text: the template prints it")
	h := newHarness(t, def, items)
	inner := h.answer
	checked := 0
	h.answer = func(task *pb.Task, prompt string) string {
		s, it := def.Step(field(task, "step")), items[must(h.m.itemIndex(field(task, "item")))]
		vals, err := h.m.stepValues(it)
		require.NoError(t, err)
		var want strings.Builder
		require.NoError(t, def.renderTemplate(&want, s, it, vals, "api"))
		assert.Equal(t, want.String()+s.promptTail, prompt)
		checked++
		return inner(task, prompt)
	}
	h.runAll()
	assert.Equal(t, 15, checked)
	assert.Equal(t, 5, h.m.Summary().ItemsDone)
}

// A snapshot writes the pairs' keys without building them: the same
// bytes as encoding/json of the pairs by key, for names that need
// escaping, are not ASCII, or hold the keys' separator.
func TestSnapshotKeysAsJSONWouldWriteThem(t *testing.T) {
	for _, names := range [][]string{
		{"i<1>", "i&2", "i\"3", "ä", "i", "i\t", "ia", "i0"},
		{"a", "a\x00b", "a\x00", "ab"},
	} {
		def, items := writeDef(t, exportBenchDef, 1)
		m := New(Config{Def: def, Items: items})
		want := map[string]*pairRecord{}
		for i, item := range names {
			for _, step := range []string{"verdict", "v"} {
				p := m.ensure(pairID{step, item, "api"})
				p.status, p.Output, p.Gen = statusOK, outText(`{"verdict":true}`), int32(i)
				want[pairKey(step, item, "api")] = p.record()
			}
		}
		st := m.st
		st.Pairs = want
		wantJSON, err := json.Marshal(st)
		require.NoError(t, err)
		got, err := m.snapshotJSON()
		require.NoError(t, err)
		assert.Equal(t, string(wantJSON), string(got))
	}
}

func must(i int, ok bool) int {
	if !ok {
		panic("no such item")
	}
	return i
}
