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
func CopyTask(dst, src *Task) {
	*dst = Task{
		Id:                 src.Id,
		Module:             src.Module,
		TaskType:           src.TaskType,
		Subject:            src.Subject,
		Priority:           src.Priority,
		State:              src.State,
		Context:            maps.Clone(src.Context),
		Conversation:       cloneConversation(src.Conversation),
		CreatedAt:          src.CreatedAt,
		UpdatedAt:          src.UpdatedAt,
		StartedAt:          src.StartedAt,
		CompletedAt:        src.CompletedAt,
		LlmPreference:      src.LlmPreference,
		LlmAssigned:        src.LlmAssigned,
		RequestCount:       src.RequestCount,
		MaxRequests:        src.MaxRequests,
		RequiresDeepMode:   src.RequiresDeepMode,
		LlmExclude:         slices.Clone(src.LlmExclude),
		Attempts:           src.Attempts,
		NotBefore:          src.NotBefore,
		Error:              src.Error,
		PauseReason:        src.PauseReason,
		MessageLimit:       src.MessageLimit,
		BasePriority:       src.BasePriority,
		ValidationAttempts: src.ValidationAttempts,
		AvoidLlm:           src.AvoidLlm,
		Archived:           src.Archived,
		unknownFields:      slices.Clone(src.unknownFields),
	}
}

func cloneConversation(c *ConversationState) *ConversationState {
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
			out.Messages[i] = cloneMessage(m)
		}
	}
	if c.Backends != nil {
		out.Backends = make(map[string]*BackendConversation, len(c.Backends))
		for k, b := range c.Backends {
			out.Backends[k] = cloneBackendConversation(b)
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

func cloneBackendConversation(b *BackendConversation) *BackendConversation {
	if b == nil {
		return nil
	}
	return &BackendConversation{Url: b.Url, Answers: b.Answers, InterruptedPrompt: b.InterruptedPrompt,
		unknownFields: slices.Clone(b.unknownFields)}
}
