package control

import (
	"encoding/json"
	"slices"
	"sort"
	"time"

	"fano/pb"
)

// historyKeep is how far back the history goes: a fortnight of hours.
const historyKeep = 14 * 24 * time.Hour

// HourFigures are one hour's counts (UTC hour start).
type HourFigures struct {
	Start     time.Time      `json:"start"`
	Requests  map[string]int `json:"requests"`   // backend -> requests sent (refused before sending not counted)
	QuotaUsed map[string]int `json:"quota_used"` // backend -> quota charged (released quota given back)
	Completed int            `json:"tasks_completed"`
	Failed    int            `json:"tasks_failed"`
	Blessed   int            `json:"insights_blessed"`
	Written   int            `json:"sections_written"`
	Revised   int            `json:"sections_revised"`
}

// DayFigures are one UTC day's insights and sections, summed from its hours.
type DayFigures struct {
	Date      string `json:"date"` // 2026-03-01 (UTC)
	Completed int    `json:"tasks_completed"`
	Failed    int    `json:"tasks_failed"`
	Blessed   int    `json:"insights_blessed"`
	Written   int    `json:"sections_written"`
	Revised   int    `json:"sections_revised"`
}

// History is GET /api/history: per-hour series, oldest first, with every
// hour of the range present (zeros where nothing happened), and per-day
// sums of the same range.
type History struct {
	From     time.Time     `json:"from"`
	To       time.Time     `json:"to"`
	Backends []string      `json:"backends"`
	Hours    []HourFigures `json:"hours"`
	Days     []DayFigures  `json:"days"`
	// Complete is false while the panel is still reading the WAL for the
	// hours before it started (Reading), or when that reading failed (the
	// hours before the panel started are then partial).
	Complete bool `json:"complete"`
	Reading  bool `json:"reading,omitempty"`
}

// history counts events into UTC hours. It is plain data, not safe for
// concurrent use (the observer holds its lock).
type history struct {
	hours map[int64]*HourFigures // unix hour -> figures
	// archivedThrough: hours before this one were loaded from the archive
	// (complete); events before it are not counted again.
	archivedThrough int64
}

func newHistory() *history { return &history{hours: map[int64]*HourFigures{}} }

func hourOf(t time.Time) int64 { return t.Unix() / 3600 }

func (h *history) hour(at time.Time) *HourFigures {
	k := hourOf(at)
	f := h.hours[k]
	if f == nil {
		f = &HourFigures{Start: time.Unix(k*3600, 0).UTC(), Requests: map[string]int{}, QuotaUsed: map[string]int{}}
		h.hours[k] = f
	}
	return f
}

// moduleFacts is what history reads of a module event's data (the
// explorer's insight_decided, the documenter's incorporated and
// revision_decided).
type moduleFacts struct {
	Outcome string `json:"outcome"`
	Created bool   `json:"created"`
	Verdict string `json:"verdict"`
}

// observe counts one applied event.
func (h *history) observe(e *pb.Event) {
	at := time.Unix(0, e.GetAt()).UTC()
	if hourOf(at) < h.archivedThrough {
		return
	}
	switch b := e.GetBody().(type) {
	case *pb.Event_LlmRequestStarted:
		h.hour(at).Requests[b.LlmRequestStarted.GetLlm()]++
	case *pb.Event_LlmRequestFailed:
		if b.LlmRequestFailed.GetNotSent() {
			h.hour(at).Requests[b.LlmRequestFailed.GetLlm()]--
		}
	case *pb.Event_QuotaUsed:
		h.hour(at).QuotaUsed[b.QuotaUsed.GetBackend()]++
	case *pb.Event_QuotaReleased:
		h.hour(at).QuotaUsed[b.QuotaReleased.GetBackend()]--
	case *pb.Event_TaskCompleted:
		h.hour(at).Completed++
	case *pb.Event_TaskFailed:
		h.hour(at).Failed++
	case *pb.Event_ModuleEvent:
		var f moduleFacts
		switch b.ModuleEvent.GetType() {
		case "insight_decided":
			if json.Unmarshal(b.ModuleEvent.GetData(), &f) == nil && f.Outcome == "blessed" {
				h.hour(at).Blessed++
			}
		case "incorporated":
			if json.Unmarshal(b.ModuleEvent.GetData(), &f) == nil {
				if f.Created {
					h.hour(at).Written++
				} else {
					h.hour(at).Revised++
				}
			}
		case "revision_decided":
			if json.Unmarshal(b.ModuleEvent.GetData(), &f) == nil && f.Verdict != "" && f.Verdict != "reject" {
				h.hour(at).Revised++
			}
		}
	}
}

