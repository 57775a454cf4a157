package scheduler

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"fano/pb"
)

// TaskID returns the task an event is about, and false for an event that is
// not a task event.
func TaskID(e *pb.Event) (string, bool) {
	switch b := e.GetBody().(type) {
	case *pb.Event_TaskSubmitted:
		return b.TaskSubmitted.GetTask().GetId(), true
	case *pb.Event_TaskStarted:
		return b.TaskStarted.GetTaskId(), true
	case *pb.Event_LlmRequestStarted:
		return b.LlmRequestStarted.GetTaskId(), true
	case *pb.Event_LlmResponseReceived:
		return b.LlmResponseReceived.GetTaskId(), true
	case *pb.Event_LlmRequestFailed:
		return b.LlmRequestFailed.GetTaskId(), true
	case *pb.Event_TaskPaused:
		return b.TaskPaused.GetTaskId(), true
	case *pb.Event_TaskResumed:
		return b.TaskResumed.GetTaskId(), true
	case *pb.Event_TaskCompleted:
		return b.TaskCompleted.GetTaskId(), true
	case *pb.Event_TaskFailed:
		return b.TaskFailed.GetTaskId(), true
	case *pb.Event_TaskCancelled:
		return b.TaskCancelled.GetTaskId(), true
	case *pb.Event_TaskRetryScheduled:
		return b.TaskRetryScheduled.GetTaskId(), true
	case *pb.Event_TaskRequeued:
		return b.TaskRequeued.GetTaskId(), true
	case *pb.Event_TaskForgotten:
		return b.TaskForgotten.GetTaskId(), true
	case *pb.Event_LlmConversationAddressed:
		return b.LlmConversationAddressed.GetTaskId(), true
	}
	return "", false
}

// eventName is the event's body field name, e.g. "task_started".
func eventName(e *pb.Event) string {
	if e == nil || e.Body == nil {
		return "empty event"
	}
	if od := e.ProtoReflect().Descriptor().Oneofs().ByName("body"); od != nil {
		if fd := e.ProtoReflect().WhichOneof(od); fd != nil {
			return string(fd.Name())
		}
	}
	return fmt.Sprintf("%T", e.Body)
}

// ErrNotTaskEvent: the event is not one of the task events.
var ErrNotTaskEvent = errors.New("not a task event")

