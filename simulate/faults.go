package simulate

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Fault kinds a schedule may name. Backend faults take a backend; the
// last three are fano's own.
const (
	KindUsageCap     = "usage_cap"     // the backend refuses as capped for the period
	KindStorm        = "storm_429"     // a per-minute window below the learned rate for the period
	KindTransient    = "transient"     // a share of requests fail with a server error for the period
	KindHang         = "hang"          // requests never answer for the period
	KindLoginExpired = "login_expired" // a login wall until a `login` entry (or the period's end)
	KindLogin        = "login"         // the simulated `fano login`: the wall goes
	KindKeyRevoked   = "key_revoked"   // 401 until key_restored (or the period's end)
	KindKeyRestored  = "key_restored"
	KindBrowserCrash = "browser_crash" // requests fail as the page is gone while it restarts
	KindRestart      = "restart"       // fano stops (orderly) and starts again on the same WAL
	KindKill         = "kill"          // fano stops without shutdown (a SIGKILL) and starts again
	KindDiskFull     = "disk_full"     // the disk refuses writes for the period
)

var backendKinds = map[string]bool{KindUsageCap: true, KindStorm: true, KindTransient: true, KindHang: true,
	KindLoginExpired: true, KindLogin: true, KindKeyRevoked: true, KindKeyRestored: true, KindBrowserCrash: true}
var fanoKinds = map[string]bool{KindRestart: true, KindKill: true, KindDiskFull: true}

// needsFor are the kinds that last a period: `for` is required.
var needsFor = map[string]bool{KindUsageCap: true, KindStorm: true, KindTransient: true, KindHang: true, KindDiskFull: true}

// Schedule is a parsed fault schedule.
type Schedule struct {
	Name    string
	Entries []Entry
	// SeedsPerDay is the workload: the explorer questions every day
	// starts with, the simulated user's new ones topping up the config's
	// own on day 1 (0: only the config's seeds).
	SeedsPerDay int
}

// Entry is one line of the schedule.
type Entry struct {
	Line    int
	Kind    string
	Backend string        // a backend name, "all", or "@N" (the N-th enabled backend by name, from 1)
	Day     int           // 1-based; 0 = every day
	At      time.Duration // time of day
	Every   time.Duration // repeat within the day (0 = once)
	For     time.Duration // how long it lasts (0 = an instant, or until the matching fix)
	Rate    float64       // transient: share of requests failing
	PerMin  int           // storm_429: requests per minute let through
}

// Fault is one occurrence of an entry, placed on the virtual timeline.
type Fault struct {
	Entry
	Start, End time.Time // End == Start: an instant
	Backends   []string  // resolved
}

//go:embed default_faults.yaml
var defaultSchedule []byte

// DefaultSchedule returns the schedule fano ships with.
func DefaultSchedule() *Schedule {
	s, err := ParseSchedule("built-in default_faults.yaml", defaultSchedule)
	if err != nil {
		panic("simulate: built-in fault schedule is invalid: " + err.Error())
	}
	return s
}

// DefaultScheduleYAML is the text of the built-in schedule.
func DefaultScheduleYAML() []byte { return bytes.Clone(defaultSchedule) }

// LoadSchedule reads a schedule file.
func LoadSchedule(path string) (*Schedule, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("fault schedule: %w", err)
	}
	return ParseSchedule(path, data)
}

type rawSchedule struct {
	SeedsPerDay int        `yaml:"seeds_per_day"`
	Faults      []rawEntry `yaml:"faults"`
}

type rawEntry struct {
	Kind      string  `yaml:"kind"`
	Backend   string  `yaml:"backend"`
	Day       int     `yaml:"day"`
	At        string  `yaml:"at"`
	Every     string  `yaml:"every"`
	For       string  `yaml:"for"`
	Rate      float64 `yaml:"rate"`
	PerMinute int     `yaml:"per_minute"`
}

// ParseSchedule parses and validates a schedule; every problem names
// name:line and the field.
func ParseSchedule(name string, data []byte) (*Schedule, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var raw rawSchedule
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&raw); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	lines := entryLines(&doc)
	s := &Schedule{Name: name, SeedsPerDay: raw.SeedsPerDay}
	var errs []error
	if raw.SeedsPerDay < 0 {
		errs = append(errs, fmt.Errorf("%s:%d: seeds_per_day: %d is negative", name, fieldLine(&doc, "seeds_per_day"), raw.SeedsPerDay))
	}
	for i, r := range raw.Faults {
		line := 0
		if i < len(lines) {
			line = lines[i]
		}
		e, err := r.entry(line)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: faults[%d].%w", name, line, i, err))
			continue
		}
		s.Entries = append(s.Entries, e)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

// fieldError names the field a problem is in (the caller prefixes the entry).
type fieldError struct {
	field string
	msg   string
}

func (e *fieldError) Error() string { return e.field + ": " + e.msg }