// prune forgets hours older than the fortnight before now.
func (h *history) prune(now time.Time) {
	oldest := hourOf(now.Add(-historyKeep))
	for k := range h.hours {
		if k < oldest {
			delete(h.hours, k)
		}
	}
}

// view is the last n hours up to now's hour, every hour present.
func (h *history) view(now time.Time, n int, backends []string) History {
	last := hourOf(now)
	first := last - int64(n) + 1
	names := map[string]bool{}
	for _, b := range backends {
		names[b] = true
	}
	out := History{From: time.Unix(first*3600, 0).UTC(), To: time.Unix((last+1)*3600, 0).UTC(), Hours: make([]HourFigures, 0, n), Days: []DayFigures{}}
	for k := first; k <= last; k++ {
		f := HourFigures{Start: time.Unix(k*3600, 0).UTC(), Requests: map[string]int{}, QuotaUsed: map[string]int{}}
		if have := h.hours[k]; have != nil {
			f = *have
			f.Requests, f.QuotaUsed = copyCounts(have.Requests), copyCounts(have.QuotaUsed)
		}
		for b := range f.Requests {
			names[b] = true
		}
		for b := range f.QuotaUsed {
			names[b] = true
		}
		out.Hours = append(out.Hours, f)
		date := f.Start.Format(time.DateOnly)
		if len(out.Days) == 0 || out.Days[len(out.Days)-1].Date != date {
			out.Days = append(out.Days, DayFigures{Date: date})
		}
		d := &out.Days[len(out.Days)-1]
		d.Completed += f.Completed
		d.Failed += f.Failed
		d.Blessed += f.Blessed
		d.Written += f.Written
		d.Revised += f.Revised
	}
	for b := range names {
		if b != "" {
			out.Backends = append(out.Backends, b)
		}
	}
	sort.Strings(out.Backends)
	if out.Backends == nil {
		out.Backends = []string{}
	}
	// Every backend in every hour, so a chart's series line up.
	for i := range out.Hours {
		for _, b := range out.Backends {
			out.Hours[i].Requests[b] += 0
			out.Hours[i].QuotaUsed[b] += 0
		}
	}
	return out
}

func copyCounts(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// archivedHistory is the archive record: the hours that ended, kept
// beyond the WAL's compaction.
type archivedHistory struct {
	Hours []HourFigures `json:"hours"`
	// Through is the end of the last hour archived: the hours before it
	// are whole, with or without figures.
	Through time.Time `json:"through"`
}

// closedHours returns the hours that ended before cutoff, oldest first,
// for the archive.
func (h *history) closedHours(cutoff time.Time) archivedHistory {
	var keys []int64
	for k := range h.hours {
		if k < hourOf(cutoff) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	a := archivedHistory{Hours: make([]HourFigures, 0, len(keys)), Through: time.Unix(hourOf(cutoff)*3600, 0).UTC()}
	for _, k := range keys {
		a.Hours = append(a.Hours, *h.hours[k])
	}
	return a
}

// restore takes the archived hours; events before the hour after the
// last of them are then not counted again.
func (h *history) restore(a archivedHistory) {
	for _, f := range a.Hours {
		f := f
		if f.Requests == nil {
			f.Requests = map[string]int{}
		}
		if f.QuotaUsed == nil {
			f.QuotaUsed = map[string]int{}
		}
		k := hourOf(f.Start)
		h.hours[k] = &f
		h.archivedThrough = max(h.archivedThrough, k+1)
	}
	if !a.Through.IsZero() {
		h.archivedThrough = max(h.archivedThrough, hourOf(a.Through))
	}
}
