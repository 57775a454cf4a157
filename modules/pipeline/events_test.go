package pipeline

import (
	"encoding/json"
	"math"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"fano/pb"
)

// The pair facts' own codec writes the bytes proto.Marshal writes and
// reads what proto.Unmarshal reads: runs written by either read back.
func TestPairEventCodecIsProtobufs(t *testing.T) {
	events := []answerEvent{
		{},
		{pair: pairID{"verdict", "i00001", "api"}, Gen: 0, Output: json.RawMessage(`{"verdict":true}`), Cost: 0.000012, Tokens: 31},
		{pair: pairID{"judge", "ключ/с/косыми", "m1"}, Gen: 3, Stage: "schema", Error: "output.verdict: want boolean", Raw: "{\"verdict\": «да»}"},
		{pair: pairID{"s", "i", "m"}, Gen: -2, Cost: math.Copysign(0, -1), Tokens: -5},
		{pair: pairID{"s", "", "m"}, Gen: math.MaxInt32, Cost: 1e300, Tokens: math.MaxInt64, Raw: string(make([]byte, 300))},
	}
	for i, a := range events {
		want, err := proto.Marshal(&pb.PipelinePairEvent{Step: a.pair.step, Item: a.pair.item, Model: a.pair.model, Gen: int32(a.Gen),
			Output: a.Output, Stage: a.Stage, Error: a.Error, Raw: a.Raw, CostUsd: a.Cost, Tokens: a.Tokens})
		require.NoError(t, err)
		got, err := encodeAnswer(a)
		require.NoError(t, err)
		assert.Equal(t, want, got, "event %d", i)
		assert.Equal(t, len(got), cap(got), "event %d: the buffer is sized exactly", i)

		back, err := decodeAnswer(want, nil)
		require.NoError(t, err)
		if a.Output == nil {
			back.Output = nil
		}
		assert.Equal(t, a.pair, back.pair, "event %d", i)
		assert.Equal(t, math.Float64bits(a.Cost), math.Float64bits(back.Cost), "event %d", i)
		back.Cost, a.Cost = 0, 0
		back.pair, a.pair = pairID{}, pairID{}
		assert.Equal(t, a, back, "event %d", i)
	}

	// A field this module does not know (a later version's), and a known
	// number of another wire type, are skipped as proto.Unmarshal skips
	// them; the last of a repeated scalar wins.
	data, err := encodeAnswer(answerEvent{pair: pairID{"s", "i", "m"}, Gen: 1})
	require.NoError(t, err)
	data = protowire.AppendTag(data, 11, protowire.BytesType)
	data = protowire.AppendString(data, "later")
	data = protowire.AppendTag(data, 4, protowire.BytesType)
	data = protowire.AppendString(data, "not a varint")
	data = protowire.AppendTag(data, 3, protowire.BytesType)
	data = protowire.AppendString(data, "m2")
	var pe pb.PipelinePairEvent
	require.NoError(t, proto.Unmarshal(data, &pe))
	got, err := decodeAnswer(data, nil)
	require.NoError(t, err)
	assert.Equal(t, answerEvent{pair: pairID{pe.Step, pe.Item, pe.Model}, Gen: int(pe.Gen)}, got)

	// Text that is not UTF-8 is refused both ways, as protobuf refuses it;
	// a truncated event is an error, not a partial fact.
	_, err = encodeAnswer(answerEvent{pair: pairID{"s", "i", "m"}, Raw: "\xff"})
	assert.Error(t, err)
	bad := protowire.AppendString(protowire.AppendTag(nil, 8, protowire.BytesType), "\xff")
	assert.Error(t, proto.Unmarshal(bad, &pe))
	_, err = decodeAnswer(bad, nil)
	assert.Error(t, err)
	full, err := encodeAnswer(answerEvent{pair: pairID{"step", "item", "model"}, Error: "why"})
	require.NoError(t, err)
	_, err = decodeAnswer(full[:len(full)-1], nil)
	assert.Error(t, err)
}

// A decoded fact names its pair with the module's own strings (no copy
// per event kept in the index).
func TestAppliedFactsShareTheModulesNames(t *testing.T) {
	def, items := writeDef(t, exportBenchDef, 3)
	m := New(Config{Def: def, Items: items})
	data, err := encodeAnswer(answerEvent{pair: pairID{"verdict", items[1].Key, "api"}, Output: json.RawMessage(`{"verdict":true}`)})
	require.NoError(t, err)
	a, err := decodeAnswer(data, m.internName)
	require.NoError(t, err)
	assert.Same(t, unsafeData(items[1].Key), unsafeData(a.pair.item))
	assert.Same(t, unsafeData(def.Step("verdict").Name), unsafeData(a.pair.step))
	assert.Equal(t, pairID{"verdict", items[1].Key, "api"}, a.pair)
	other, err := encodeAnswer(answerEvent{pair: pairID{"gone", "i-unknown", "m-unknown"}})
	require.NoError(t, err)
	b, err := decodeAnswer(other, m.internName)
	require.NoError(t, err)
	assert.Equal(t, pairID{"gone", "i-unknown", "m-unknown"}, b.pair)
}

func unsafeData(s string) *byte { return unsafe.StringData(s) }
