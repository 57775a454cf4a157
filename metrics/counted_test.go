package metrics

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"fano/pb"
)

// Recoveries and checkpoints are counted from what happened, not set: none
// until one is reported, then one per report, across the window.
func TestRecoveriesAndCheckpointsAreCounted(t *testing.T) {
	m := New(time.Hour)
	s := m.Snapshot(t0)
	require.Zero(t, s.RecoveryCount)
	require.True(t, s.LastRecovery.IsZero())
	require.Zero(t, s.CheckpointCount)

	m.Recovered(t0) // the start's recovery
	restart := &pb.StateUpdate{Component: UpdateRecovery, UpdateType: UpdateRecovered, At: t0.Add(3 * time.Hour).UnixNano(), Data: map[string]string{"owner": "scheduler"}}
	m.ObserveUpdate(restart)
	for range 3 {
		m.ObserveUpdate(&pb.StateUpdate{Component: UpdateWAL, UpdateType: UpdateCheckpoint, At: t0.UnixNano()})
	}
	m.ObserveUpdate(&pb.StateUpdate{Component: "health", UpdateType: "alert", At: t0.UnixNano(), Data: map[string]string{"kind": "low_disk"}})

	s = m.Snapshot(t0.Add(3 * time.Hour))
	require.Equal(t, 2, s.RecoveryCount)
	require.Equal(t, t0.Add(3*time.Hour), s.LastRecovery)
	require.Equal(t, 3, s.CheckpointCount)
	require.Empty(t, s.HealthAlerts, "the alert is older than the window")

	series := map[string]float64{}
	for _, x := range s.Series() {
		if len(x.Labels) == 0 {
			series[x.Name] = x.Value
		}
	}
	require.Equal(t, 2.0, series["fano_recoveries"])
	require.Equal(t, 3.0, series["fano_checkpoints"])
}
