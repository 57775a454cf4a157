package actors

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"fano/modules/probe"
	"fano/pb"
	"fano/wal"
)

// lifeEvents are the events of one task of BenchmarkEndToEnd, with their
// owners (see taskLife).
func lifeEvents(i int) (owners []string, events []*pb.Event) {
	t := benchTask(i)
	now := time.Now().UnixNano()
	add := func(owner string, e *pb.Event) {
		e.At = now
		owners = append(owners, owner)
		events = append(events, e)
	}
	add(ownerScheduler, &pb.Event{Body: &pb.Event_TaskSubmitted{TaskSubmitted: &pb.TaskSubmitted{Task: t}}})
	add(ownerScheduler, &pb.Event{Body: &pb.Event_TaskStarted{TaskStarted: &pb.TaskStarted{TaskId: t.Id, Llm: "api"}}})
	add(ownerAllocator, &pb.Event{Body: &pb.Event_QuotaUsed{QuotaUsed: &pb.QuotaUsed{Backend: "api", TaskId: t.Id}}})
	add(ownerScheduler, &pb.Event{Body: &pb.Event_LlmRequestStarted{LlmRequestStarted: &pb.LLMRequestStarted{TaskId: t.Id, Llm: "api", Prompt: t.Context["question"]}}})
	add(ownerScheduler, &pb.Event{Body: &pb.Event_LlmResponseReceived{LlmResponseReceived: &pb.LLMResponseReceived{TaskId: t.Id, Llm: "api", Content: strings.Repeat("answer ", 40)}}})
	add(moduleOwner(probe.Name), &pb.Event{Body: &pb.Event_ModuleEvent{ModuleEvent: &pb.ModuleEvent{Module: probe.Name, Type: "answer_recorded", TaskId: t.Id}}})
	add(ownerScheduler, &pb.Event{Body: &pb.Event_TaskCompleted{TaskCompleted: &pb.TaskCompleted{TaskId: t.Id}}})
	return owners, events
}

// BenchmarkEncodeEvents: the WAL entries of one task's events, made by
// encodeEvent. Baseline in the same run: the same entries with
// proto.Marshal and the event's name found by reflection, as encodeEvent
// made them before. Reports the ratio (x-faster).
func BenchmarkEncodeEvents(b *testing.B) {
	owners, events := lifeEvents(7)
	protoEntry := func(owner string, e *pb.Event) (wal.Entry, error) {
		data, err := proto.Marshal(e)
		if err != nil {
			return wal.Entry{}, err
		}
		fd := e.ProtoReflect().WhichOneof(e.ProtoReflect().Descriptor().Oneofs().ByName("body"))
		_, intent := e.Body.(*pb.Event_LlmRequestStarted)
		return wal.Entry{Time: timeOf(e.At), Type: string(fd.Name()), Owner: owner, Intent: intent, Payload: data}, nil
	}
	var perOp [2]float64
	for i, c := range []struct {
		name   string
		encode func(string, *pb.Event) (wal.Entry, error)
	}{{"proto.Marshal", protoEntry}, {"encodeEvent", encodeEvent}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for k, e := range events {
					if _, err := c.encode(owners[k], e); err != nil {
						b.Fatal(err)
					}
				}
			}
			perOp[i] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			if i == 1 && perOp[0] > 0 {
				b.ReportMetric(perOp[0]/perOp[1], "x-faster")
			}
		})
	}
}

// encodeEvents writes what proto.Marshal writes: every event decodes to
// itself, with the name and intent flag of its kind.
func TestEncodeEventsRoundTrip(t *testing.T) {
	_, events := lifeEvents(3)
	events = append(events, &pb.Event{At: 9, Body: &pb.Event_TaskCompleted{}}) // a case holding no message
	ents, err := encodeEvents(ownerScheduler, events, []wal.Entry{{Type: "before"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != len(events)+1 || ents[0].Type != "before" {
		t.Fatalf("entries %d (first %q), want the one given and %d", len(ents), ents[0].Type, len(events))
	}
	for i, e := range events {
		ent := ents[i+1]
		back, err := decodeEvent(ent)
		if err != nil {
			t.Fatal(err)
		}
		want := proto.Clone(e).(*pb.Event)
		if _, empty := e.Body.(*pb.Event_TaskCompleted); empty && e.GetTaskCompleted() == nil {
			want.Body = &pb.Event_TaskCompleted{TaskCompleted: &pb.TaskCompleted{}}
		}
		if !proto.Equal(back, want) {
			t.Fatalf("event %d decodes as %v, want %v", i, back, want)
		}
		if ent.Type != eventType(e) || ent.Owner != ownerScheduler || !ent.Time.Equal(timeOf(e.At)) {
			t.Fatalf("event %d: entry %s/%s at %v", i, ent.Type, ent.Owner, ent.Time)
		}
		if _, req := e.Body.(*pb.Event_LlmRequestStarted); ent.Intent != req {
			t.Fatalf("event %d (%s): intent %v", i, ent.Type, ent.Intent)
		}
	}
	if eventType(events[len(events)-1]) != "task_completed" {
		t.Fatalf("a case holding no message is named %q", eventType(events[len(events)-1]))
	}
}

// An event that cannot be encoded fails encodeEvents with its name and
// leaves the entries as they were.
func TestEncodeEventsRefusesInvalidUTF8(t *testing.T) {
	bad := &pb.Event{Body: &pb.Event_LlmResponseReceived{LlmResponseReceived: &pb.LLMResponseReceived{TaskId: "t", Content: string([]byte{0xff})}}}
	good := &pb.Event{Body: &pb.Event_TaskCompleted{TaskCompleted: &pb.TaskCompleted{TaskId: "t"}}}
	before := []wal.Entry{{Type: "before"}}
	ents, err := encodeEvents(ownerScheduler, []*pb.Event{good, bad}, before)
	if err == nil || !strings.Contains(err.Error(), "llm_response_received") {
		t.Fatalf("err %v, want one naming llm_response_received", err)
	}
	if len(ents) != 1 || ents[0].Type != "before" {
		t.Fatalf("entries after a failure: %v", ents)
	}
}
