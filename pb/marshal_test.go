package pb

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

type vtMessage interface {
	proto.Message
	SizeVT() int
	MarshalVT() ([]byte, error)
}

// The generated marshalling writes every field of every message of the
// package, each case of each oneof in turn: a message whose .proto gained
// a field without `make proto` regenerating its *_vtproto.pb.go fails here
// (it would lose that field on its way to the WAL).
func TestVTMarshalMatchesProto(t *testing.T) {
	n := 0
	protoregistry.GlobalFiles.RangeFilesByPackage("fano.v1", func(fd protoreflect.FileDescriptor) bool {
		msgs := fd.Messages()
		for i := 0; i < msgs.Len(); i++ {
			md := msgs.Get(i)
			mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName())
			if err != nil {
				t.Fatalf("%s: %v", md.FullName(), err)
			}
			cases := 1
			for j := 0; j < md.Oneofs().Len(); j++ {
				cases = max(cases, md.Oneofs().Get(j).Fields().Len())
			}
			for c := range cases {
				m := mt.New()
				fill(m, c+1)
				setOneofCase(m, c)
				vt, ok := m.Interface().(vtMessage)
				if !ok {
					t.Fatalf("%s has no generated marshalling: run make proto", md.FullName())
				}
				checkVT(t, vt)
				n++
			}
		}
		return true
	})
	if n < 50 {
		t.Fatalf("checked only %d messages", n)
	}
}

// setOneofCase sets case c (modulo the cases there are) of every oneof of
// m, filled.
func setOneofCase(m protoreflect.Message, c int) {
	oneofs := m.Descriptor().Oneofs()
	for j := 0; j < oneofs.Len(); j++ {
		fields := oneofs.Get(j).Fields()
		fd := fields.Get(c % fields.Len())
		if fd.Message() != nil {
			v := m.NewField(fd)
			fill(v.Message(), c+100)
			m.Set(fd, v)
		} else {
			m.Set(fd, scalar(fd, c+100))
		}
	}
}

func checkVT(t *testing.T, m vtMessage) {
	t.Helper()
	name := m.ProtoReflect().Descriptor().FullName()
	data, err := m.MarshalVT()
	if err != nil {
		t.Fatalf("%s: MarshalVT: %v", name, err)
	}
	if len(data) != m.SizeVT() || len(data) != proto.Size(m) {
		t.Fatalf("%s: MarshalVT wrote %d bytes, SizeVT says %d, proto.Size %d: run make proto", name, len(data), m.SizeVT(), proto.Size(m))
	}
	back := m.ProtoReflect().New().Interface()
	if err := proto.Unmarshal(data, back); err != nil {
		t.Fatalf("%s: decode: %v", name, err)
	}
	if !proto.Equal(back, m) {
		t.Fatalf("%s: MarshalVT lost something (run make proto):\n got  %v\n want %v", name, back, m)
	}
}

// Events go through EventSize and MarshalEventTo, also with a body that
// holds no message (written as an empty one, as proto.Marshal does).
func TestMarshalEventTo(t *testing.T) {
	var every []*Event
	cases := (&Event{}).ProtoReflect().Descriptor().Oneofs().ByName("body").Fields()
	for c := 0; c < cases.Len(); c++ {
		e := &Event{}
		fill(e.ProtoReflect(), 3)
		setOneofCase(e.ProtoReflect(), c)
		every = append(every, e)
	}
	for _, e := range append(every,
		&Event{At: 5, Body: &Event_TaskCompleted{}},
		&Event{At: 5, Body: &Event_TaskCompleted{TaskCompleted: &TaskCompleted{}}},
		&Event{At: 5},
		&Event{},
	) {
		want, err := proto.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if EventSize(e) != len(want) {
			t.Fatalf("%v: EventSize %d, proto.Size %d", e, EventSize(e), len(want))
		}
		buf := make([]byte, EventSize(e))
		kind, err := MarshalEventTo(buf, e)
		if err != nil {
			t.Fatal(err)
		}
		wantKind := "unknown"
		if fd := e.ProtoReflect().WhichOneof(e.ProtoReflect().Descriptor().Oneofs().ByName("body")); fd != nil {
			wantKind = string(fd.Name())
		}
		if kind != wantKind {
			t.Fatalf("%v: kind %q, want %q", e, kind, wantKind)
		}
		var back, ref Event
		if err := proto.Unmarshal(buf, &back); err != nil {
			t.Fatal(err)
		}
		if err := proto.Unmarshal(want, &ref); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(&back, &ref) {
			t.Fatalf("%v: decodes as %v, proto.Marshal's as %v", e, &back, &ref)
		}
	}
}

