package pb

import (
	"maps"
	"slices"
)

// The scheduler hands out a copy of a task several times in each task's
// life (to start its executor, after each answer, to archive it); with
// proto.Clone, which walks the message by reflection, that was about a
// tenth of fano's CPU per task. These copy field by field. A field added
// to one of these messages must be added here too: TestCloneTaskCopiesEveryField
// fills every field the descriptors list and fails on one a copy misses.

// CloneTask returns a deep copy of t (nil for nil): changing the copy
// never changes t.
func CloneTask(t *Task) *Task {
	if t == nil {
		return nil
	}
	c := &Task{}
	CopyTask(c, t)
	return c
}

// CopyTask makes dst a deep copy of src, as proto.Reset then proto.Merge
// would, without reflection. src must not be nil.
func CopyTask(dst, src *Task) { copyTask(dst, src, deepCopy) }

// CopyTaskSharing makes dst a copy of src that shares with it what
// CloneTaskSharing shares. src must not be nil.
func CopyTaskSharing(dst, src *Task) { copyTask(dst, src, sharingCopy) }

// CloneTaskSharing returns a copy of t that shares with it what is never
// changed in place once a task holds it: the context map, llm_exclude,
// the conversation's Message values (a task's events append, truncate and
// drop messages, never edit one) and its map of per-backend records
// (events replace it: BackendsWith, BackendsWithout). Its own are the
// task's fields and the conversation. For the scheduler's copy-on-write;
// nil for nil.
func CloneTaskSharing(t *Task) *Task {
	if t == nil {
		return nil
	}
	c := &Task{}
	copyTask(c, t, sharingCopy)
	return c
}

// CloneTaskRouting returns what a backend is chosen by: a deep copy of t
// without its context, whose conversation holds only the backend it
// lives on. nil for nil.
func CloneTaskRouting(t *Task) *Task {
	if t == nil {
		return nil
	}
	c := &Task{}
	copyTask(c, t, routingCopy)
	return c
}

type copyMode int

const (
	deepCopy copyMode = iota
	sharingCopy
	routingCopy
)

func copyTask(dst, src *Task, mode copyMode) {
	*dst = Task{
		Id:                 src.Id,
		Module:             src.Module,
		TaskType:           src.TaskType,
		Subject:            src.Subject,
		Priority:           src.Priority,
		State:              src.State,
		CreatedAt:          src.CreatedAt,
		UpdatedAt:          src.UpdatedAt,
		StartedAt:          src.StartedAt,
		CompletedAt:        src.CompletedAt,
		LlmPreference:      src.LlmPreference,
		LlmAssigned:        src.LlmAssigned,
		RequestCount:       src.RequestCount,
		MaxRequests:        src.MaxRequests,
		RequiresDeepMode:   src.RequiresDeepMode,
		Attempts:           src.Attempts,
		NotBefore:          src.NotBefore,
		Error:              src.Error,
		PauseReason:        src.PauseReason,
		MessageLimit:       src.MessageLimit,
		BasePriority:       src.BasePriority,
		ValidationAttempts: src.ValidationAttempts,
		AvoidLlm:           src.AvoidLlm,
		RequestTimeoutMs:   src.RequestTimeoutMs,
		Archived:           src.Archived,
		unknownFields:      slices.Clone(src.unknownFields),
	}
	switch mode {
	case deepCopy:
		dst.Context = maps.Clone(src.Context)
		dst.LlmExclude = slices.Clone(src.LlmExclude)
		dst.Conversation = cloneConversation(src.Conversation, true)
	case sharingCopy:
		dst.Context = src.Context
		dst.LlmExclude = src.LlmExclude
		dst.Conversation = cloneConversation(src.Conversation, false)
	case routingCopy:
		dst.LlmExclude = slices.Clone(src.LlmExclude)
		if c := src.Conversation; c != nil {
			dst.Conversation = &ConversationState{Llm: c.Llm}
		}
	}
}

// cloneConversation copies c; its Message values too when deep.
func cloneConversation(c *ConversationState, deep bool) *ConversationState {
	if c == nil {
		return nil
	}
	out := &ConversationState{
		Llm:              c.Llm,
		TurnCount:        c.TurnCount,
		Url:              c.Url,
		AwaitingResponse: c.AwaitingResponse,
		unknownFields:    slices.Clone(c.unknownFields),
	}
	if c.Messages != nil {
		out.Messages = make([]*Message, len(c.Messages))
		for i, m := range c.Messages {
			if deep {
				m = cloneMessage(m)
			}
			out.Messages[i] = m
		}
	}
	out.Backends = c.Backends
	if deep && c.Backends != nil {
		out.Backends = make(map[string]*BackendConversation, len(c.Backends))
		for k, b := range c.Backends {
			out.Backends[k] = CloneBackendConversation(b)
		}
	}
	return out
}

func cloneMessage(m *Message) *Message {
	if m == nil {
		return nil
	}
	return &Message{Role: m.Role, Content: m.Content, At: m.At, Llm: m.Llm, unknownFields: slices.Clone(m.unknownFields)}
}

// CloneBackendConversation returns a copy of b (nil for nil).
func CloneBackendConversation(b *BackendConversation) *BackendConversation {
	if b == nil {
		return nil
	}
	return &BackendConversation{Url: b.Url, Answers: b.Answers, InterruptedPrompt: b.InterruptedPrompt,
		unknownFields: slices.Clone(b.unknownFields)}
}

// BackendsWith returns a copy of m with llm's record set to b. A task's
// map of per-backend records is shared by its copies (CloneTaskSharing):
// a change makes a new map and a new record, never edits either.
func BackendsWith(m map[string]*BackendConversation, llm string, b *BackendConversation) map[string]*BackendConversation {
	out := make(map[string]*BackendConversation, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	out[llm] = b
	return out
}

// BackendsWithout returns a copy of m without llm's record (see
// BackendsWith).
func BackendsWithout(m map[string]*BackendConversation, llm string) map[string]*BackendConversation {
	out := make(map[string]*BackendConversation, len(m))
	for k, v := range m {
		if k != llm {
			out[k] = v
		}
	}
	return out
}