// ApplyToTask applies a task event to t: the task-level rules shared by the
// scheduler and the executor (which keeps its own copy of its task).
// messageLimit bounds the conversation when t.message_limit is 0. It uses
// e.At, never a clock. On error t is unchanged. TaskSubmitted replaces t's
// contents with the submitted task (sharing what pb.CloneTaskSharing
// shares); TaskForgotten leaves t as it is.
func ApplyToTask(t *pb.Task, e *pb.Event, messageLimit int) error {
	if t == nil {
		return errors.New("scheduler: apply to a nil task")
	}
	id, ok := TaskID(e)
	if !ok {
		return fmt.Errorf("scheduler: apply %s to task %q: %w", eventName(e), t.GetId(), ErrNotTaskEvent)
	}
	if id == "" {
		return fmt.Errorf("scheduler: %s without a task id", eventName(e))
	}
	if sub, isSub := e.Body.(*pb.Event_TaskSubmitted); isSub {
		if t.Id != "" && t.Id != id {
			return fmt.Errorf("scheduler: %s for task %q applied to task %q", eventName(e), id, t.Id)
		}
		if st := sub.TaskSubmitted.GetTask(); st != nil {
			// The event's task is never changed once decided, and what
			// the copy shares with it (the context map, llm_exclude) no
			// event changes in place: one deep copy a task fewer.
			pb.CopyTaskSharing(t, st)
		} else {
			proto.Reset(t)
		}
		if t.State == pb.TaskState_TASK_STATE_UNSPECIFIED {
			t.State = pb.TaskState_TASK_STATE_PENDING
		}
		if t.CreatedAt == 0 {
			t.CreatedAt = e.At
		}
		t.UpdatedAt = e.At
		return nil
	}
	if id != t.Id {
		return fmt.Errorf("scheduler: %s for task %q applied to task %q", eventName(e), id, t.Id)
	}

	limit := int(t.MessageLimit)
	if limit <= 0 {
		limit = messageLimit
	}
	switch b := e.Body.(type) {
	case *pb.Event_TaskStarted:
		t.State = pb.TaskState_TASK_STATE_RUNNING
		t.LlmAssigned = b.TaskStarted.Llm
		if t.StartedAt == 0 {
			t.StartedAt = e.At
		}
		conv(t).Llm = b.TaskStarted.Llm
		t.PauseReason = ""
	case *pb.Event_LlmRequestStarted:
		r := b.LlmRequestStarted
		c := conv(t)
		n := len(c.Messages)
		// A resend of the unanswered request does not repeat the message.
		if !(r.Resend && c.AwaitingResponse && n > 0 && c.Messages[n-1].Role == "user" && c.Messages[n-1].Content == r.Prompt) {
			c.Messages = append(c.Messages, &pb.Message{Role: "user", Content: r.Prompt, At: e.At})
			truncate(c, limit)
		}
		c.AwaitingResponse = true
		t.RequestCount++
	case *pb.Event_LlmResponseReceived:
		r := b.LlmResponseReceived
		c := conv(t)
		c.Messages = append(c.Messages, &pb.Message{Role: "assistant", Content: r.Content, At: e.At, Llm: r.Llm})
		truncate(c, limit)
		c.TurnCount++
		c.AwaitingResponse = false
		// Retries count consecutive failures of one request: an answer
		// ends the run of failures and the backend proved itself.
		t.Attempts = 0
		t.AvoidLlm = ""
		if r.ConversationUrl != "" {
			c.Url = r.ConversationUrl
		}
		answeredOn(c, r)
	case *pb.Event_LlmConversationAddressed:
		addressedOn(conv(t), b.LlmConversationAddressed)
	case *pb.Event_LlmRequestFailed:
		if b.LlmRequestFailed.NotSent && t.RequestCount > 0 {
			t.RequestCount-- // it never left: not a request
		}
		if c := t.Conversation; c != nil {
			failedOn(c, b.LlmRequestFailed)
			if n := len(c.Messages); c.AwaitingResponse && n > 0 && c.Messages[n-1].Role == "user" {
				c.Messages[n-1] = nil
				c.Messages = c.Messages[:n-1]
			}
			c.AwaitingResponse = false
		}
	case *pb.Event_TaskPaused:
		t.State = pb.TaskState_TASK_STATE_PAUSED
		t.PauseReason = b.TaskPaused.Reason
		t.NotBefore = b.TaskPaused.NotBefore
		t.AvoidLlm = b.TaskPaused.AvoidLlm
	case *pb.Event_TaskResumed:
		t.State = pb.TaskState_TASK_STATE_PENDING
		t.PauseReason = ""
	case *pb.Event_TaskRequeued:
		if t.State == pb.TaskState_TASK_STATE_FAILED {
			// `fano retry`: a failed task starts its budgets afresh.
			t.Attempts, t.ValidationAttempts, t.Error, t.AvoidLlm = 0, 0, "", ""
		}
		t.State = pb.TaskState_TASK_STATE_PENDING
		t.PauseReason = ""
	case *pb.Event_TaskCompleted:
		t.State = pb.TaskState_TASK_STATE_COMPLETED
		t.CompletedAt = e.At
		if b.TaskCompleted.Archived {
			// The whole task went to the archive with this event: what is
			// left in memory is what lists, counts and dedup read (the
			// conversation's messages and the module's context are read
			// back from the archive).
			t.Archived = true
			t.Context = nil
			if c := t.Conversation; c != nil {
				t.Conversation = &pb.ConversationState{Llm: c.Llm, TurnCount: c.TurnCount}
			}
		}
	case *pb.Event_TaskFailed:
		t.State = pb.TaskState_TASK_STATE_FAILED
		t.Error = b.TaskFailed.Error
	case *pb.Event_TaskCancelled:
		t.State = pb.TaskState_TASK_STATE_CANCELLED
		if b.TaskCancelled.Reason != "" {
			t.Error = "cancelled: " + b.TaskCancelled.Reason
		}
	case *pb.Event_TaskRetryScheduled:
		r := b.TaskRetryScheduled
		t.State = pb.TaskState_TASK_STATE_PENDING
		if r.Validation {
			t.ValidationAttempts++
		} else {
			t.Attempts++
		}
		t.AvoidLlm = r.AvoidLlm
		t.NotBefore = r.NotBefore
		t.Error = r.Error
		t.PauseReason = ""
	case *pb.Event_TaskForgotten:
		return nil // the collection drops the task
	}
	t.UpdatedAt = e.At
	return nil
}

