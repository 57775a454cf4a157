package scheduler

import (
	"math"
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

// backlogPressure is the priority factor for a module's backlog.
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
// Cost: one question per module and per (backend, deep) that an unfinished
// task prefers, plus the starts of the share window; not the queue length.
func (s *State) refreshEnv(now int64, env Env) {
	clear(s.backlog)
	clear(s.quota)
	if env.Backlog != nil {
		for _, m := range s.modules() {
			s.backlog[m] = env.Backlog(m)
		}
	}
	if env.HasQuota != nil {
		for k := range s.prefOpen {
			s.quota[k] = env.HasQuota(k.backend, k.deep)
		}
	}

	if s.shareCounts == nil {
		s.shareCounts = map[string]int{}
	}
	clear(s.shareCounts)
	s.shareTotal = 0
	cutoff := now - int64(s.cfg.ShareWindow)
	for _, st := range s.starts {
		if st.at >= cutoff && st.at <= now {
			s.shareCounts[st.module] += int(st.n)
			s.shareTotal += int(st.n)
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

// priorityAt is the dynamic priority (docs/architecture.md, Priority) of t at now (unix ns), with
// the env figures of the last Recompute. It is the sum of three parts that
// change at different moments: the task's own (fixed), the starvation boost
// (steps with time, per task) and the environment's (changes on a tick, the
// same for every task of a module and preferred backend).
func (s *State) priorityAt(t *pb.Task, now int64) int32 {
	return int32(s.ownPriority(t) + s.starvationBoost(t.CreatedAt, now) +
		s.envBonus(t.Module, t.LlmPreference, t.RequiresDeepMode))
}

// ownPriority is the part that depends on the task alone: base priority and
// human feedback urgency.
func (s *State) ownPriority(t *pb.Task) int {
	p := int(t.BasePriority)
	if p == 0 {
		p = s.basePriority(t.TaskType)
	}
	if t.TaskType == CommentTaskType {
		p += CommentUrgency
	}
	return p
}

// starvationBoost is the starvation factor: per full hour waited
// since created, capped; plus OverdueBoost once the task waited MaxWait
// (the hard bound).
func (s *State) starvationBoost(created, now int64) int {
	if waited := now - created; created > 0 && waited > 0 {
		boost := min(int(waited/int64(time.Hour))*s.cfg.BoostPerHour, s.cfg.MaxBoost)
		if s.cfg.MaxWait > 0 && waited >= int64(s.cfg.MaxWait) {
			boost += OverdueBoost
		}
		return boost
	}
	return 0
}

// noStep is the step time of a boost that never changes again.
const noStep = math.MaxInt64

// nextBoostStep is the earliest time after now at which the starvation boost
// of a task created at created can differ from its value at now, or noStep.
// The boost only changes at whole hours of waiting, until the cap, and once
// at MaxWait, so a task is re-keyed at most MaxBoost/BoostPerHour+1 times.
func (s *State) nextBoostStep(created, now int64) int64 {
	if created <= 0 {
		return noStep
	}
	step := s.nextHourStep(created, now)
	if w := int64(s.cfg.MaxWait); w > 0 && now-created < w {
		step = min(step, created+w)
	}
	return step
}

// nextHourStep is nextBoostStep for the hourly boost alone.
func (s *State) nextHourStep(created, now int64) int64 {
	rate, maxBoost := s.cfg.BoostPerHour, s.cfg.MaxBoost
	waited := now - created
	if waited <= 0 {
		if maxBoost < 0 {
			return created + 1 // the cap applies from the first nanosecond of waiting
		}
		waited = 0
	}
	hours := waited / int64(time.Hour)
	if rate >= 0 && (rate == 0 || int(hours)*rate >= maxBoost) {
		return noStep
	}
	return created + (hours+1)*int64(time.Hour)
}

// envBonus is the part set by the figures of the last Recompute: backlog
// pressure and module balance of the module, the quota of the preferred
// backend.
func (s *State) envBonus(module, pref string, deep bool) int {
	p := backlogPressure(s.backlog[module])
	if pref != "" && !s.hasQuota(pref, deep) {
		p -= NoQuotaPenalty
	}
	if s.shareTotal > 0 && float64(s.shareCounts[module])/float64(s.shareTotal) < s.balanceShare(module) {
		p += BalanceBonus
	}
	return p
}

// balanceShare is the share of recent starts below which module is
// underserved.
func (s *State) balanceShare(module string) float64 {
	if th, ok := s.underserved[module]; ok {
		return th
	}
	return BalanceShare
}