// A string that is not UTF-8, anywhere in an event (a map value, a
// nested message's field), is refused as proto.Marshal refuses it:
// proto.Unmarshal would refuse the entry when the WAL is replayed.
func TestMarshalEventToRefusesInvalidUTF8(t *testing.T) {
	bad := string([]byte{'a', 0xff, 'b'})
	for name, e := range map[string]*Event{
		"map value": {Body: &Event_TaskSubmitted{TaskSubmitted: &TaskSubmitted{Task: &Task{Id: "t", Context: map[string]string{"q": bad}}}}},
		"map key":   {Body: &Event_TaskSubmitted{TaskSubmitted: &TaskSubmitted{Task: &Task{Id: "t", Context: map[string]string{bad: "q"}}}}},
		"nested":    {Body: &Event_TaskSubmitted{TaskSubmitted: &TaskSubmitted{Task: &Task{Conversation: &ConversationState{Messages: []*Message{{Content: bad}}}}}}},
		"answer":    {At: 1, Body: &Event_LlmResponseReceived{LlmResponseReceived: &LLMResponseReceived{TaskId: "t", Content: bad}}},
		"long":      {At: 1, Body: &Event_LlmResponseReceived{LlmResponseReceived: &LLMResponseReceived{TaskId: "t", Content: strings.Repeat("a", 300) + bad}}},
		"field 101": {Body: &Event_TaskSubmitted{TaskSubmitted: &TaskSubmitted{Task: &Task{Id: "t", AvoidLlm: bad}}}},
		"field 152": {At: 1, Body: &Event_LlmResponseReceived{LlmResponseReceived: &LLMResponseReceived{Incomplete: bad}}},
	} {
		if _, err := proto.Marshal(e); err == nil {
			t.Fatalf("%s: proto.Marshal took it: the case tests nothing", name)
		}
		buf := make([]byte, EventSize(e))
		if _, err := MarshalEventTo(buf, e); err == nil {
			t.Fatalf("%s: MarshalEventTo took a string that is not UTF-8", name)
		}
	}
	// Bytes fields may hold anything.
	ok := &Event{Body: &Event_ModuleEvent{ModuleEvent: &ModuleEvent{Module: "m", Data: []byte{0xff}}}}
	if _, err := MarshalEventTo(make([]byte, EventSize(ok)), ok); err != nil {
		t.Fatalf("bytes field refused: %v", err)
	}
}

// MarshalTask writes every field (a task filled by the descriptors) and
// refuses a string that is not UTF-8.
func TestMarshalTask(t *testing.T) {
	task := &Task{}
	fill(task.ProtoReflect(), 5)
	data, err := MarshalTask(task)
	if err != nil {
		t.Fatal(err)
	}
	var back Task
	if err := proto.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&back, task) {
		t.Fatalf("MarshalTask lost something:\n got  %v\n want %v", &back, task)
	}
	task.Conversation.Messages[1].Content = string([]byte{0xc3})
	if _, err := MarshalTask(task); err == nil {
		t.Fatal("MarshalTask took a message that is not UTF-8")
	}
}

// BenchmarkMarshalTask: a finished task of the end-to-end benchmark's
// shape (context, one turn of conversation) as archived at its
// completion; baseline in the same run: proto.Marshal.
func BenchmarkMarshalTask(b *testing.B) {
	t := &Task{Id: "probe/q/1", Module: "probe", TaskType: "q", Subject: "1", State: TaskState_TASK_STATE_COMPLETED,
		Context: map[string]string{"question": "what is 6 x 7?"}, LlmAssigned: "api", MessageLimit: 50, MaxRequests: 1,
		Conversation: &ConversationState{Llm: "api", TurnCount: 1, Messages: []*Message{
			{Role: "user", Content: "what is 6 x 7?", At: 1}, {Role: "assistant", Content: "42 is the answer", At: 2, Llm: "api"}}}}
	var perOp [2]float64
	for i, c := range []struct {
		name    string
		marshal func(*Task) ([]byte, error)
	}{{"proto.Marshal", func(t *Task) ([]byte, error) { return proto.Marshal(t) }}, {"MarshalTask", MarshalTask}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.marshal(t); err != nil {
					b.Fatal(err)
				}
			}
			perOp[i] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			if i == 1 && perOp[0] > 0 {
				b.ReportMetric(perOp[0]/perOp[1], "x-faster")
			}
		})
	}
}

// FuzzMarshalEventTo: whatever proto.Unmarshal takes as an Event,
// MarshalEventTo writes so that it decodes to the same event, unknown
// fields included, with the case's name.
func FuzzMarshalEventTo(f *testing.F) {
	cases := (&Event{}).ProtoReflect().Descriptor().Oneofs().ByName("body").Fields()
	for c := 0; c < cases.Len(); c++ {
		e := &Event{}
		fill(e.ProtoReflect(), c)
		setOneofCase(e.ProtoReflect(), c)
		data, err := proto.Marshal(e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var e Event
		if proto.Unmarshal(data, &e) != nil {
			return
		}
		buf := make([]byte, EventSize(&e))
		kind, err := MarshalEventTo(buf, &e)
		if err != nil {
			t.Fatalf("%v: %v", &e, err)
		}
		var back Event
		if err := proto.Unmarshal(buf, &back); err != nil {
			t.Fatalf("%v: decode: %v", &e, err)
		}
		if !proto.Equal(&back, &e) {
			t.Fatalf("decodes as %v, want %v", &back, &e)
		}
		want := "unknown"
		if fd := e.ProtoReflect().WhichOneof(e.ProtoReflect().Descriptor().Oneofs().ByName("body")); fd != nil {
			want = string(fd.Name())
		}
		if kind != want {
			t.Fatalf("%v: kind %q, want %q", &e, kind, want)
		}
	})
}
