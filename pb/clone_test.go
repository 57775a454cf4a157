package pb

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// fill sets every field of m, recursively, to a value derived from seed:
// what the descriptors list, so a field added to a message is filled too.
func fill(m protoreflect.Message, seed int) {
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		n := seed*1000 + int(fd.Number())
		switch {
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			for k := range 2 {
				key := protoreflect.ValueOfString(fmt.Sprintf("k%d-%d", n, k)).MapKey()
				if fd.MapValue().Message() != nil {
					v := mp.NewValue()
					fill(v.Message(), n+k)
					mp.Set(key, v)
				} else {
					mp.Set(key, scalar(fd.MapValue(), n+k))
				}
			}
		case fd.IsList():
			l := m.Mutable(fd).List()
			for k := range 2 {
				if fd.Message() != nil {
					v := l.NewElement()
					fill(v.Message(), n+k)
					l.Append(v)
				} else {
					l.Append(scalar(fd, n+k))
				}
			}
		case fd.Message() != nil:
			fill(m.Mutable(fd).Message(), n)
		default:
			m.Set(fd, scalar(fd, n))
		}
	}
	m.SetUnknown(protoreflect.RawFields{0xf8, 0x3e, byte(seed % 100)}) // field 999, varint
}

// change changes every field of m in place, recursively: where the copy
// shares storage with its original, the original changes too.
func change(m protoreflect.Message) {
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		switch {
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			mp.Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
				if fd.MapValue().Message() != nil {
					change(mp.Mutable(k).Message())
				} else {
					mp.Set(k, scalar(fd.MapValue(), 7777))
				}
				return true
			})
			mp.Set(protoreflect.ValueOfString("added").MapKey(), mp.NewValue())
		case fd.IsList():
			l := m.Mutable(fd).List()
			for k := 0; k < l.Len(); k++ {
				if fd.Message() != nil {
					change(l.Get(k).Message())
				} else {
					l.Set(k, scalar(fd, 7777))
				}
			}
		case fd.Message() != nil:
			change(m.Mutable(fd).Message())
		default:
			m.Set(fd, scalar(fd, 7777))
		}
	}
	if u := m.GetUnknown(); len(u) > 0 {
		u[len(u)-1]++
	}
}

func scalar(fd protoreflect.FieldDescriptor, n int) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(fmt.Sprintf("s%d", n))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte(fmt.Sprintf("b%d", n)))
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(n%2 == 0)
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(protoreflect.EnumNumber(1 + n%5))
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(n))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(int64(n))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(n))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(uint64(n))
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(n))
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(float64(n))
	}
	panic(fmt.Sprintf("no scalar for %s", fd.FullName()))
}

// CloneTask copies every field of a task and of the messages in it (a
// field added to Task, ConversationState, Message or BackendConversation
// and not to clone.go fails here), and shares nothing with the original.
func TestCloneTaskCopiesEveryField(t *testing.T) {
	orig := &Task{}
	fill(orig.ProtoReflect(), 1)
	want := proto.Clone(orig).(*Task)

	c := CloneTask(orig)
	if !proto.Equal(c, want) {
		t.Fatalf("CloneTask missed a field:\n got  %v\n want %v", c, want)
	}
	into := &Task{}
	fill(into.ProtoReflect(), 2) // CopyTask replaces whatever was there
	CopyTask(into, orig)
	if !proto.Equal(into, want) {
		t.Fatalf("CopyTask missed a field:\n got  %v\n want %v", into, want)
	}

	change(c.ProtoReflect())
	change(into.ProtoReflect())
	if proto.Equal(c, want) {
		t.Fatal("change changed nothing: the test checks no sharing")
	}
	if !proto.Equal(orig, want) {
		t.Fatalf("changing a copy changed the original:\n got  %v\n want %v", orig, want)
	}
	if CloneTask(nil) != nil {
		t.Fatal("CloneTask(nil) is not nil")
	}
	// Empty parts stay empty.
	if e := CloneTask(&Task{Id: "x"}); e.Conversation != nil || e.Context != nil || e.LlmExclude != nil {
		t.Fatalf("empty parts filled: %v", e)
	}
}