func (r rawEntry) entry(line int) (Entry, error) {
	e := Entry{Line: line, Kind: r.Kind, Backend: r.Backend, Day: r.Day, Rate: r.Rate, PerMin: r.PerMinute}
	bad := func(field, format string, args ...any) (Entry, error) {
		return Entry{}, &fieldError{field, fmt.Sprintf(format, args...)}
	}
	switch {
	case r.Kind == "":
		return bad("kind", "missing (one of %s)", kindList())
	case backendKinds[r.Kind]:
		if r.Backend == "" {
			return bad("backend", "%s needs a backend: a name, \"all\" or \"@N\"", r.Kind)
		}
		if strings.HasPrefix(r.Backend, "@") {
			if n, err := strconv.Atoi(r.Backend[1:]); err != nil || n < 1 {
				return bad("backend", "%q: @N needs N >= 1", r.Backend)
			}
		}
	case fanoKinds[r.Kind]:
		if r.Backend != "" {
			return bad("backend", "%s is a fault of fano itself and takes no backend", r.Kind)
		}
	default:
		return bad("kind", "unknown kind %q (one of %s)", r.Kind, kindList())
	}
	if r.Day < 0 {
		return bad("day", "%d: days count from 1 (leave it out for every day)", r.Day)
	}
	var err error
	if e.At, err = clockTime(r.At); err != nil {
		return bad("at", "%v", err)
	}
	if e.Every, err = duration(r.Every); err != nil {
		return bad("every", "%v", err)
	}
	if e.For, err = duration(r.For); err != nil {
		return bad("for", "%v", err)
	}
	if e.Every > 0 && e.Every < time.Minute {
		return bad("every", "%s: at least 1m", r.Every)
	}
	if needsFor[r.Kind] && e.For <= 0 {
		return bad("for", "%s lasts a period: give one (e.g. for: 30m)", r.Kind)
	}
	if e.Every > 0 && e.For >= e.Every {
		return bad("for", "%s is not shorter than every: %s", r.For, r.Every)
	}
	switch r.Kind {
	case KindTransient:
		if r.Rate <= 0 || r.Rate > 1 {
			return bad("rate", "%v: a share of requests in (0, 1]", r.Rate)
		}
	case KindStorm:
		if r.PerMinute < 0 {
			return bad("per_minute", "%d is negative", r.PerMinute)
		}
	default:
		if r.Rate != 0 {
			return bad("rate", "only transient takes a rate")
		}
		if r.PerMinute != 0 {
			return bad("per_minute", "only storm_429 takes per_minute")
		}
	}
	return e, nil
}

func kindList() string {
	var all []string
	for k := range backendKinds {
		all = append(all, k)
	}
	for k := range fanoKinds {
		all = append(all, k)
	}
	sort.Strings(all)
	return strings.Join(all, ", ")
}

// clockTime parses "HH:MM" (empty: midnight).
func clockTime(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	h, m, ok := strings.Cut(s, ":")
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if !ok || err1 != nil || err2 != nil || hh < 0 || hh > 23 || mm < 0 || mm > 59 {
		return 0, fmt.Errorf("%q: a time of day as HH:MM", s)
	}
	return time.Duration(hh)*time.Hour + time.Duration(mm)*time.Minute, nil
}

func duration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q: a duration such as 30m or 6h", s)
	}
	return d, nil
}

// entryLines returns the line of each item under faults:.
func entryLines(doc *yaml.Node) []int {
	var out []int
	if len(doc.Content) == 0 {
		return nil
	}
	root := doc.Content[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "faults" {
			for _, n := range root.Content[i+1].Content {
				out = append(out, n.Line)
			}
		}
	}
	return out
}

func fieldLine(doc *yaml.Node, key string) int {
	if len(doc.Content) == 0 {
		return 0
	}
	root := doc.Content[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == key {
			return root.Content[i].Line
		}
	}
	return 0
}

// Expand places the schedule on days days from start (midnight of day 1),
// resolving backend selectors against the enabled backends (sorted). An
// entry naming a backend the config lacks is an error naming its line.
func (s *Schedule) Expand(start time.Time, days int, backends []string) ([]Fault, error) {
	names := append([]string(nil), backends...)
	sort.Strings(names)
	var out []Fault
	for _, e := range s.Entries {
		var targets []string
		switch {
		case fanoKinds[e.Kind]:
		case e.Backend == "all":
			targets = names
		case strings.HasPrefix(e.Backend, "@"):
			n, _ := strconv.Atoi(e.Backend[1:])
			if len(names) == 0 {
				continue
			}
			targets = []string{names[(n-1)%len(names)]}
		default:
			if !contains(names, e.Backend) {
				return nil, fmt.Errorf("%s:%d: backend: %q is not an enabled backend of the config (%s)", s.Name, e.Line, e.Backend, strings.Join(names, ", "))
			}
			targets = []string{e.Backend}
		}
		for d := 1; d <= days; d++ {
			if e.Day != 0 && e.Day != d {
				continue
			}
			dayStart := start.Add(time.Duration(d-1) * 24 * time.Hour)
			for at := e.At; at < 24*time.Hour; at += e.Every {
				st := dayStart.Add(at)
				out = append(out, Fault{Entry: e, Start: st, End: st.Add(e.For), Backends: targets})
				if e.Every <= 0 {
					break
				}
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out, nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
