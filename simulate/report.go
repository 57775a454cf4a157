package simulate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Report is what a simulation yielded and cost. Everything but Runtime is
// a function of the config, the schedule and the seed.
type Report struct {
	Config   string          `json:"config"`
	Schedule string          `json:"schedule"`
	Seed     int64           `json:"seed"`
	Start    time.Time       `json:"start"`
	Days     []DayReport     `json:"days"`
	Backends []BackendTotals `json:"backends"`
	Alerts   []Alert         `json:"alerts"`
	Failed   []FailedTask    `json:"failed_tasks"`
	Events   []FaultEvent    `json:"fault_events"`
	WAL      WALFigures      `json:"wal"`
	Goals    []Goal          `json:"goals"`
	// Runtime figures differ from run to run (wall time, memory).
	Runtime RuntimeFigures `json:"runtime"`
}

// DayReport is one simulated day.
type DayReport struct {
	Day                int                       `json:"day"`
	SeedsAdded         int                       `json:"seeds_added"`
	Blessed            int                       `json:"insights_blessed"`
	SectionsWritten    int                       `json:"sections_written"`
	SectionsRevised    int                       `json:"sections_revised"`
	TasksCompleted     int                       `json:"tasks_completed"`
	TasksFailed        int                       `json:"tasks_failed"`
	TasksFailedBackend int                       `json:"tasks_failed_backend_level"`
	RequestsFailed     int                       `json:"requests_failed"`
	Requests           map[string]int            `json:"requests"`
	QuotaUsed          map[string]int            `json:"quota_used"`
	Usable             map[string]float64        `json:"usable_budget"` // requests the backends could have served while they could serve
	StateMinutes       map[string]map[string]int `json:"state_minutes"`
	QueueMax           int                       `json:"queue_max"`
	QueueEnd           int                       `json:"queue_end"`
	WorkHours          int                       `json:"hours_with_work_waiting"`
	// WorkHoursBy: per backend, the hours that ended with work waiting
	// that it could have taken (pinned to it, or to no backend and not
	// excluding it; deep-mode work, with its own budget, not counted).
	WorkHoursBy map[string]int `json:"hours_with_work_waiting_by_backend"`
	Alerts      int            `json:"alerts"`
	Outage      bool           `json:"outage"` // a one-off fault (not a daily one) fell on this day
	// WALEntries counts the events written this day (but a finished
	// task's forgetting, written once its retention ends): with the
	// requests that left, what a request costs in the log (nothing spins).
	WALEntries int `json:"wal_entries"`
}

// RequestsSent is the requests that left for a backend this day.
func (d DayReport) RequestsSent() int {
	n := 0
	for _, r := range d.Requests {
		n += r
	}
	return n
}

// UsedPercent is the quota used against the usable budget of the day.
func (d DayReport) UsedPercent() float64 {
	used, usable := 0, 0.0
	for _, n := range d.QuotaUsed {
		used += n
	}
	for _, u := range d.Usable {
		usable += u
	}
	if usable == 0 {
		return 0
	}
	return 100 * float64(used) / usable
}

// WorkAllDay: work waited at the end of every hour of the day.
func (d DayReport) WorkAllDay() bool { return d.WorkHours >= 24 }

// BackendWorkAllDay: work backend could take waited at the end of every
// hour of the day.
func (d DayReport) BackendWorkAllDay(backend string) bool { return d.WorkHoursBy[backend] >= 24 }

// BackendUsedPercent is backend's quota used against its usable budget
// of the day.
func (d DayReport) BackendUsedPercent(backend string) float64 {
	if d.Usable[backend] == 0 {
		return 0
	}
	return 100 * float64(d.QuotaUsed[backend]) / d.Usable[backend]
}

// BackendTotals sums a backend over the run.
type BackendTotals struct {
	Name      string         `json:"name"`
	Kind      string         `json:"kind"`
	Requests  int            `json:"requests"`
	QuotaUsed int            `json:"quota_used"`
	Usable    float64        `json:"usable_budget"`
	States    map[string]int `json:"state_minutes"`
	Refused   FaultCounts    `json:"refused_by_faults"`
}

// Alert is one alert fano raised.
type Alert struct {
	Day       int       `json:"day"`
	At        time.Time `json:"at"`
	Component string    `json:"component"`
	Kind      string    `json:"kind"`
	Backend   string    `json:"backend,omitempty"`
	State     string    `json:"state,omitempty"`
	Message   string    `json:"message"`
	Resolved  bool      `json:"resolved"`
	Action    bool      `json:"needs_person"`
}

// FailedTask is a task that ended FAILED.
type FailedTask struct {
	Day          int       `json:"day"`
	At           time.Time `json:"at"`
	Task         string    `json:"task"`
	Reason       string    `json:"reason"`
	BackendLevel bool      `json:"backend_level"`
}

// FaultEvent is a fault the driver applied.
type FaultEvent struct {
	Day    int       `json:"day"`
	At     time.Time `json:"at"`
	Kind   string    `json:"kind"`
	Target string    `json:"target,omitempty"`
	Error  string    `json:"error,omitempty"`
}

