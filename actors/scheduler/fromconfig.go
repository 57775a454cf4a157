package scheduler

import (
	"time"

	"fano/config"
)

// FromConfig takes the scheduler's settings from fano's config.
func FromConfig(c *config.Config) Config {
	o := c.Orchestrator
	w := o.ModuleWeights
	return Config{
		PreemptionThreshold: o.Scheduler.PreemptionThreshold,
		MaxPending:          o.Scheduler.MaxPendingTasks,
		BoostPerHour:        o.Scheduler.StarvationPrevention.PriorityBoostPerHour,
		MaxBoost:            o.Scheduler.StarvationPrevention.MaxBoost,
		MaxWait:             time.Duration(o.Scheduler.StarvationPrevention.MaxWaitHours) * time.Hour,
		MessageLimit:        o.Tasks.ConversationMessageLimit,
		ShareWindow:         time.Hour,
		ModuleWeights:       map[string]int{"explorer": w.Explorer, "documenter": w.Documenter, "researcher": w.Researcher},
	}
}
