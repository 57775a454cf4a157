package scheduler

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"fano/pb"
)

// A task handed out by TaskView never changes: every later event, the
// priority a tick or a read refreshes, and the completion that archives
// it go to the scheduler's own copy. Readers on other goroutines read it
// while the scheduler goes on (the race detector watches).
func TestTaskViewNeverChanges(t *testing.T) {
	s := New(Config{MessageLimit: 3})
	tk := task("explorer", "exploration", "a")
	tk.Context = map[string]string{"question": "q"}
	submit(t, s, tk, t0)
	id := tk.Id
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	interrupted := evRequestFailed(id, "web", at(9))
	interrupted.GetLlmRequestFailed().Kind = "interrupted"
	completed := evCompleted(id, at(30))
	completed.GetTaskCompleted().Archived = true
	events := []*pb.Event{
		evStarted(id, "web", at(1)),
		evRequest(id, "web", "p1", at(2)),
		evResponse(id, "web", "a1", "https://chat/1", at(3)),
		evRequest(id, "web", "p2", at(4)),
		evResponse(id, "web", "a2", "https://chat/1", at(5)),
		evRequest(id, "web", "p3", at(8)), // truncates the messages to 3
		interrupted,                       // remembers the prompt, drops it
		evPaused(id, "preempted", time.Time{}, at(10)),
		evResumed(id, at(11)),
		evStarted(id, "web", at(12)),
		evRequest(id, "web", "p3", at(13)),
		evRequestFailed(id, "web", at(14)),
		evRetry(id, "again", at(15), at(14)),
		evStarted(id, "web", at(16)),
		completed,
	}

	type seen struct{ view, was *pb.Task }
	var views []seen
	stop := make(chan struct{})
	var readers sync.WaitGroup
	take := func() {
		v, ok := s.TaskView(id)
		require.True(t, ok)
		views = append(views, seen{v, proto.Clone(v).(*pb.Task)})
		readers.Add(1)
		go func() { // a reader elsewhere, as an executor is
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
					_, _ = proto.Marshal(v)
				}
			}
		}()
	}
	for i, e := range events {
		take()
		s.Recompute(at(20+i*60), Env{}) // boosts step: priorities change
		_, _ = s.Task(id)
		take()
		apply(t, s, e)
	}
	take()
	close(stop)
	readers.Wait()
	for i, v := range views {
		require.True(t, proto.Equal(v.was, v.view), "view %d changed:\n now %v\n was %v", i, v.view, v.was)
	}
	last, _ := s.Task(id)
	require.Equal(t, pb.TaskState_TASK_STATE_COMPLETED, last.State)
	require.True(t, last.Archived)
	require.Nil(t, last.Context, "archived: the context left memory")
	require.Equal(t, "a1", views[7].view.Conversation.Messages[1].Content, "a view holds the conversation as it was")
}

func evResumed(id string, at time.Time) *pb.Event {
	return &pb.Event{At: at.UnixNano(), Body: &pb.Event_TaskResumed{TaskResumed: &pb.TaskResumed{TaskId: id}}}
}

// TaskAfter is the task as applying the events to a copy makes it, and
// leaves the scheduler's task as it was.
func TestTaskAfterIsTheTaskOnceApplied(t *testing.T) {
	s := New(Config{MessageLimit: 3})
	tk := task("explorer", "exploration", "a")
	tk.Context = map[string]string{"question": "q"}
	submit(t, s, tk, t0)
	id := tk.Id
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	for _, e := range []*pb.Event{
		evStarted(id, "web", at(1)),
		evRequest(id, "web", "p1", at(2)),
		evResponse(id, "web", "a1", "https://chat/1", at(3)),
		evRequest(id, "web", "p2", at(4)),
	} {
		apply(t, s, e)
	}
	before, _ := s.Task(id)
	later := []*pb.Event{
		evResponse(id, "web", "a2", "https://chat/1", at(5)),
		evRequest(id, "web", "p3", at(6)), // truncates to 3 messages
		evCompleted(id, at(7)),
	}
	want := proto.Clone(before).(*pb.Task)
	for _, e := range later {
		require.NoError(t, ApplyToTask(want, e, 3))
	}
	got, err := s.TaskAfter(id, later)
	require.NoError(t, err)
	require.True(t, proto.Equal(want, got), "got %v\nwant %v", got, want)
	now, _ := s.Task(id)
	require.True(t, proto.Equal(before, now), "TaskAfter changed the scheduler's task")

	_, err = s.TaskAfter("explorer/exploration/none", later)
	var nf *NotFoundError
	require.ErrorAs(t, err, &nf)
}

// A snapshot kept while the scheduler goes on stays as it was taken.
func TestSnapshotDoesNotChangeLater(t *testing.T) {
	s := New(Config{MessageLimit: 3})
	tk := task("explorer", "exploration", "a")
	tk.Context = map[string]string{"question": "q"}
	submit(t, s, tk, t0)
	id := tk.Id
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	apply(t, s, evStarted(id, "web", at(1)))
	apply(t, s, evRequest(id, "web", "p1", at(2)))
	snap := s.Snapshot()
	was := proto.Clone(snap)
	apply(t, s, evResponse(id, "web", "a1", "https://chat/1", at(3)))
	apply(t, s, evRequest(id, "web", "p2", at(4)))
	apply(t, s, evRequestFailed(id, "web", at(5)))
	done := evCompleted(id, at(6))
	done.GetTaskCompleted().Archived = true
	apply(t, s, done)
	require.True(t, proto.Equal(was, snap), "the snapshot changed:\n now %v\n was %v", snap, was)
}