func conv(t *pb.Task) *pb.ConversationState {
	if t.Conversation == nil {
		t.Conversation = &pb.ConversationState{Llm: t.LlmAssigned}
	}
	return t.Conversation
}

// answeredOn records an answer in the answering backend's own web
// conversation: a new URL is a new conversation (its first answer), the
// same URL one more answer.
func answeredOn(c *pb.ConversationState, r *pb.LLMResponseReceived) {
	if r.ConversationUrl == "" || r.Llm == "" {
		return
	}
	// A new record in a new map: copies of the task share both.
	bc := &pb.BackendConversation{Url: r.ConversationUrl}
	if old := c.Backends[r.Llm]; old != nil && old.Url == r.ConversationUrl {
		bc = pb.CloneBackendConversation(old)
	}
	bc.Answers++
	bc.InterruptedPrompt = ""
	c.Backends = pb.BackendsWith(c.Backends, r.Llm, bc)
}

// addressedOn records the address a site gave a new conversation while
// its first answer was still coming: the task's conversation on that
// backend, with no answer in it yet. The answer, recorded later with the
// same address, counts as its first (answeredOn).
func addressedOn(c *pb.ConversationState, r *pb.LLMConversationAddressed) {
	if r.Url == "" || r.Llm == "" {
		return
	}
	if old := c.Backends[r.Llm]; old != nil && old.Url == r.Url {
		return
	}
	c.Backends = pb.BackendsWith(c.Backends, r.Llm, &pb.BackendConversation{Url: r.Url})
}

// failedOn forgets a backend's conversation that is gone, and remembers
// the prompt a stop interrupted, so that asking it again reads the page
// first (in a new map, as answeredOn). Called before the unanswered
// prompt is dropped.
func failedOn(c *pb.ConversationState, r *pb.LLMRequestFailed) {
	bc := c.Backends[r.Llm]
	if bc == nil {
		if r.Kind == "conversation_gone" {
			// Recorded before conversations were kept per backend: the
			// task's one URL is the one that is gone.
			c.Url = ""
		}
		return
	}
	switch r.Kind {
	case "conversation_gone":
		c.Backends = pb.BackendsWithout(c.Backends, r.Llm)
		if c.Url == bc.Url {
			c.Url = ""
		}
	case "interrupted", "cancelled", "hung":
		// The site may have answered (fano stopped, the browser died):
		// asking again reads the page first. A stalled answer that was
		// stopped came back as content, not as this failure.
		if n := len(c.Messages); c.AwaitingResponse && n > 0 && c.Messages[n-1].Role == "user" {
			bc = pb.CloneBackendConversation(bc)
			bc.InterruptedPrompt = c.Messages[n-1].Content
			c.Backends = pb.BackendsWith(c.Backends, r.Llm, bc)
		}
	}
}

// truncate keeps the newest limit messages (limit <= 0: all).
func truncate(c *pb.ConversationState, limit int) {
	if limit <= 0 || len(c.Messages) <= limit {
		return
	}
	drop := len(c.Messages) - limit
	kept := make([]*pb.Message, limit)
	copy(kept, c.Messages[drop:])
	c.Messages = kept
}

