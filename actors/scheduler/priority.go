package scheduler

import (
	"time"

	"fano/pb"
)

// basePriority is the table's value for a task type (unknown: 50).
func (s *State) basePriority(taskType string) int {
	if p, ok := s.cfg.BasePriorities[taskType]; ok {
		return p
	}
	return DefaultBasePriority
}

// backlogPressure is spec §6.1.1's factor for a module's backlog.
func backlogPressure(n int) int {
	switch {
	case n > 20:
		return 30
	case n > 10:
		return 15
	}
	return 0
}

// refreshEnv reads env's figures and the module shares at now. They are
// kept for priorities computed between ticks (a task entering the queue).
func (s *State) refreshEnv(now int64, env Env) {
	s.backlog = map[string]int{}
	s.quota = map[quotaKey]bool{}
	if env.Backlog != nil {
		for _, m := range s.modules() {
			s.backlog[m] = env.Backlog(m)
		}
	}
	if env.HasQuota != nil {
		for _, en := range s.open {
			t := en.t
			if t.LlmPreference == "" {
				continue
			}
			k := quotaKey{t.LlmPreference, t.RequiresDeepMode}
			if _, ok := s.quota[k]; !ok {
				s.quota[k] = env.HasQuota(k.backend, k.deep)
			}
		}
	}

	s.shareCounts = map[string]int{}
	s.shareTotal = 0
	cutoff := now - int64(s.cfg.ShareWindow)
	for _, st := range s.starts {
		if st.At >= cutoff && st.At <= now {
			s.shareCounts[st.Module]++
			s.shareTotal++
		}
	}
}

func (s *State) modules() []string {
	ms := make([]string, 0, len(s.counts))
	for m := range s.counts {
		ms = append(ms, m)
	}
	return ms
}

// hasQuota is the allocator's view at the last Recompute; a backend it was
// not asked about counts as having quota until the next tick.
func (s *State) hasQuota(backend string, deep bool) bool {
	if q, ok := s.quota[quotaKey{backend, deep}]; ok {
		return q
	}
	return true
}

// priorityAt is spec §6.1.1's dynamic priority of t at now (unix ns), with
// the env figures of the last Recompute.
func (s *State) priorityAt(t *pb.Task, now int64) int32 {
	p := int(t.BasePriority)
	if p == 0 {
		p = s.basePriority(t.TaskType)
	}
	// Backlog pressure.
	p += backlogPressure(s.backlog[t.Module])
	// Starvation: per full hour waited, capped.
	if waited := now - t.CreatedAt; t.CreatedAt > 0 && waited > 0 {
		boost := int(waited/int64(time.Hour)) * s.cfg.BoostPerHour
		p += min(boost, s.cfg.MaxBoost)
	}
	// Human feedback urgency.
	if t.TaskType == CommentTaskType {
		p += CommentUrgency
	}
	// Quota availability of the required backend.
	if t.LlmPreference != "" && !s.hasQuota(t.LlmPreference, t.RequiresDeepMode) {
		p -= NoQuotaPenalty
	}
	// Module balance: underserved in the recent starts.
	if s.shareTotal > 0 && float64(s.shareCounts[t.Module])/float64(s.shareTotal) < BalanceShare {
		p += BalanceBonus
	}
	return int32(p)
}
