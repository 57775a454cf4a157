package pipeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"google.golang.org/protobuf/proto"

	"fano/pb"
)

// The module's facts are pb messages (pb/pipeline.proto) in
// ModuleEvent.data. Runs written before those existed hold JSON there;
// a JSON object starts with '{', which no pipeline message can (field 15
// is never used), so both read back.

// answerEvent is one pair fact, decoded. The JSON tags are the old
// encoding, kept to replay old runs.
type answerEvent struct {
	// pair is the pair the fact is about; Key its key in old (JSON)
	// events only.
	pair   pairID
	Key    string          `json:"k"`
	Gen    int             `json:"g"`
	Output json.RawMessage `json:"o,omitempty"`
	Stage  string          `json:"st,omitempty"`
	Error  string          `json:"e,omitempty"`
	Raw    string          `json:"r,omitempty"`
	Cost   float64         `json:"c,omitempty"`
	Tokens int64           `json:"t,omitempty"`
}

// keysEvent is the old (JSON) retry_failed.
type keysEvent struct {
	Keys []string `json:"keys"`
}

func legacyJSON(data []byte) bool { return len(data) > 0 && data[0] == '{' }

// encodeAnswer writes a pair fact as proto.Marshal writes a
// pb.PipelinePairEvent (the same bytes; a test holds it to that), in one
// buffer of the right size, without building the message. As
// proto.Marshal, it refuses text that is not UTF-8.
func encodeAnswer(a answerEvent) ([]byte, error) {
	strs := [...]struct {
		num protowire.Number
		v   string
	}{{1, a.pair.step}, {2, a.pair.item}, {3, a.pair.model}, {6, a.Stage}, {7, a.Error}, {8, a.Raw}}
	size := 0
	for _, f := range strs {
		if f.v != "" {
			if !utf8.ValidString(f.v) {
				return nil, fmt.Errorf("field %d: string field contains invalid UTF-8", f.num)
			}
			size += 1 + protowire.SizeBytes(len(f.v))
		}
	}
	if a.Gen != 0 {
		size += 1 + protowire.SizeVarint(uint64(int64(int32(a.Gen))))
	}
	if len(a.Output) > 0 {
		size += 1 + protowire.SizeBytes(len(a.Output))
	}
	if math.Float64bits(a.Cost) != 0 {
		size += 1 + protowire.SizeFixed64()
	}
	if a.Tokens != 0 {
		size += 1 + protowire.SizeVarint(uint64(a.Tokens))
	}
	b := make([]byte, 0, size)
	str := func(f int) []byte {
		if strs[f].v != "" {
			b = protowire.AppendTag(b, strs[f].num, protowire.BytesType)
			b = protowire.AppendString(b, strs[f].v)
		}
		return b
	}
	b = str(0)
	b = str(1)
	b = str(2)
	if a.Gen != 0 {
		b = protowire.AppendTag(b, 4, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(int64(int32(a.Gen))))
	}
	if len(a.Output) > 0 {
		b = protowire.AppendTag(b, 5, protowire.BytesType)
		b = protowire.AppendBytes(b, a.Output)
	}
	b = str(3)
	b = str(4)
	b = str(5)
	if bits := math.Float64bits(a.Cost); bits != 0 {
		b = protowire.AppendTag(b, 9, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, bits)
	}
	if a.Tokens != 0 {
		b = protowire.AppendTag(b, 10, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(a.Tokens))
	}
	return b, nil
}

// decodeAnswer reads a pair fact (a pb.PipelinePairEvent, or an old JSON
// one) as proto.Unmarshal would, fields it does not know skipped. The
// pair's names are those intern returns for the step, item and model
// bytes (the module's own strings, no copy per event); nil intern copies
// them.
func decodeAnswer(data []byte, intern func(field protowire.Number, b []byte) string) (answerEvent, error) {
	var a answerEvent
	if legacyJSON(data) {
		err := json.Unmarshal(data, &a)
		a.pair = pairIDOf(a.Key)
		return a, err
	}
	if intern == nil {
		intern = func(_ protowire.Number, b []byte) string { return string(b) }
	}
	for b := data; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return a, protowire.ParseError(n)
		}
		b = b[n:]
		want := protowire.BytesType
		switch num {
		case 4, 10:
			want = protowire.VarintType
		case 9:
			want = protowire.Fixed64Type
		}
		if num > 10 || typ != want {
			// Not a field of this message's (or not of its type): skipped,
			// as proto.Unmarshal keeps it among the unknown fields.
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return a, protowire.ParseError(n)
			}
			b = b[n:]
			continue
		}
		switch typ {
		case protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return a, protowire.ParseError(n)
			}
			b = b[n:]
			if num == 4 {
				a.Gen = int(int32(v))
			} else {
				a.Tokens = int64(v)
			}
		case protowire.Fixed64Type:
			v, n := protowire.ConsumeFixed64(b)
			if n < 0 {
				return a, protowire.ParseError(n)
			}
			b = b[n:]
			a.Cost = math.Float64frombits(v)
		default:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return a, protowire.ParseError(n)
			}
			b = b[n:]
			if num == 5 {
				a.Output = bytes.Clone(v)
				continue
			}
			if !utf8.Valid(v) {
				return a, fmt.Errorf("field %d: string field contains invalid UTF-8", num)
			}
			switch num {
			case 1:
				a.pair.step = intern(num, v)
			case 2:
				a.pair.item = intern(num, v)
			case 3:
				a.pair.model = intern(num, v)
			case 6:
				a.Stage = string(v)
			case 7:
				a.Error = string(v)
			case 8:
				a.Raw = string(v)
			}
		}
	}
	return a, nil
}

func encodeRetry(keys []string) ([]byte, error) {
	r := &pb.PipelineRetryFailed{Pairs: make([]*pb.PipelinePairRef, len(keys))}
	for i, k := range keys {
		step, item, model := splitPairKey(k)
		r.Pairs[i] = &pb.PipelinePairRef{Step: step, Item: item, Model: model}
	}
	return proto.Marshal(r)
}

func decodeRetry(data []byte) ([]string, error) {
	if legacyJSON(data) {
		var ks keysEvent
		err := json.Unmarshal(data, &ks)
		return ks.Keys, err
	}
	var r pb.PipelineRetryFailed
	if err := proto.Unmarshal(data, &r); err != nil {
		return nil, err
	}
	keys := make([]string, len(r.Pairs))
	for i, p := range r.Pairs {
		keys[i] = pairKey(p.Step, p.Item, p.Model)
	}
	return keys, nil
}

// pairEvent is one pair fact as a module event.
func pairEvent(typ, taskID string, a answerEvent) ([]*pb.ModuleEvent, error) {
	data, err := encodeAnswer(a)
	if err != nil {
		return nil, fmt.Errorf("pipeline: encode %s of %s: %w", typ, taskID, err)
	}
	return []*pb.ModuleEvent{{Type: typ, Data: data, TaskId: taskID}}, nil
}