// staleResume reports a TaskResumed decided from a state that a later
// event changed before it was applied: a tick reads the state while
// earlier decisions are still being written, so a resume decided after an
// immediate pause can land after a second pause that set a later
// not_before (the stuck-task follow-up) or after the task moved on. Such a
// resume changes nothing; the decision is made again on the next tick.
func staleResume(t *pb.Task, e *pb.Event) bool {
	if _, ok := e.Body.(*pb.Event_TaskResumed); !ok {
		return false
	}
	return t.State != pb.TaskState_TASK_STATE_PAUSED || t.NotBefore > e.At || t.PauseReason == PauseOperator
}

// requeues are the events that put a task back in the queue afresh.
func requeues(e *pb.Event) bool {
	switch e.Body.(type) {
	case *pb.Event_TaskSubmitted, *pb.Event_TaskResumed, *pb.Event_TaskRequeued, *pb.Event_TaskRetryScheduled:
		return true
	}
	return false
}

// Apply applies a task event: the only code that changes the scheduler's
// state. It runs live and on replay and uses e.At, never a clock. A
// TaskSubmitted for a known or forgotten id is ignored (idempotent). An event
// for a task not in memory is an *UnknownTaskError and changes nothing; a
// non-task event is an error wrapping ErrNotTaskEvent.
func (s *State) Apply(e *pb.Event) error {
	id, ok := TaskID(e)
	if !ok {
		return fmt.Errorf("scheduler: apply %s: %w", eventName(e), ErrNotTaskEvent)
	}
	if id == "" {
		return fmt.Errorf("scheduler: apply %s: no task id", eventName(e))
	}
	if sub, isSub := e.Body.(*pb.Event_TaskSubmitted); isSub {
		return s.applySubmitted(id, sub.TaskSubmitted.Task, e)
	}
	if f, forget := e.Body.(*pb.Event_TaskForgotten); forget {
		return s.applyForgotten(f.TaskForgotten, e)
	}
	en, ok := s.tasks[id]
	if !ok {
		return &UnknownTaskError{TaskID: id, Event: eventName(e)}
	}
	en.unpack()
	defer s.pack(en) // completed and archived by this event, or still
	if staleResume(en.t, e) {
		return nil
	}
	s.own(en)
	old := en.t.State
	if err := ApplyToTask(en.t, e, s.cfg.MessageLimit); err != nil {
		return err
	}
	s.advance(e.At)
	st := en.t.State
	if st != old {
		s.track(en, old, -1)
		s.track(en, st, +1)
	}
	if _, started := e.Body.(*pb.Event_TaskStarted); started {
		s.recordStart(en.t.Module, e.At)
	}
	fresh := requeues(e) || st != old
	if fresh || st != pb.TaskState_TASK_STATE_PENDING {
		en.picked = false
	}
	// Take it out of its heap (its keys may have changed) and put it back
	// where its new state says.
	if fresh || en.h != nil {
		s.q.detach(en)
		if st == pb.TaskState_TASK_STATE_PENDING && !en.picked {
			s.place(en, e.At)
		}
	}
	if IsFinished(st) && !IsFinished(old) {
		// Its last priority stays as it was when it finished.
		s.setPriority(en, s.priorityAt(en.t, s.at))
	}
	return nil
}

func (s *State) applySubmitted(id string, t *pb.Task, e *pb.Event) error {
	delete(s.decided, id)
	if t == nil {
		return fmt.Errorf("scheduler: apply task_submitted %q: no task", id)
	}
	if _, ok := s.tasks[id]; ok {
		return nil
	}
	if s.isForgotten(id) {
		return nil
	}
	nt := &pb.Task{}
	if err := ApplyToTask(nt, e, s.cfg.MessageLimit); err != nil {
		return err
	}
	if nt.MessageLimit <= 0 {
		nt.MessageLimit = int32(s.cfg.MessageLimit)
	}
	s.advance(e.At)
	s.insert(nt, e.At)
	return nil
}

// insert adds a task to memory and, when PENDING, to the queue.
func (s *State) insert(t *pb.Task, now int64) *entry {
	en := &entry{t: t, idx: -1, sidx: -1}
	s.tasks[t.Id] = en
	s.track(en, t.State, +1)
	if t.State == pb.TaskState_TASK_STATE_PENDING {
		s.place(en, now)
	}
	s.pack(en) // restored from a snapshot completed and archived
	return en
}

