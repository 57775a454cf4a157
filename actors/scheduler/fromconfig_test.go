package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/config"
)

// Every scheduler setting of the config reaches the scheduler.
func TestFromConfig(t *testing.T) {
	c, err := config.Parse([]byte(`
orchestrator:
  scheduler:
    preemption_threshold: 7
    max_pending_tasks: 9
    starvation_prevention: {max_wait_hours: 3, priority_boost_per_hour: 2, max_boost: 11}
  module_weights: {explorer: 5, documenter: 3, researcher: 2}
  tasks: {conversation_message_limit: 13}
backends:
  a: {type: sim, hourly_limit: 5}
`), "t.yaml")
	require.NoError(t, err)
	got := FromConfig(c)
	assert.Equal(t, Config{
		PreemptionThreshold: 7, MaxPending: 9, BoostPerHour: 2, MaxBoost: 11, MaxWait: 3 * time.Hour,
		MessageLimit: 13, ShareWindow: time.Hour,
		ModuleWeights: map[string]int{"explorer": 5, "documenter": 3, "researcher": 2},
	}, got)
	s := New(got)
	assert.InDelta(t, 0.3, s.balanceShare("explorer"), 1e-9)
	assert.InDelta(t, 0.12, s.balanceShare("researcher"), 1e-9)
}
