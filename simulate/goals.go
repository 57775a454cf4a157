package simulate

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Goal names (the goals on the default schedule).
const (
	goalHuman    = "no human action but the login alert"
	goalFailed   = "0 tasks FAILED for backend-level reasons"
	goalBlessed  = "blessed insights per day within 10 % of day 1 on days without an outage"
	goalRecover  = "outage days recover within a day"
	goalQuota    = "usable quota used >= 95 % on days with work available"
	goalFlat     = "heap and goroutines flat after day 2"
	goalVerify   = "fano verify and fano doc check clean at the end"
	goalSameSeed = "the same seed gives the same report"
	goalWAL      = "WAL entries per model request <= 8, every day"
)

// GoalWAL: a task no backend may take writes nothing until one may (no
// start/pause loop behind a login wall or any other condition).
const GoalWAL = goalWAL

// maxEntriesPerRequest is the most WAL entries a model request may cost
// on a day (a fault-free run writes 4.7 to 7).
const maxEntriesPerRequest = 8

// GoalVerify and GoalSameSeed are checked outside the driver.
const (
	GoalVerify   = goalVerify
	GoalSameSeed = goalSameSeed
)

// CheckGoals adds the goals the report itself can tell.
func (r *Report) CheckGoals() {
	r.Goals = nil
	var bad []string
	for _, a := range r.Alerts {
		if a.Action && a.State != "login" {
			bad = append(bad, fmt.Sprintf("day %d %s %s", a.Day, a.Kind, a.Backend))
		}
	}
	r.goal(goalHuman, len(bad) == 0, listOr(bad, "only login alerts asked for a person"))

	bad = nil
	for _, f := range r.Failed {
		if f.BackendLevel {
			bad = append(bad, fmt.Sprintf("day %d %s: %s", f.Day, f.Task, f.Reason))
		}
	}
	r.goal(goalFailed, len(bad) == 0, listOr(bad, fmt.Sprintf("%d tasks failed, none for a backend", len(r.Failed))))

	if len(r.Days) > 0 {
		// A day without an outage is held to day 1 within 10 %; the day
		// after an outage is held only from below (at least 90 % of day
		// 1: it has recovered), since it also clears what the outage
		// held back and may well bless more.
		base := r.Days[0].Blessed
		within := func(d DayReport) bool { return 10*abs(d.Blessed-base) <= base }
		recovered := func(d DayReport) bool { return 10*(base-d.Blessed) <= base }
		bad = nil
		var rec []string
		for i, d := range r.Days[1:] {
			after := r.Days[i].Outage // r.Days[i] is the day before d
			switch {
			case d.Outage:
			case after && !recovered(d):
				rec = append(rec, fmt.Sprintf("day %d after the outage: %d", d.Day, d.Blessed))
			case !after && !within(d):
				bad = append(bad, fmt.Sprintf("day %d: %d", d.Day, d.Blessed))
			}
		}
		r.goal(goalBlessed, len(bad) == 0, listOr(bad, "every other day without an outage within 10 %")+fmt.Sprintf(" (day 1: %d)", base))
		r.goal(goalRecover, len(rec) == 0, listOr(rec, "every day after an outage back to at least 90 % of day 1"))
	}

	bad = nil
	checked := 0
	for _, d := range r.Days {
		for _, b := range slices.Sorted(maps.Keys(d.WorkHoursBy)) {
			if !d.BackendWorkAllDay(b) {
				continue
			}
			checked++
			if p := d.BackendUsedPercent(b); p < 95 {
				bad = append(bad, fmt.Sprintf("day %d %s: %.1f %%", d.Day, b, p))
			}
		}
	}
	detail := listOr(bad, fmt.Sprintf("%d backend-days with work waiting all day, each >= 95 %%", checked))
	if checked == 0 {
		detail = "no backend had work waiting all day: the quota outlasted the work (nothing to check)"
	}
	r.goal(goalQuota, len(bad) == 0, detail)

	bad = nil
	worst := 0.0
	for _, d := range r.Days {
		per := float64(d.WALEntries) / float64(max(1, d.RequestsSent()))
		worst = max(worst, per)
		if per > maxEntriesPerRequest {
			bad = append(bad, fmt.Sprintf("day %d: %d entries for %d requests", d.Day, d.WALEntries, d.RequestsSent()))
		}
	}
	r.goal(goalWAL, len(bad) == 0, listOr(bad, fmt.Sprintf("at most %.1f a request", worst)))
	r.checkFlat()
}

// heapPerOutputMB is how much heap each MB of output may add: the
// document's sections (with their earlier versions and reviews) and the
// blessed insights are state the modules must hold, and the duplicate
// checker indexes their text once more; their output files hold the same
// text once, indented as JSON. Anything else the heap gains after day 2
// is a leak.
const heapPerOutputMB = 3

func (r *Report) checkFlat() {
	ds := r.Runtime.Days
	if len(ds) < 3 {
		r.goal(goalFlat, true, "fewer than 3 days: nothing to compare")
		return
	}
	ref := ds[1]
	var bad []string
	for _, d := range ds[2:] {
		// Flat: no more than a quarter above day 2 (plus a little slack
		// for a small heap and the goroutines of calls in flight), plus
		// what the output grew by since day 2, heapPerOutputMB times.
		grown := max(0, d.OutputMB-ref.OutputMB)
		if limit := ref.HeapMB*1.25 + 4 + heapPerOutputMB*grown; d.HeapMB > limit {
			bad = append(bad, fmt.Sprintf("day %d heap %.1f MB above %.1f (day 2: %.1f MB; output grew %.2f MB)", d.Day, d.HeapMB, limit, ref.HeapMB, grown))
		}
		if float64(d.Goroutines) > float64(ref.Goroutines)*1.25+10 {
			bad = append(bad, fmt.Sprintf("day %d %d goroutines (day 2: %d)", d.Day, d.Goroutines, ref.Goroutines))
		}
	}
	last := ds[len(ds)-1]
	r.goal(goalFlat, len(bad) == 0, listOr(bad, fmt.Sprintf("day 2: %.1f MB, %d goroutines; later days within 25 %% + %d × output growth (%.2f MB by day %d)",
		ref.HeapMB, ref.Goroutines, heapPerOutputMB, max(0, last.OutputMB-ref.OutputMB), last.Day)))
}

// AddGoal records a goal checked outside the report (verify, determinism).
func (r *Report) AddGoal(name string, ok bool, detail string) { r.goal(name, ok, detail) }

func (r *Report) goal(name string, ok bool, detail string) {
	r.Goals = append(r.Goals, Goal{Name: name, OK: ok, Detail: detail})
}

// GoalsMet reports whether every goal holds, and names those that fail.
func (r *Report) GoalsMet() (bool, []string) {
	var failed []string
	for _, g := range r.Goals {
		if !g.OK {
			failed = append(failed, g.Name+": "+g.Detail)
		}
	}
	return len(failed) == 0, failed
}

func listOr(bad []string, ok string) string {
	if len(bad) == 0 {
		return ok
	}
	if len(bad) > 8 {
		bad = append(bad[:8], fmt.Sprintf("and %d more", len(bad)-8))
	}
	return strings.Join(bad, "; ")
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
