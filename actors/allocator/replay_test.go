package allocator

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"fano/pb"
)

// scenario drives a rig through a day and a half of mixed events and
// returns the log index of its midpoint, with the snapshot taken there.
func scenario(t *testing.T, r *rig) (int, *pb.AllocatorSnapshot) {
	t.Helper()
	var mid int
	var snap *pb.AllocatorSnapshot
	names := []string{"chatgpt", "gemini", "openrouter"}
	for step := range 36 * 6 { // every 10 minutes
		r.clock.Advance(10 * time.Minute)
		r.tick()
		now := r.now()
		for i, name := range names {
			switch {
			case step%17 == 3 && i == 1:
				r.rateLimit(name, 25*time.Minute)
			case step%29 == 5 && i == 2:
				r.rateLimit(name, 0)
			case step == 40 && i == 0:
				e, err := r.book.DecidePause(name, "operator", now)
				require.NoError(t, err)
				r.persist(e)
			case step == 55 && i == 0:
				e, err := r.book.DecideResume(name, now)
				require.NoError(t, err)
				r.persist(e)
			case step%41 == 7 && i == 0:
				r.usageCap(name, now.Add(90*time.Minute))
			case step%23 == 11 && i == 2:
				e, err := r.book.DecideCondition(name, "credentials", "HTTP 401", now.Add(5*time.Minute), now)
				require.NoError(t, err)
				r.persist(e)
			case step%31 == 13 && i == 1:
				if e := r.book.DecideRateLearned(name, 60+step, time.Minute, now); e != nil {
					r.persist(e)
				}
			case step%19 == 2 && i == 2:
				e, err := r.book.DecideRelease(name, false, "task", now)
				require.NoError(t, err)
				r.persist(e)
			}
			for range 1 + (step+i)%4 {
				deep := r.book.CanUse(name, true, now) && step%3 == 0
				if e, err := r.book.DecideUse(name, deep, "task", now); err == nil {
					r.persist(e)
				}
			}
		}
		if step == 36*3 {
			mid, snap = len(r.log), proto.Clone(r.book.Snapshot()).(*pb.AllocatorSnapshot)
		}
	}
	return mid, snap
}

func TestReplayEqualsLive(t *testing.T) {
	r := newRig(t, three(), at(0, 5))
	mid, snap := scenario(t, r)
	live := r.book.Snapshot()
	require.Greater(t, len(r.log), mid)

	// Checkpoint at the midpoint plus the rest of the log.
	restored, err := Restore(three(), snap)
	require.NoError(t, err)
	for _, e := range r.log[mid:] {
		require.NoError(t, restored.Apply(e))
	}
	assert.True(t, proto.Equal(live, restored.Snapshot()), cmpDiff(live, restored.Snapshot()))

	// The whole log from nothing.
	fresh := New(three())
	for _, e := range r.log {
		require.NoError(t, fresh.Apply(e))
	}
	assert.True(t, proto.Equal(live, fresh.Snapshot()), cmpDiff(live, fresh.Snapshot()))

	// And the queries agree.
	assert.Equal(t, r.book.Status(r.now()), fresh.Status(r.now()))

	// The scenario did exercise what it claims.
	var sawLowered, sawCondition, sawLearned bool
	for _, b := range live.GetBackends() {
		sawLowered = sawLowered || b.GetLimitEstimate() > 0 || b.GetCleanHours() > 0
		sawCondition = sawCondition || b.GetConditionState() != ""
		sawLearned = sawLearned || b.GetLearnedLimit() > 0
	}
	assert.True(t, sawLowered)
	assert.True(t, sawCondition)
	assert.True(t, sawLearned)
}

func cmpDiff(live, replayed proto.Message) string {
	return "live:\n" + prototext.Format(live) + "\nreplayed:\n" + prototext.Format(replayed)
}
