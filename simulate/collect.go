package simulate

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"fano/actors"
	"fano/actors/allocator"
	"fano/gateway"
	"fano/pb"

	"google.golang.org/protobuf/encoding/protojson"
)

// collector turns the system's notices and the driver's samples into the
// report's figures. notice runs in actor goroutines: it only counts.
type collector struct {
	start  time.Time
	names  []string
	byName map[string]*Backend
	count  atomic.Int64 // notices seen: the driver's sign of activity
	// raised counts alerts recorded: with the WAL's events, what a step
	// decided (see driver.progress).
	raised atomic.Int64

	mu      sync.Mutex
	days    []DayReport
	runtime []RuntimeDay
	alerts  []Alert
	failed  []FailedTask
	events  []FaultEvent
	lastQ   map[string]allocator.BackendStatus
	trace   io.Writer // Options.Trace, else FANO_SIMULATE_EVENTS's file; under mu
}

// traceTime is the virtual time of a trace line.
const traceTime = "01-02T15:04:05.000000000"

func newCollector(start time.Time, days int, names []string, byName map[string]*Backend) *collector {
	c := &collector{start: start, names: names, byName: byName, lastQ: map[string]allocator.BackendStatus{}}
	if os.Getenv("FANO_SIMULATE_HEAPPROFILES") != "" {
		// The day's profiles are for finding what grows by some KB a day:
		// sample allocations finer than the default one per 512 KB.
		runtime.MemProfileRate = 8 << 10
	}
	for d := 1; d <= days; d++ {
		day := DayReport{Day: d, Requests: map[string]int{}, QuotaUsed: map[string]int{}, Usable: map[string]float64{},
			StateMinutes: map[string]map[string]int{}, WorkHoursBy: map[string]int{}}
		for _, n := range names {
			day.StateMinutes[n] = map[string]int{}
		}
		c.days = append(c.days, day)
		c.runtime = append(c.runtime, RuntimeDay{Day: d})
	}
	return c
}

// dayOf returns the 1-based day holding t (0 before the start, clamped
// to the last day at the end).
func (c *collector) dayOf(t time.Time) int {
	if t.Before(c.start) {
		return 0
	}
	d := int(t.Sub(c.start)/(24*time.Hour)) + 1
	return d
}

func (c *collector) day(t time.Time) *DayReport {
	d := c.dayOf(t)
	if d < 1 {
		d = 1
	}
	if d > len(c.days) {
		d = len(c.days)
	}
	return &c.days[d-1]
}

type moduleData struct {
	Outcome string `json:"outcome"`
	Created bool   `json:"created"`
	Verdict string `json:"verdict"`
}

// observe counts an applied event (actors.Options.Observe).
func (c *collector) observe(owner string, e *pb.Event) {
	c.count.Add(1)
	if e == nil {
		return
	}
	at := time.Unix(0, e.At).UTC()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.trace != nil {
		fmt.Fprintf(c.trace, "%s %s %s\n", at.Format(traceTime), owner, eventLine(e))
	}
	d := c.day(at)
	if e.GetTaskForgotten() == nil {
		// A finished task leaving memory after its retention is
		// housekeeping, not the cost of its requests.
		d.WALEntries++
	}
	switch {
	case e.GetQuotaUsed() != nil:
		d.QuotaUsed[e.GetQuotaUsed().Backend]++
	case e.GetQuotaReleased() != nil:
		d.QuotaUsed[e.GetQuotaReleased().Backend]--
	case e.GetLlmRequestStarted() != nil:
		d.Requests[e.GetLlmRequestStarted().Llm]++
	case e.GetLlmRequestFailed() != nil:
		f := e.GetLlmRequestFailed()
		if f.NotSent {
			d.Requests[f.Llm]-- // refused before it left (no quota, an open circuit)
		} else if f.Kind != "cancelled" {
			d.RequestsFailed++
		}
	case e.GetTaskCompleted() != nil:
		d.TasksCompleted++
	case e.GetTaskFailed() != nil:
		f := e.GetTaskFailed()
		d.TasksFailed++
		ft := FailedTask{Day: d.Day, At: at, Task: f.TaskId, Reason: f.Error, BackendLevel: backendLevel(f.Error)}
		if ft.BackendLevel {
			d.TasksFailedBackend++
		}
		c.failed = append(c.failed, ft)
	case e.GetModuleEvent() != nil:
		me := e.GetModuleEvent()
		var md moduleData
		switch me.Type {
		case "insight_decided":
			if json.Unmarshal(me.Data, &md) == nil && md.Outcome == "blessed" {
				d.Blessed++
			}
		case "incorporated":
			if json.Unmarshal(me.Data, &md) == nil {
				if md.Created {
					d.SectionsWritten++
				} else {
					d.SectionsRevised++
				}
			}
		case "revision_decided":
			if json.Unmarshal(me.Data, &md) == nil && md.Verdict != "" && md.Verdict != "reject" {
				d.SectionsRevised++
			}
		}
	}
}