// WALFigures is the WAL at the end, after a checkpoint and a compaction.
type WALFigures struct {
	Entries int     `json:"entries"`
	MB      float64 `json:"mb"`
	Dropped int     `json:"compaction_dropped"`
}

// RuntimeFigures vary from run to run.
type RuntimeFigures struct {
	WallSeconds       float64      `json:"wall_seconds"`
	SimSecondsPerWall float64      `json:"sim_seconds_per_wall_second"`
	Steps             int64        `json:"clock_steps"`
	SettleTimeouts    int          `json:"settle_timeouts"`
	Days              []RuntimeDay `json:"days"`
}

// RuntimeDay is sampled at the end of each day.
type RuntimeDay struct {
	Day        int     `json:"day"`
	HeapMB     float64 `json:"heap_mb"`
	Goroutines int     `json:"goroutines"`
	WALMB      float64 `json:"wal_mb"`
	// OutputMB is the size of the output files (the document, the
	// blessed insights): what the run legitimately accumulates, and what
	// the flat-heap goal allows the heap to grow with.
	OutputMB float64 `json:"output_mb"`
}

// Goal is one of the goals, checked on the report.
type Goal struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// Deterministic returns the report without its runtime figures, as JSON:
// the same seed must give the same bytes.
func (r *Report) Deterministic() []byte {
	c := *r
	c.Runtime = RuntimeFigures{}
	var goals []Goal
	for _, g := range r.Goals {
		if g.Name != goalFlat {
			goals = append(goals, g)
		}
	}
	c.Goals = goals
	c.WAL.MB = 0 // bbolt's page layout depends on write timing
	b, _ := json.MarshalIndent(&c, "", "  ")
	return b
}

// Write puts report.md, report.json and one SVG chart per day in dir.
func (r *Report) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), append(js, '\n'), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "report.md"), []byte(r.Markdown()), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	for _, d := range r.Days {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("day-%02d.svg", d.Day)), r.DaySVG(d), 0o644); err != nil {
			return fmt.Errorf("report: %w", err)
		}
	}
	return nil
}

// Markdown renders the report for a person.
func (r *Report) Markdown() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# fano simulate: %d days\n\n", len(r.Days))
	p("Config %s, fault schedule %s, seed %d; virtual start %s.\n\n", r.Config, r.Schedule, r.Seed, r.Start.Format(time.RFC3339))
	p("## Goals\n\n")
	for _, g := range r.Goals {
		mark := "ok"
		if !g.OK {
			mark = "FAILED"
		}
		p("- **%s**: %s — %s\n", g.Name, mark, g.Detail)
	}
	p("\nHow to read it: the usable budget of a backend is its usable hourly quota (the limit estimate less the buffer) over the minutes it could serve (ready, exhausted or paced); ")
	p("work waits in an hour when tasks that need no deep mode are pending or ready at its end, and waits for a backend when one of them could run on it (pinned to it, or to none and not excluding it); ")
	p("the quota goal holds each backend to 95 %% of its usable budget on the days work waited for it all day; ")
	p("the day after an outage is held to at least 90 %% of day 1's blessed insights (it also clears what the outage held back), every other day without an outage to within 10 %%; ")
	p("an outage day is one a one-off fault of the schedule (not a daily one) touches, or a login wall or revoked key lasts into; ")
	p("a failure is backend-level when its reason names a backend's error, limit, login, key, hang or crash.\n")
	p("\n## Days\n\n")
	p("| day | questions added | blessed | sections written | revised | tasks done | failed (backend) | requests | quota used %% of usable | hours with work | queue max | alerts | outage |\n")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, d := range r.Days {
		req := 0
		for _, n := range d.Requests {
			req += n
		}
		p("| %d | %d | %d | %d | %d | %d | %d (%d) | %d | %.1f | %d | %d | %d | %v |\n", d.Day, d.SeedsAdded, d.Blessed, d.SectionsWritten,
			d.SectionsRevised, d.TasksCompleted, d.TasksFailed, d.TasksFailedBackend, req, d.UsedPercent(), d.WorkHours, d.QueueMax, d.Alerts, d.Outage)
	}
	p("\n## Work waiting per backend\n\nHours of each day that ended with work the backend could take, and its quota used %% of its usable budget (24 h: held to >= 95 %%).\n\n| day |")
	for _, bt := range r.Backends {
		p(" %s |", bt.Name)
	}
	p("\n|---|%s\n", strings.Repeat("---|", len(r.Backends)))
	for _, d := range r.Days {
		p("| %d |", d.Day)
		for _, bt := range r.Backends {
			p(" %d h, %.1f %% |", d.WorkHoursBy[bt.Name], d.BackendUsedPercent(bt.Name))
		}
		p("\n")
	}
	p("\n## Backends\n\n| backend | type | requests | quota used | usable budget | refused by faults | time in each state |\n|---|---|---|---|---|---|---|\n")
	for _, bt := range r.Backends {
		p("| %s | %s | %d | %d | %.0f | %s | %s |\n", bt.Name, bt.Kind, bt.Requests, bt.QuotaUsed, bt.Usable, refusedText(bt.Refused), statesText(bt.States))
	}
	p("\n## Alerts\n\n")
	if len(r.Alerts) == 0 {
		p("None.\n")
	}
	for _, a := range r.Alerts {
		who := "fano handles it"
		if a.Action {
			who = "**a person must act**"
		}
		if a.Resolved {
			who = "resolved"
		}
		p("- day %d %s %s %s: %s (%s)\n", a.Day, a.At.Format("15:04"), a.Kind, a.Backend, a.Message, who)
	}
	p("\n## Failed tasks\n\n")
	if len(r.Failed) == 0 {
		p("None.\n")
	}
	for _, f := range r.Failed {
		lvl := "task"
		if f.BackendLevel {
			lvl = "backend"
		}
		p("- day %d %s %s (%s): %s\n", f.Day, f.At.Format("15:04"), f.Task, lvl, f.Reason)
	}
	p("\n## Faults applied\n\n")
	for _, e := range r.Events {
		p("- day %d %s %s %s", e.Day, e.At.Format("15:04"), e.Kind, e.Target)
		if e.Error != "" {
			p(" (error: %s)", e.Error)
		}
		p("\n")
	}
	p("\n## WAL\n\n%d entries, %.1f MB at the end after a checkpoint and a compaction (which dropped %d entries).\n", r.WAL.Entries, r.WAL.MB, r.WAL.Dropped)
	p("\n## Runtime (varies from run to run)\n\n%.1f s wall, %.0f simulated seconds per wall second, %d clock steps, %d settle timeouts.\n\n",
		r.Runtime.WallSeconds, r.Runtime.SimSecondsPerWall, r.Runtime.Steps, r.Runtime.SettleTimeouts)
	p("| day | heap MB | goroutines | WAL MB | output MB |\n|---|---|---|---|---|\n")
	for _, d := range r.Runtime.Days {
		p("| %d | %.1f | %d | %.1f | %.2f |\n", d.Day, d.HeapMB, d.Goroutines, d.WALMB, d.OutputMB)
	}
	p("\nCharts: ")
	for _, d := range r.Days {
		p("[day %d](day-%02d.svg) ", d.Day, d.Day)
	}
	p("\n")
	return b.String()
}

