package control

import (
	"container/list"
	"time"

	"fano/pb"
)

// Step is one line of a task's timeline: a run started, a request sent
// and its answer or failure, a retry scheduled, the end.
type Step struct {
	At   time.Time `json:"at"`
	Kind string    `json:"kind"` // started, request, answer, request_failed, retry_scheduled, paused, requeued, resumed, completed, failed, cancelled
	LLM  string    `json:"llm,omitempty"`
	Turn int32     `json:"turn,omitempty"` // 1-based for requests and answers
	// Attempt is the run this step belongs to (1 for the first start).
	Attempt    int     `json:"attempt,omitempty"`
	DurationMS float64 `json:"duration_ms,omitempty"` // an answer's time since its request
	Bytes      int     `json:"bytes,omitempty"`       // prompt or answer size
	Error      string  `json:"error,omitempty"`
	Reason     string  `json:"reason,omitempty"`
}

// Timeline limits: the tasks remembered and the steps per task.
const (
	timelineTasks = 1000
	timelineSteps = 100
)

// timelines keeps the recent tasks' steps, least recently touched
// forgotten first. Plain data, not safe for concurrent use.
type timelines struct {
	byTask map[string]*list.Element
	order  *list.List // of *taskTimeline, most recent at the front
}

type taskTimeline struct {
	id      string
	attempt int
	steps   []Step
	dropped int
}

func newTimelines() *timelines {
	return &timelines{byTask: map[string]*list.Element{}, order: list.New()}
}

func (t *timelines) of(id string) *taskTimeline {
	if el, ok := t.byTask[id]; ok {
		t.order.MoveToFront(el)
		return el.Value.(*taskTimeline)
	}
	tl := &taskTimeline{id: id}
	t.byTask[id] = t.order.PushFront(tl)
	for t.order.Len() > timelineTasks {
		last := t.order.Back()
		delete(t.byTask, last.Value.(*taskTimeline).id)
		t.order.Remove(last)
	}
	return tl
}

func (tl *taskTimeline) add(s Step) {
	if s.Attempt == 0 {
		s.Attempt = tl.attempt
	}
	if len(tl.steps) >= timelineSteps {
		// Keep the first steps (how it began) and the latest.
		tl.steps = append(tl.steps[:timelineSteps/4], tl.steps[timelineSteps/4+1:]...)
		tl.dropped++
	}
	tl.steps = append(tl.steps, s)
}

// observe adds an applied event to its task's timeline.
func (t *timelines) observe(e *pb.Event) {
	at := time.Unix(0, e.GetAt()).UTC()
	switch b := e.GetBody().(type) {
	case *pb.Event_TaskStarted:
		tl := t.of(b.TaskStarted.GetTaskId())
		tl.attempt++
		tl.add(Step{At: at, Kind: "started", LLM: b.TaskStarted.GetLlm()})
	case *pb.Event_LlmRequestStarted:
		r := b.LlmRequestStarted
		t.of(r.GetTaskId()).add(Step{At: at, Kind: "request", LLM: r.GetLlm(), Turn: r.GetTurn() + 1, Bytes: len(r.GetPrompt())})
	case *pb.Event_LlmResponseReceived:
		r := b.LlmResponseReceived
		t.of(r.GetTaskId()).add(Step{At: at, Kind: "answer", LLM: r.GetLlm(), Turn: r.GetTurn() + 1,
			DurationMS: float64(r.GetDurationNs()) / 1e6, Bytes: len(r.GetContent())})
	case *pb.Event_LlmRequestFailed:
		r := b.LlmRequestFailed
		t.of(r.GetTaskId()).add(Step{At: at, Kind: "request_failed", LLM: r.GetLlm(), Turn: r.GetTurn() + 1,
			Reason: r.GetKind(), Error: clip(r.GetError())})
	case *pb.Event_TaskRetryScheduled:
		r := b.TaskRetryScheduled
		t.of(r.GetTaskId()).add(Step{At: at, Kind: "retry_scheduled", Error: clip(r.GetError()), LLM: r.GetAvoidLlm()})
	case *pb.Event_TaskPaused:
		t.of(b.TaskPaused.GetTaskId()).add(Step{At: at, Kind: "paused", Reason: b.TaskPaused.GetReason()})
	case *pb.Event_TaskRequeued:
		t.of(b.TaskRequeued.GetTaskId()).add(Step{At: at, Kind: "requeued", Reason: b.TaskRequeued.GetReason()})
	case *pb.Event_TaskResumed:
		t.of(b.TaskResumed.GetTaskId()).add(Step{At: at, Kind: "resumed"})
	case *pb.Event_TaskCompleted:
		t.of(b.TaskCompleted.GetTaskId()).add(Step{At: at, Kind: "completed"})
	case *pb.Event_TaskFailed:
		t.of(b.TaskFailed.GetTaskId()).add(Step{At: at, Kind: "failed", Error: clip(b.TaskFailed.GetError())})
	case *pb.Event_TaskCancelled:
		t.of(b.TaskCancelled.GetTaskId()).add(Step{At: at, Kind: "cancelled", Reason: b.TaskCancelled.GetReason()})
	case *pb.Event_TaskForgotten:
		for _, id := range b.TaskForgotten.IDs() {
			if el, ok := t.byTask[id]; ok {
				delete(t.byTask, id)
				t.order.Remove(el)
			}
		}
	}
}

// steps returns a copy of a task's timeline (nil if none is kept) and how
// many steps in its middle were dropped.
func (t *timelines) steps(id string) ([]Step, int) {
	el, ok := t.byTask[id]
	if !ok {
		return nil, 0
	}
	tl := el.Value.(*taskTimeline)
	return append([]Step(nil), tl.steps...), tl.dropped
}
