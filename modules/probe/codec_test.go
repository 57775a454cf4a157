package probe

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"fano/pb"
)

// texts are the strings the codec must carry: escapes, controls, HTML
// characters, multi-byte and astral runes, invalid UTF-8, and random mixes.
func texts() []string {
	out := []string{"", "plain", `quote " and \ backslash`, "lines\nand\ttabs\r", "\x00\x01\x1f\x7f",
		"<b>&amp;</b>", "\u2028\u2029", "é, 中文, 🙂", "\xff\xfe invalid", `\u0041 literal`, "/slash/"}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", " ", "\"", "\\", "\n", "\t", "\x01", "<", "&", "é", "🙂", "\u2028", "\xc3", "/", "u", "0"}
	for range 2000 {
		var b strings.Builder
		for range rng.IntN(40) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		out = append(out, b.String())
	}
	return out
}

// What the probe writes, encoding/json reads back the same; what
// json.Marshal wrote (older events) and what the probe writes, the probe
// reads itself, as encoding/json does.
func TestAnswerCodecAgreesWithEncodingJSON(t *testing.T) {
	for i, text := range texts() {
		a := answerEvent{Task: "probe/exploration/q" + text, Turn: i % 7, Text: text}
		mine, err := encodeAnswer(a)
		require.NoError(t, err)
		var back answerEvent
		require.NoError(t, json.Unmarshal(mine, &back), "%q", mine)
		theirs, err := json.Marshal(a)
		require.NoError(t, err)
		var want answerEvent
		require.NoError(t, json.Unmarshal(theirs, &want))
		require.Equal(t, want, back, "%q", text)
		for _, data := range [][]byte{mine, theirs} {
			got, ok := decodeAnswer(data)
			require.True(t, ok, "declined %q", data)
			require.Equal(t, want, got, "%q", data)
		}
	}
}

// Another shape of the same event (spaces, other order) is read by
// encoding/json: Apply records it all the same.
func TestApplyReadsOtherShapes(t *testing.T) {
	m := New(Config{NoPropose: true})
	at := time.Unix(0, 0)
	require.NoError(t, m.Apply(&pb.ModuleEvent{Type: "answer_recorded", TaskId: "x",
		Data: []byte(`{ "turn": 0, "text": "a\u00e9", "task": "x" }`)}, at))
	mine, err := encodeAnswer(answerEvent{Task: "x", Turn: 1, Text: "b\n\"c\""})
	require.NoError(t, err)
	require.NoError(t, m.Apply(&pb.ModuleEvent{Type: "answer_recorded", TaskId: "x", Data: mine}, at))
	require.Equal(t, map[string][]string{"x": {"aé", "b\n\"c\""}}, m.Answers())
	require.Error(t, m.Apply(&pb.ModuleEvent{Type: "answer_recorded", TaskId: "x", Data: []byte(`{"task":`)}, at))
}