// eventTrace, if set (FANO_SIMULATE_EVENTS=file), is the trace of a run
// without Options.Trace (fano simulate).
var eventTrace = func() *os.File {
	if p := os.Getenv("FANO_SIMULATE_EVENTS"); p != "" {
		if f, err := os.Create(p); err == nil {
			return f
		}
	}
	return nil
}()

func eventLine(e *pb.Event) string {
	b, _ := protojson.Marshal(e)
	return string(b)
}

// backendLevel tells a task failure caused by a backend (its errors,
// limits, login, key) from one of the task itself (a bad answer).
func backendLevel(reason string) bool {
	r := strings.ToLower(reason)
	for _, w := range []string{"rate limit", "transient", "unavailable", "login", "credential", "401", "403", "hang", "hung", "timeout",
		"timed out", "crash", "circuit", "quota", "502", "503", "429", "page gone", "deadline", "no backend"} {
		if strings.Contains(r, w) {
			return true
		}
	}
	return false
}

// update takes the notices that are not events: alerts.
func (c *collector) update(n actors.Notice) {
	u := n.Update
	if u == nil {
		return
	}
	c.count.Add(1)
	if u.UpdateType != "alert" && u.Component != "health" {
		return
	}
	if u.UpdateType == "metrics" || u.UpdateType == "status" {
		return
	}
	at := time.Unix(0, u.At).UTC()
	a := Alert{At: at, Component: u.Component, Kind: u.Data["kind"], Backend: u.Data["backend"], State: u.Data["state"],
		Message: u.Data["message"], Resolved: u.Data["resolved"] == "true"}
	if a.Kind == "" {
		a.Kind = u.UpdateType
	}
	if a.Message == "" {
		a.Message = u.Data["reason"]
	}
	if a.Component == "backend" && a.Kind == "alert" {
		a.Kind = "backend_" + a.State
	}
	a.Action = needsPerson(a)
	c.mu.Lock()
	defer c.mu.Unlock()
	a.Day = c.dayOf(at)
	c.alerts = append(c.alerts, a)
	c.raised.Add(1)
	if !a.Resolved {
		c.day(at).Alerts++
	}
}

// needsPerson says whether an alert asks for a person: a login wall or a
// refused key, spent credits, a bot check are ended only by one (the
// condition table's person class); what fano resolves by itself is not.
func needsPerson(a Alert) bool {
	if a.Resolved {
		return false
	}
	return gateway.NeedsPerson(gateway.State(a.State))
}

func (c *collector) event(at time.Time, kind, target string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ev := FaultEvent{Day: c.dayOf(at), At: at, Kind: kind, Target: target}
	if err != nil {
		ev.Error = err.Error()
	}
	c.events = append(c.events, ev)
}

func (c *collector) seeds(at time.Time, n int) {
	c.mu.Lock()
	c.day(at).SeedsAdded += n
	c.mu.Unlock()
}

// sample is taken every virtual minute: each backend's state for the
// minute and its usable budget while it could serve; on the hour the
// queue, and at the end of a day the runtime figures.
func (c *collector) sample(now time.Time, sys *actors.System, every time.Duration) {
	if !now.Before(c.start.Add(time.Duration(len(c.days)) * 24 * time.Hour)) {
		c.sampleRuntime(now, sys, len(c.days))
		return
	}
	qs := sys.Quotas()
	mins := int(every / time.Minute)
	c.mu.Lock()
	d := c.day(now)
	for _, q := range qs {
		state := q.State
		if state == "" {
			state = "ready"
		}
		if m := d.StateMinutes[q.Name]; m != nil {
			m[state] += mins
		}
		if serving(state) {
			d.Usable[q.Name] += float64(q.Usable) * float64(mins) / 60
		}
	}
	c.mu.Unlock()
	if end := now.Add(every); end.Hour() != now.Hour() {
		// Work waiting: tasks queued for an LLM that need no deep mode
		// (deep mode has its own daily budget), paused ones not counted;
		// per backend, those it could take.
		waiting := sys.Tasks(func(t *pb.Task) bool {
			return (t.State == pb.TaskState_TASK_STATE_PENDING || t.State == pb.TaskState_TASK_STATE_READY) && !t.RequiresDeepMode
		}, 0)
		c.mu.Lock()
		if len(waiting) > d.QueueMax {
			d.QueueMax = len(waiting)
		}
		if len(waiting) > 0 {
			d.WorkHours++
		}
		for _, name := range c.names {
			if slices.ContainsFunc(waiting, func(t *pb.Task) bool { return couldTake(t, name) }) {
				d.WorkHoursBy[name]++
			}
		}
		d.QueueEnd = len(waiting)
		c.mu.Unlock()
	}
	if end := now.Add(every); end.Day() != now.Day() {
		c.sampleRuntime(now, sys, d.Day)
	}
}

