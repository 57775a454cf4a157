package scheduler

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"fano/pb"
)

// liveRun drives a scheduler the way the actor does — decide, persist (here:
// record), apply — with ticks and picks in between, and returns the log.
type liveRun struct {
	t      *testing.T
	s      *State
	log    []*pb.Event
	rng    *rand.Rand
	now    time.Time
	midSeq int
	mid    []byte // snapshot bytes after log[:midSeq]
}

func (r *liveRun) persist(e *pb.Event) {
	r.t.Helper()
	// Through the wire format, as the WAL would.
	b, err := proto.Marshal(e)
	require.NoError(r.t, err)
	var back pb.Event
	require.NoError(r.t, proto.Unmarshal(b, &back))
	r.log = append(r.log, &back)
	require.NoError(r.t, r.s.Apply(e))
}

func (r *liveRun) step(i int) {
	t, s, rng := r.t, r.s, r.rng
	r.now = r.now.Add(time.Duration(rng.IntN(600)) * time.Second)
	backends := []string{"chatgpt", "gemini", "claude"}
	switch k := rng.IntN(10); {
	case k < 3:
		modules := []string{"explorer", "documenter", "researcher"}
		types := []string{"exploration", "synthesis", "address_comment", "evaluate_source"}
		tk := task(modules[rng.IntN(3)], types[rng.IntN(4)], fmt.Sprint(rng.IntN(60)))
		if rng.IntN(3) == 0 {
			tk.LlmPreference = backends[rng.IntN(3)]
		}
		if e, err := s.DecideSubmit(tk, r.now); err == nil {
			r.persist(e)
		}
	case k < 5:
		s.Recompute(r.now, Env{Backlog: func(string) int { return 12 }})
		free := backends[:1+rng.IntN(3)]
		if tk, ok := s.Pick(free, r.now); ok {
			if rng.IntN(4) == 0 {
				s.Unpick(tk.Id)
			} else {
				llm := tk.LlmPreference
				if llm == "" {
					llm = free[0]
				}
				r.persist(evStarted(tk.Id, llm, r.now))
			}
		}
	case k < 8:
		run := s.Running()
		if len(run) == 0 {
			return
		}
		tk := run[rng.IntN(len(run))]
		switch rng.IntN(8) {
		case 0, 1:
			r.persist(evRequest(tk.Id, tk.LlmAssigned, fmt.Sprint("prompt ", i), r.now))
		case 2, 3:
			if tk.Conversation.GetAwaitingResponse() {
				r.persist(evResponse(tk.Id, tk.LlmAssigned, fmt.Sprint("answer ", i), "u", r.now))
			} else {
				r.persist(evCompleted(tk.Id, r.now))
			}
		case 4:
			r.persist(evRequestFailed(tk.Id, tk.LlmAssigned, r.now))
			r.persist(evRetry(tk.Id, "transient", r.now.Add(time.Minute), r.now))
		case 5:
			r.persist(evPaused(tk.Id, "rate_limited", r.now.Add(20*time.Minute), r.now))
		case 6:
			r.persist(evFailed(tk.Id, "permanent", r.now))
		case 7:
			if ok, _ := s.ShouldPreempt(tk.Id, tk.LlmAssigned); ok {
				r.persist(evPaused(tk.Id, "preempted", time.Time{}, r.now))
			}
		}
	case k < 9:
		for _, e := range s.DecideResume(r.now) {
			r.persist(e)
		}
		waiting := s.Tasks(func(t *pb.Task) bool { return t.State == pb.TaskState_TASK_STATE_PENDING }, 1)
		if len(waiting) > 0 && rng.IntN(3) == 0 {
			e, err := s.DecideCancel(waiting[0].Id, "operator", r.now)
			require.NoError(t, err)
			r.persist(e)
		}
	default:
		done := s.Tasks(func(t *pb.Task) bool { return IsFinished(t.State) }, 1)
		if len(done) > 0 {
			r.persist(evForgotten(done[0].Id, r.now))
		}
	}
}

func TestReplayEqualsLive(t *testing.T) {
	for seed := range uint64(5) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := &liveRun{t: t, s: New(Config{MessageLimit: 6}), rng: rand.New(rand.NewPCG(seed, 7)), now: t0}
			const steps = 1500
			for i := range steps {
				r.step(i)
				if i == steps/2 {
					r.midSeq = len(r.log)
					b, err := proto.Marshal(r.s.Snapshot())
					require.NoError(t, err)
					r.mid = b
				}
			}
			checkInvariants(t, r.s)
			live := r.s.Snapshot()
			require.NotEmpty(t, live.Tasks)
			require.Greater(t, r.s.Forgotten(), 0, "scenario forgets tasks")

			// Checkpoint at the midpoint + the later events.
			var mid pb.SchedulerSnapshot
			require.NoError(t, proto.Unmarshal(r.mid, &mid))
			rebuilt, err := Restore(Config{MessageLimit: 6}, &mid)
			require.NoError(t, err)
			for _, e := range r.log[r.midSeq:] {
				require.NoError(t, rebuilt.Apply(e))
			}
			checkInvariants(t, rebuilt)
			assert.True(t, proto.Equal(live, rebuilt.Snapshot()), "checkpoint + replay differs from live")

			// The whole log from nothing.
			full := New(Config{MessageLimit: 6})
			for _, e := range r.log {
				require.NoError(t, full.Apply(e))
			}
			assert.True(t, proto.Equal(live, full.Snapshot()), "full replay differs from live")
			assert.Equal(t, r.s.Counts(), full.Counts())
			assert.Equal(t, r.s.Pending(), full.Pending())

			// And they schedule alike after a tick (picks are transient: drop them).
			for _, en := range r.s.tasks {
				if en.picked {
					r.s.Unpick(en.t.Id)
				}
			}
			later := r.now.Add(time.Hour)
			r.s.Recompute(later, Env{})
			rebuilt.Recompute(later, Env{})
			for {
				a, okA := r.s.Pick([]string{"chatgpt", "gemini", "claude"}, later)
				b, okB := rebuilt.Pick([]string{"chatgpt", "gemini", "claude"}, later)
				require.Equal(t, okA, okB)
				if !okA {
					break
				}
				require.True(t, proto.Equal(a, b), "%s vs %s", a.Id, b.Id)
			}
		})
	}
}

func TestRestoreRejectsBadSnapshots(t *testing.T) {
	_, err := Restore(Config{}, &pb.SchedulerSnapshot{Tasks: []*pb.Task{{Module: "x"}}})
	require.Error(t, err)
	_, err = Restore(Config{}, &pb.SchedulerSnapshot{Tasks: []*pb.Task{
		{Id: "a/b/c", State: pb.TaskState_TASK_STATE_PENDING}, {Id: "a/b/c", State: pb.TaskState_TASK_STATE_PENDING}}})
	require.ErrorContains(t, err, "a/b/c")
	s, err := Restore(Config{}, nil)
	require.NoError(t, err)
	assert.Zero(t, s.Len())
}
