package control

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"fano/pb"
	"fano/wal"
)

func at(h, m int) int64 { return time.Date(2026, 3, 1, h, m, 0, 0, time.UTC).UnixNano() }

// The explorer's blessed insights and the documenter's sections count by
// the hour they happened, and sum by day.
func TestHistoryCountsInsightsAndSections(t *testing.T) {
	h := newHistory()
	for _, e := range []*pb.Event{
		{At: at(9, 5), Body: &pb.Event_ModuleEvent{ModuleEvent: &pb.ModuleEvent{Type: "insight_decided", Data: []byte(`{"outcome":"blessed"}`)}}},
		{At: at(9, 6), Body: &pb.Event_ModuleEvent{ModuleEvent: &pb.ModuleEvent{Type: "insight_decided", Data: []byte(`{"outcome":"rejected"}`)}}},
		{At: at(10, 1), Body: &pb.Event_ModuleEvent{ModuleEvent: &pb.ModuleEvent{Type: "incorporated", Data: []byte(`{"created":true}`)}}},
		{At: at(10, 2), Body: &pb.Event_ModuleEvent{ModuleEvent: &pb.ModuleEvent{Type: "incorporated", Data: []byte(`{"created":false}`)}}},
		{At: at(10, 3), Body: &pb.Event_ModuleEvent{ModuleEvent: &pb.ModuleEvent{Type: "revision_decided", Data: []byte(`{"verdict":"reject"}`)}}},
		{At: at(10, 4), Body: &pb.Event_ModuleEvent{ModuleEvent: &pb.ModuleEvent{Type: "revision_decided", Data: []byte(`{"verdict":"revise"}`)}}},
		{At: at(10, 5), Body: &pb.Event_LlmRequestStarted{LlmRequestStarted: &pb.LLMRequestStarted{Llm: "gpt"}}},
		{At: at(10, 6), Body: &pb.Event_LlmRequestStarted{LlmRequestStarted: &pb.LLMRequestStarted{Llm: "gpt"}}},
		{At: at(10, 6), Body: &pb.Event_LlmRequestFailed{LlmRequestFailed: &pb.LLMRequestFailed{Llm: "gpt", NotSent: true}}},
		{At: at(10, 7), Body: &pb.Event_QuotaUsed{QuotaUsed: &pb.QuotaUsed{Backend: "gpt"}}},
		{At: at(10, 8), Body: &pb.Event_QuotaUsed{QuotaUsed: &pb.QuotaUsed{Backend: "gpt"}}},
		{At: at(10, 8), Body: &pb.Event_QuotaReleased{QuotaReleased: &pb.QuotaReleased{Backend: "gpt"}}},
		{At: at(10, 9), Body: &pb.Event_TaskFailed{TaskFailed: &pb.TaskFailed{TaskId: "x"}}},
	} {
		h.observe(e)
	}
	v := h.view(time.Date(2026, 3, 1, 10, 30, 0, 0, time.UTC), 2, []string{"claude"})
	require.Len(t, v.Hours, 2)
	assert.Equal(t, 1, v.Hours[0].Blessed)
	assert.Equal(t, 1, v.Hours[1].Written)
	assert.Equal(t, 2, v.Hours[1].Revised, "an incorporation into a section and an accepted revision")
	assert.Equal(t, map[string]int{"gpt": 1, "claude": 0}, v.Hours[1].Requests, "a request refused before it left is no request")
	assert.Equal(t, map[string]int{"gpt": 1, "claude": 0}, v.Hours[1].QuotaUsed, "quota given back is not used")
	assert.Equal(t, 1, v.Hours[1].Failed)
	assert.Equal(t, []string{"claude", "gpt"}, v.Backends)
	assert.Equal(t, []DayFigures{{Date: "2026-03-01", Failed: 1, Blessed: 1, Written: 1, Revised: 2}}, v.Days)
}

// An event both in the WAL and seen live while the panel reads the WAL is
// counted once; one seen live only is counted too.
func TestObserverCountsWALAndLiveEventsOnce(t *testing.T) {
	log, err := wal.Open(filepath.Join(t.TempDir(), "fano.db"), wal.Options{NoSync: true})
	require.NoError(t, err)
	defer log.Close()
	done := &pb.Event{At: at(10, 1), Body: &pb.Event_TaskCompleted{TaskCompleted: &pb.TaskCompleted{TaskId: "a"}}}
	for _, e := range []*pb.Event{
		{At: at(10, 0), Body: &pb.Event_TaskCompleted{TaskCompleted: &pb.TaskCompleted{TaskId: "old"}}},
		done,
	} {
		payload, err := proto.Marshal(e)
		require.NoError(t, err)
		_, err = log.Append(context.Background(), wal.Entry{Time: time.Unix(0, e.At), Type: "task_completed", Owner: "scheduler", Payload: payload})
		require.NoError(t, err)
	}
	now := func() time.Time { return time.Date(2026, 3, 1, 10, 30, 0, 0, time.UTC) }
	o := newObserver(log, now, testLogger(t), nil)
	// Applied after the panel subscribed, but already durable: live and in
	// the WAL both.
	o.event(proto.Clone(done).(*pb.Event))
	o.start(log.LastSeq() - 1)
	<-o.done
	o.event(&pb.Event{At: at(10, 2), Body: &pb.Event_TaskCompleted{TaskCompleted: &pb.TaskCompleted{TaskId: "b"}}})
	v := o.historyView(1, nil)
	assert.True(t, v.Complete)
	assert.Equal(t, 3, v.Hours[0].Completed, "old, a (once) and b")
	o.stop()
}

// A long timeline keeps how the task began and its latest steps, and says
// how many it left out; the least recently touched task is forgotten
// first.
func TestTimelineBounds(t *testing.T) {
	tl := newTimelines()
	for i := 0; i < timelineSteps+50; i++ {
		tl.observe(&pb.Event{At: at(10, 0) + int64(i), Body: &pb.Event_LlmRequestStarted{LlmRequestStarted: &pb.LLMRequestStarted{TaskId: "long", Turn: int32(i)}}})
	}
	steps, dropped := tl.steps("long")
	require.Len(t, steps, timelineSteps)
	assert.Equal(t, 50, dropped)
	assert.Equal(t, int32(1), steps[0].Turn, "the first step is kept")
	assert.Equal(t, int32(timelineSteps+50), steps[len(steps)-1].Turn, "the latest step is kept")
	for i := 0; i < timelineTasks; i++ {
		tl.observe(&pb.Event{At: at(11, 0), Body: &pb.Event_TaskCompleted{TaskCompleted: &pb.TaskCompleted{TaskId: "t" + itoa(i)}}})
	}
	steps, _ = tl.steps("long")
	assert.Nil(t, steps, "forgotten: least recently touched")
	steps, _ = tl.steps("t0")
	assert.Len(t, steps, 1)
}