// BenchmarkCloneTask: a running task of the end-to-end benchmark's shape
// (context, two turns of conversation) copied by CloneTask; baseline in
// the same run: proto.Clone.
func BenchmarkCloneTask(b *testing.B) {
	t := &Task{Id: "probe/q/1", Module: "probe", TaskType: "q", Subject: "1", State: TaskState_TASK_STATE_RUNNING,
		Context: map[string]string{"question": "what is 6 x 7?", "n": "1"}, LlmAssigned: "api", MessageLimit: 50,
		Conversation: &ConversationState{Llm: "api", TurnCount: 1, Messages: []*Message{
			{Role: "user", Content: "what is 6 x 7?", At: 1}, {Role: "assistant", Content: "42", At: 2, Llm: "api"}}}}
	var perOp [2]float64
	for i, c := range []struct {
		name  string
		clone func(*Task) *Task
	}{{"proto.Clone", func(t *Task) *Task { return proto.Clone(t).(*Task) }}, {"CloneTask", CloneTask}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = c.clone(t)
			}
			perOp[i] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			if perOp[0] > 0 && i == 1 {
				b.ReportMetric(perOp[0]/perOp[1], "x-faster")
			}
		})
	}
}

// changeScalars changes m's own scalar fields, not its lists, maps and
// messages.
func changeScalars(m protoreflect.Message) {
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		if fd := fields.Get(i); !fd.IsMap() && !fd.IsList() && fd.Message() == nil {
			m.Set(fd, scalar(fd, 8888))
		}
	}
}

// CloneTaskSharing copies every field, and what it does not share (the
// task's and conversation's fields, the message list) can change without
// changing the original; its per-backend records change through
// BackendsWith and BackendsWithout, which never edit the shared map.
func TestCloneTaskSharingOwnsWhatChanges(t *testing.T) {
	orig := &Task{}
	fill(orig.ProtoReflect(), 1)
	want := proto.Clone(orig).(*Task)
	c := CloneTaskSharing(orig)
	if !proto.Equal(c, want) {
		t.Fatalf("CloneTaskSharing missed a field:\n got  %v\n want %v", c, want)
	}
	changeScalars(c.ProtoReflect())
	changeScalars(c.Conversation.ProtoReflect())
	for k, b := range c.Conversation.Backends {
		b = CloneBackendConversation(b)
		change(b.ProtoReflect())
		c.Conversation.Backends = BackendsWith(c.Conversation.Backends, k, b)
	}
	c.Conversation.Backends = BackendsWith(c.Conversation.Backends, "added", &BackendConversation{})
	for k := range orig.Conversation.Backends {
		c.Conversation.Backends = BackendsWithout(c.Conversation.Backends, k)
		break
	}
	c.Conversation.Messages[0] = nil
	c.Conversation.Messages = append(c.Conversation.Messages, &Message{Content: "new"})
	if !proto.Equal(orig, want) {
		t.Fatalf("changing the copy's own parts changed the original:\n got  %v\n want %v", orig, want)
	}
	if CloneTaskSharing(nil) != nil {
		t.Fatal("CloneTaskSharing(nil) is not nil")
	}
}

// CloneTaskRouting keeps every field but the context and the
// conversation's contents (its backend stays), and shares nothing.
func TestCloneTaskRouting(t *testing.T) {
	orig := &Task{}
	fill(orig.ProtoReflect(), 1)
	want := proto.Clone(orig).(*Task)
	want.Context = nil
	want.Conversation = &ConversationState{Llm: orig.Conversation.Llm}
	c := CloneTaskRouting(orig)
	if !proto.Equal(c, want) {
		t.Fatalf("CloneTaskRouting:\n got  %v\n want %v", c, want)
	}
	before := proto.Clone(orig)
	change(c.ProtoReflect())
	if !proto.Equal(orig, before) {
		t.Fatal("changing the routing copy changed the original")
	}
}
