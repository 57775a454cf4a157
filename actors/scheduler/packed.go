package scheduler

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"fano/pb"
)

// A task that completed went to the archive whole with its completion
// (TaskCompleted.archived): what stays in memory is a light copy that
// lists, counts and duplicate checks read. As a *pb.Task that copy costs
// about 450 bytes (the message and its conversation stub); encoded, about
// 130. Most tasks in memory after a while are such, and nothing changes
// them, so they are kept encoded and decoded on the rare read.

// packable reports whether en's task can be kept encoded: completed,
// archived, in no heap and not picked.
func packable(en *entry) bool {
	t := en.t
	return t != nil && t.State == pb.TaskState_TASK_STATE_COMPLETED && t.Archived &&
		en.h == nil && en.sidx < 0 && !en.picked
}

// pack keeps en's task encoded when it can; otherwise it leaves it as is.
func (s *State) pack(en *entry) {
	if !packable(en) {
		return
	}
	data, err := pb.MarshalTask(en.t) // the generated code: no reflection
	if err != nil {
		return // it stays decoded: costs memory, changes nothing
	}
	en.packed, en.finished, en.t, en.shared = data, finishedAt(en.t), nil, false
}

// view is en's task for reading: en.t itself, or a decoded copy of a
// packed one, which the caller may keep (changing it changes nothing).
func (en *entry) view() *pb.Task {
	if en.t != nil {
		return en.t
	}
	return en.viewInto(&pb.Task{})
}

// viewInto is view decoding a packed task into scratch (reset first):
// a scan over many tasks allocates one task, not one each.
func (en *entry) viewInto(scratch *pb.Task) *pb.Task {
	if en.t != nil {
		return en.t
	}
	proto.Reset(scratch)
	if err := proto.Unmarshal(en.packed, scratch); err != nil {
		panic(fmt.Errorf("scheduler: decode a task it encoded itself: %w", err)) // only a bug gets here
	}
	return scratch
}

// clone is a copy of en's task, its priority as stored.
func (en *entry) clone() *pb.Task {
	if en.t == nil {
		return en.view()
	}
	return pb.CloneTask(en.t)
}

// unpack makes en's task a *pb.Task again: an event is about to change it.
func (en *entry) unpack() {
	if en.t == nil {
		en.t = en.view()
		en.packed = nil
	}
}

// state is en's task state, without decoding a packed task.
func (en *entry) state() pb.TaskState {
	if en.t == nil {
		return pb.TaskState_TASK_STATE_COMPLETED
	}
	return en.t.State
}

// finishedAt is when en's finished task finished (see finishedAt).
func (en *entry) finishedAt() int64 {
	if en.t == nil {
		return en.finished
	}
	return finishedAt(en.t)
}

// The fields of pb.Task that packedHead reads.
const (
	taskModuleField      protowire.Number = 2
	taskCompletedAtField protowire.Number = 12
)

// packedHead reads a packed task's module and completed_at from its
// encoding without decoding the rest: a forgetting pass needs only these
// of a task it drops, and decoding each cost more than the rest of the
// pass. module aliases the encoding. A field given twice counts as
// proto.Unmarshal counts it: the last one.
func packedHead(b []byte) (module []byte, completedAt int64, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, 0, protowire.ParseError(n)
		}
		b = b[n:]
		switch {
		case num == taskModuleField && typ == protowire.BytesType:
			module, n = protowire.ConsumeBytes(b)
		case num == taskCompletedAtField && typ == protowire.VarintType:
			var v uint64
			v, n = protowire.ConsumeVarint(b)
			completedAt = int64(v)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return nil, 0, protowire.ParseError(n)
		}
		b = b[n:]
	}
	return module, completedAt, nil
}

// head is en's task's module and completed_at, read from its encoding if
// it is packed.
func (en *entry) head() (module string, completedAt int64) {
	if en.t != nil {
		return en.t.Module, en.t.CompletedAt
	}
	m, at, err := packedHead(en.packed)
	if err != nil {
		panic(fmt.Errorf("scheduler: read a task it encoded itself: %w", err)) // only a bug gets here
	}
	return string(m), at
}
