package pipeline

import (
	"encoding/json"
	"fmt"

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

func encodeAnswer(a answerEvent) ([]byte, error) {
	return proto.Marshal(&pb.PipelinePairEvent{Step: a.pair.step, Item: a.pair.item, Model: a.pair.model, Gen: int32(a.Gen),
		Output: a.Output, Stage: a.Stage, Error: a.Error, Raw: a.Raw, CostUsd: a.Cost, Tokens: a.Tokens})
}

func decodeAnswer(data []byte) (answerEvent, error) {
	var a answerEvent
	if legacyJSON(data) {
		err := json.Unmarshal(data, &a)
		a.pair = pairIDOf(a.Key)
		return a, err
	}
	var e pb.PipelinePairEvent
	if err := proto.Unmarshal(data, &e); err != nil {
		return a, err
	}
	return answerEvent{pair: pairID{e.Step, e.Item, e.Model}, Gen: int(e.Gen), Output: e.Output, Stage: e.Stage,
		Error: e.Error, Raw: e.Raw, Cost: e.CostUsd, Tokens: e.Tokens}, nil
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