// couldTake: backend may run t (its pin, or no pin and not excluded).
func couldTake(t *pb.Task, backend string) bool {
	if p := t.GetLlmPreference(); p != "" {
		return p == backend
	}
	return !slices.Contains(t.GetLlmExclude(), backend)
}

// serving: states in which a backend could take work if it had quota.
func serving(state string) bool {
	switch state {
	case "ready", "exhausted", "paced":
		return true
	}
	return false
}

func (c *collector) sampleRuntime(now time.Time, sys *actors.System, day int) {
	// The live heap: what survives a collection. Twice, because the
	// first collection only moves sync.Pool caches (encoding buffers the
	// size of the last snapshot or document) to a victim cache, which
	// the second frees: they are not held by anything.
	runtime.GC()
	runtime.GC()
	if dir := os.Getenv("FANO_SIMULATE_HEAPPROFILES"); dir != "" {
		// For finding what grows: a heap profile at the end of every day.
		if f, err := os.Create(filepath.Join(dir, fmt.Sprintf("heap-day%02d.prof", day))); err == nil {
			_ = pprof.WriteHeapProfile(f)
			_ = f.Close()
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	var walBytes int64
	if st, err := sys.Log().Stats(); err == nil {
		walBytes = st.Bytes
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.runtime[day-1] = RuntimeDay{Day: day, HeapMB: float64(ms.HeapAlloc) / (1 << 20), Goroutines: runtime.NumGoroutine(),
		WALMB: float64(walBytes) / (1 << 20), OutputMB: float64(treeBytes(outputDir(sys))) / (1 << 20)}
}

// outputDir is the run's output directory: "output" beside the WAL in the
// data directory, as fano lays it out ("" if the WAL has no path).
func outputDir(sys *actors.System) string {
	if p, ok := sys.Log().(interface{ Path() string }); ok && p.Path() != "" {
		return filepath.Join(filepath.Dir(p.Path()), "output")
	}
	return ""
}

// treeBytes is the size of the regular files under dir (0 if none).
func treeBytes(dir string) int64 {
	if dir == "" {
		return 0
	}
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return nil
		}
		if fi, err := e.Info(); err == nil {
			n += fi.Size()
		}
		return nil
	})
	return n
}

func (c *collector) dayReport(day int) DayReport {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.days[day-1]
}

func (c *collector) report() *Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := &Report{Days: append([]DayReport(nil), c.days...), Alerts: append([]Alert(nil), c.alerts...),
		Failed: append([]FailedTask(nil), c.failed...), Events: append([]FaultEvent(nil), c.events...),
		Runtime: RuntimeFigures{Days: append([]RuntimeDay(nil), c.runtime...)}}
	// Alerts raised at one instant by different goroutines (the health
	// monitor's check, the storage watch) arrive in the order the OS ran
	// them: within an instant they are listed in a fixed order instead.
	sort.SliceStable(r.Alerts, func(i, j int) bool {
		a, b := r.Alerts[i], r.Alerts[j]
		if !a.At.Equal(b.At) {
			return a.At.Before(b.At)
		}
		return strings.Join([]string{a.Component, a.Kind, a.Backend, a.State, a.Message, fmt.Sprint(a.Resolved)}, "\x00") <
			strings.Join([]string{b.Component, b.Kind, b.Backend, b.State, b.Message, fmt.Sprint(b.Resolved)}, "\x00")
	})
	for _, name := range c.names {
		bt := BackendTotals{Name: name, Kind: c.byName[name].Kind(), States: map[string]int{}}
		for _, d := range r.Days {
			bt.Requests += d.Requests[name]
			bt.QuotaUsed += d.QuotaUsed[name]
			bt.Usable += d.Usable[name]
			for s, m := range d.StateMinutes[name] {
				bt.States[s] += m
			}
		}
		fc := c.byName[name].Counts()
		bt.Refused = fc
		r.Backends = append(r.Backends, bt)
	}
	sort.SliceStable(r.Alerts, func(i, j int) bool { return r.Alerts[i].At.Before(r.Alerts[j].At) })
	return r
}

func (d DayReport) String() string {
	used, usable := 0, 0.0
	for _, n := range d.QuotaUsed {
		used += n
	}
	for _, u := range d.Usable {
		usable += u
	}
	return fmt.Sprintf("day %d: %d blessed, %d sections written, %d revised, %d tasks completed, %d failed, quota %d of %.0f usable",
		d.Day, d.Blessed, d.SectionsWritten, d.SectionsRevised, d.TasksCompleted, d.TasksFailed, used, usable)
}