func refusedText(f FaultCounts) string {
	return fmt.Sprintf("cap %d, 429 %d, transient %d, hang %d, crash %d", f.Capped, f.Stormed, f.Transient, f.Hung, f.Crashed)
}

func statesText(m map[string]int) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %s", k, (time.Duration(m[k])*time.Minute).String()))
	}
	return strings.Join(parts, ", ")
}

// stateColors for the chart.
var stateColors = map[string]string{"ready": "#4caf50", "exhausted": "#9e9e9e", "paced": "#8bc34a", "rate_limited": "#ff9800",
	"capped": "#ff5722", "login": "#e91e63", "credentials": "#9c27b0", "circuit_open": "#f44336", "page_gone": "#795548",
	"stalled": "#607d8b", "down": "#000000", "paused": "#03a9f4"}

// DaySVG draws a day: per backend, minutes in each state as a bar, and
// quota used against the usable budget.
func (r *Report) DaySVG(d DayReport) []byte {
	var b bytes.Buffer
	names := make([]string, 0, len(d.StateMinutes))
	for n := range d.StateMinutes {
		names = append(names, n)
	}
	sort.Strings(names)
	w, rowH := 720, 34
	h := 70 + rowH*len(names) + 40
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="15">Day %d: %d insights blessed, %d sections written, %d revised, quota %.0f%% of usable</text>`+"\n",
		d.Day, d.Blessed, d.SectionsWritten, d.SectionsRevised, d.UsedPercent())
	fmt.Fprintf(&b, `<text x="10" y="40">time in each state (bar = 24 h); right: quota used / usable budget</text>`+"\n")
	barX, barW := 130, 420
	for i, n := range names {
		y := 55 + i*rowH
		fmt.Fprintf(&b, `<text x="10" y="%d">%s</text>`+"\n", y+15, xmlEscape(n))
		x := float64(barX)
		var states []string
		for s := range d.StateMinutes[n] {
			states = append(states, s)
		}
		sort.Strings(states)
		for _, s := range states {
			wd := float64(barW) * float64(d.StateMinutes[n][s]) / (24 * 60)
			col, ok := stateColors[s]
			if !ok {
				col = "#cccccc"
			}
			fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="20" fill="%s"><title>%s: %d min</title></rect>`+"\n", x, y, wd, col, xmlEscape(s), d.StateMinutes[n][s])
			x += wd
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d">%d / %.0f</text>`+"\n", barX+barW+10, y+15, d.QuotaUsed[n], d.Usable[n])
	}
	ly := 60 + rowH*len(names)
	x := 10
	var keys []string
	for k := range stateColors {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d" font-size="10">%s</text>`+"\n", x, ly, stateColors[k], x+13, ly+9, k)
		x += 13 + 7*len(k) + 8
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

func xmlEscape(s string) string {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")
	return r.Replace(s)
}
