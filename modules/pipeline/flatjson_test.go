package pipeline

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Where flatObject decodes, it gives what json.Unmarshal gives; the
// common flat objects it decodes itself, everything else it leaves to
// encoding/json.
func TestFlatObjectIsJSONUnmarshal(t *testing.T) {
	flat := []string{
		`{"id": "c00001", "claim": "claim number 1"}`,
		`{"verdict":true}`,
		" \t\n{ \"a\" : -0.5e+3 , \"b\":false,\"c\":null,\"d\":0,\"é\":\"ü ✓\", \"a\": 1E2 }\r\n",
		`{}`, `{"n": 123456789012345678}`, `{"x": -0, "y": 1.0, "z": 2e-7}`,
	}
	for _, text := range flat {
		got, ok := flatObject(text)
		require.True(t, ok, "%s is flat", text)
		var want map[string]any
		require.NoError(t, json.Unmarshal([]byte(text), &want))
		assert.Equal(t, want, got, text)
		gotB, ok := flatObject([]byte(text))
		require.True(t, ok)
		assert.Equal(t, want, gotB, text)
	}
	left := []string{
		`{"a": {"b": 1}}`, `{"a": [1]}`, `{"a": "q\"uote"}`, `{"a\n": 1}`, "{\"a\": \"\x01\"}",
		"{\"a\": \"\xff\"}", `{"a": 01}`, `{"a": 1.}`, `{"a": .5}`, `{"a": +1}`, `{"a": 1e}`, `{"a": 1e400}`,
		`{"a": tru}`, `{"a": nul}`, `{"a": 1,}`, `{"a" 1}`, `{a: 1}`, `{"a": 1} x`, `{"a": 1}}`, `[1]`, `null`,
		`{"a": 1`, `{"a": Infinity}`, `{"a": -}`, `{"a": "x"`, ``, `{`,
	}
	for _, text := range left {
		_, ok := flatObject(text)
		assert.False(t, ok, "%q is left to encoding/json", text)
	}
	// Mutations of a flat object: wherever flatObject decodes one, it
	// agrees with encoding/json.
	r := rand.New(rand.NewPCG(7, 7))
	const alphabet = "{}[]\":,. -+eE0123456789tfnrul\\x\té"
	base := `{"id": "c1", "n": -12.5e3, "ok": true, "no": false, "z": null}`
	decoded := 0
	for range 20000 {
		b := []byte(base)
		for range 1 + r.IntN(3) {
			b[r.IntN(len(b))] = alphabet[r.IntN(len(alphabet))]
		}
		got, ok := flatObject(b)
		var want map[string]any
		err := json.Unmarshal(b, &want)
		if ok {
			decoded++
			require.NoError(t, err, "%s", b)
			require.Equal(t, want, got, "%s", b)
		}
	}
	assert.Greater(t, decoded, 1000)
}

// Where flatRefs reads a line, it gives the prompt fields itemRefValues
// gives from the line decoded by encoding/json: text fields, others (a
// number, null, missing) not text, a key given twice its last value.
func TestFlatRefsIsItemRefValuesOfTheDecodedLine(t *testing.T) {
	names := []string{"claim", "a", "é", "id", "missing"}
	check := func(b []byte) bool {
		t.Helper()
		vals, text, ok := flatRefs(b, names)
		valsOfText, textOfText, okOfText := flatRefs(string(b), names)
		require.Equal(t, ok, okOfText, "%s", b)
		if !ok {
			return false
		}
		require.Equal(t, vals, valsOfText, "%s", b)
		require.Equal(t, text, textOfText, "%s", b)
		var fields map[string]any
		require.NoError(t, json.Unmarshal(b, &fields), "%s", b)
		wantVals, wantText := itemRefValues(fields, names)
		require.Equal(t, wantText, text, "%s", b)
		require.Equal(t, wantVals, vals, "%s", b)
		return true
	}
	for _, text := range []string{
		`{"id": "c00001", "claim": "claim number 1"}`,
		" \t\n{ \"a\" : -0.5e+3 , \"b\":false,\"c\":null,\"d\":0,\"é\":\"ü ✓\", \"a\": \"last\" }\r\n",
		`{"a": "first", "a": 1}`, `{}`, `{"n": 1}`, `{"claim": null, "id": true}`,
	} {
		assert.True(t, check([]byte(text)), "%s is read", text)
	}
	for _, text := range []string{`{"a": {"b": 1}}`, `{"a": "q\"uote"}`, `{"a": 1e400}`, `{"a": 1} x`, `{"a": 1`, `[1]`} {
		_, _, ok := flatRefs([]byte(text), names)
		assert.False(t, ok, "%q is left to encoding/json", text)
	}
	r := rand.New(rand.NewPCG(8, 8))
	const alphabet = "{}[]\":,. -+eE0123456789tfnrul\\x\té"
	base := `{"id": "c1", "a": -12.5e3, "claim": "t", "no": false, "a": null, "é": "x"}`
	read := 0
	for range 20000 {
		b := []byte(base)
		for range 1 + r.IntN(3) {
			b[r.IntN(len(b))] = alphabet[r.IntN(len(alphabet))]
		}
		if check(b) {
			read++
		}
	}
	assert.Greater(t, read, 1000)
}