// applyForgotten takes finished tasks out of memory. The first id must be
// a finished task in memory (else *UnknownTaskError and nothing changes);
// the others are skipped where they are not (already gone: idempotent).
func (s *State) applyForgotten(f *pb.TaskForgotten, e *pb.Event) error {
	first, ok := s.tasks[f.GetTaskId()]
	if !ok {
		return &UnknownTaskError{TaskID: f.GetTaskId(), Event: eventName(e)}
	}
	if !IsFinished(first.state()) {
		return fmt.Errorf("scheduler: apply %s: task %q is %s, not finished", eventName(e), f.GetTaskId(), stateName(first.state()))
	}
	s.forget(f.GetTaskId(), first)
	for _, id := range f.GetMoreTaskIds() {
		if en, ok := s.tasks[id]; ok && IsFinished(en.state()) {
			s.forget(id, en)
		}
	}
	return nil
}

func (s *State) forget(id string, en *entry) {
	var module string
	st := en.state()
	if en.t == nil {
		// Packed: completed, in no heap, counted only as finished; what
		// else forgetting needs is read from its encoding.
		module, _ = en.head()
		s.count(module, st, -1)
	} else {
		module = en.t.Module
		s.q.detach(en)
		s.track(en, st, -1)
	}
	delete(s.tasks, id)
	s.forgotten.add(forgottenHash(id))
	c := s.forgottenCounts[module]
	if c == nil {
		c = map[pb.TaskState]int{}
		s.forgottenCounts[module] = c
	}
	c[st]++
}

// track counts en in (delta +1) or out of (-1) state st.
func (s *State) track(en *entry, st pb.TaskState, delta int) {
	s.count(en.t.Module, st, delta)
	id := en.t.Id
	if !IsFinished(st) {
		if p := en.t.LlmPreference; p != "" {
			k := quotaKey{p, en.t.RequiresDeepMode}
			if s.prefOpen[k] += delta; s.prefOpen[k] == 0 {
				delete(s.prefOpen, k)
			}
		}
	}
	switch st {
	case pb.TaskState_TASK_STATE_RUNNING:
		if delta > 0 {
			s.running[id] = en
		} else {
			delete(s.running, id)
		}
	case pb.TaskState_TASK_STATE_PAUSED:
		if delta > 0 {
			s.paused[id] = en
		} else {
			delete(s.paused, id)
		}
	}
}

// count counts a task of module m in (delta +1) or out of (-1) state st:
// the per-module counts and the pending and finished totals.
func (s *State) count(m string, st pb.TaskState, delta int) {
	c := s.counts[m]
	if c == nil {
		c = map[pb.TaskState]int{}
		s.counts[m] = c
	}
	c[st] += delta
	if c[st] == 0 {
		delete(c, st)
		if len(c) == 0 {
			delete(s.counts, m)
		}
	}
	if isPendingState(st) {
		s.pending += delta
	}
	if IsFinished(st) {
		s.finished += delta
	}
}

// recordStart notes a start for module balance and drops the starts older
// than ShareWindow before at (deterministic on replay). Starts of a module
// within one second share an entry: an hour of a million starts is a few
// thousand entries, for memory, snapshots and Recompute's walk.
func (s *State) recordStart(module string, at int64) {
	// Starts arrive in event order, so the old ones are at the front; the
	// rare start logged with an earlier time than its predecessor only
	// stays a little longer. Amortized O(1).
	cutoff := at - int64(s.cfg.ShareWindow)
	drop := 0
	for drop < len(s.starts) && s.starts[drop].at < cutoff {
		drop++
	}
	if drop > 0 {
		clear(s.starts[:drop])
		s.starts = s.starts[drop:]
	}
	sec := at / int64(time.Second)
	for i := len(s.starts) - 1; i >= 0 && s.starts[i].at/int64(time.Second) == sec; i-- {
		if st := &s.starts[i]; st.module == module && st.at <= at {
			st.n++
			return
		}
	}
	s.starts = append(s.starts, moduleStart{module: module, at: at, n: 1})
}
