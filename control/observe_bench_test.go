package control

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"fano/actors"
	"fano/pb"
)

// benchEvents is a run's usual mix: a task started, a request and its
// answer, quota, the task completed.
func benchEvents(n int) []*pb.Event {
	out := make([]*pb.Event, 0, n)
	base := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for i := 0; len(out) < n; i++ {
		id := fmt.Sprintf("explorer/exploration/t%06d", i%5000)
		at := base.Add(time.Duration(i) * time.Second).UnixNano()
		out = append(out,
			&pb.Event{At: at, Body: &pb.Event_TaskStarted{TaskStarted: &pb.TaskStarted{TaskId: id, Llm: "gpt"}}},
			&pb.Event{At: at, Body: &pb.Event_LlmRequestStarted{LlmRequestStarted: &pb.LLMRequestStarted{TaskId: id, Llm: "gpt", Prompt: "a question of some length"}}},
			&pb.Event{At: at, Body: &pb.Event_QuotaUsed{QuotaUsed: &pb.QuotaUsed{Backend: "gpt", TaskId: id}}},
			&pb.Event{At: at, Body: &pb.Event_LlmResponseReceived{LlmResponseReceived: &pb.LLMResponseReceived{TaskId: id, Llm: "gpt", Content: "an answer", DurationNs: 1e9}}},
			&pb.Event{At: at, Body: &pb.Event_TaskCompleted{TaskCompleted: &pb.TaskCompleted{TaskId: id}}})
	}
	return out[:n]
}

// What the observer spends per event (history, timelines, alerts), as a
// ratio to what the live feed already spends per event (its conversion
// and JSON encoding), measured in the same run: the panel's second
// consumer of events must stay of the same order as the first.
func BenchmarkObserverPerEvent(b *testing.B) {
	events := benchEvents(10000)
	const baselineRounds = 50000
	start := time.Now()
	for i := 0; i < baselineRounds; i++ {
		ev := toEvent(actors.Notice{Owner: "scheduler", Event: events[i%len(events)]})
		if _, err := json.Marshal(ev); err != nil {
			b.Fatal(err)
		}
	}
	feedNs := float64(time.Since(start).Nanoseconds()) / baselineRounds
	o := &observer{hist: newHistory(), alerts: newAlertBook(), tl: newTimelines()}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		o.applyLocked(events[i%len(events)], true)
	}
	b.StopTimer()
	obsNs := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(feedNs, "feed-ns/event")
	b.ReportMetric(obsNs/feedNs, "observer/feed")
}
