package control

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"fano/gateway"
	"fano/pb"
)

// AlertView is one alert of GET /api/alerts: a condition fano raised, what
// a person should do about it, and whether it is over.
type AlertView struct {
	ID      string    `json:"id"`
	Kind    string    `json:"kind"` // low_disk, no_llm, storage, stuck_task, backend_login, backend_credentials...
	Backend string    `json:"backend,omitempty"`
	TaskID  string    `json:"task_id,omitempty"`
	Message string    `json:"message"`
	Action  string    `json:"action,omitempty"` // what a person does about it; "" when fano handles it alone
	Person  bool      `json:"needs_person"`     // nothing fano does ends it
	Raised  time.Time `json:"raised_at"`
	// Resolved is when the condition ended (nil: still open), and how.
	Resolved   *time.Time `json:"resolved_at,omitempty"`
	Resolution string     `json:"resolution,omitempty"`
}

// Open says whether the alert's condition goes on.
func (a AlertView) Open() bool { return a.Resolved == nil }

// Alerts is GET /api/alerts: open and resolved alerts, newest first.
type Alerts struct {
	Open   int         `json:"open"`
	Alerts []AlertView `json:"alerts"`
}

// maxAlerts bounds the alerts kept (open ones are always kept).
const maxAlerts = 500

// alertBook keeps the alerts, keyed by the condition they are about (one
// open alert per key). Plain data, not safe for concurrent use.
type alertBook struct {
	all  []*AlertView // oldest first
	open map[string]*AlertView
	next int
}

func newAlertBook() *alertBook { return &alertBook{open: map[string]*AlertView{}} }

// change is what an observation did to the book: an alert raised or
// resolved (for the webhook), nil when nothing changed.
type change struct {
	Alert    AlertView
	Resolved bool
}

// raise opens an alert under key; an alert already open under key is
// updated in place (the same condition said again is not a new alert).
func (b *alertBook) raise(key string, a AlertView) *change {
	if cur, ok := b.open[key]; ok {
		if cur.Kind == a.Kind {
			cur.Message = a.Message
			return nil
		}
		b.resolve(key, a.Raised, "replaced by "+a.Kind)
	}
	b.next++
	a.ID = fmt.Sprintf("a%d-%d", a.Raised.Unix(), b.next)
	p := &a
	b.all = append(b.all, p)
	b.open[key] = p
	b.trim()
	return &change{Alert: a}
}

// resolve closes the alert open under key, if any.
func (b *alertBook) resolve(key string, at time.Time, how string) *change {
	cur, ok := b.open[key]
	if !ok {
		return nil
	}
	delete(b.open, key)
	t := at.UTC()
	cur.Resolved, cur.Resolution = &t, how
	return &change{Alert: *cur, Resolved: true}
}

func (b *alertBook) trim() {
	for len(b.all) > maxAlerts {
		i := slices.IndexFunc(b.all, func(a *AlertView) bool { return !a.Open() })
		if i < 0 {
			return
		}
		b.all = slices.Delete(b.all, i, i+1)
	}
}

// list returns the alerts newest first; openOnly drops the resolved.
func (b *alertBook) list(openOnly bool) Alerts {
	out := Alerts{Alerts: []AlertView{}}
	for i := len(b.all) - 1; i >= 0; i-- {
		a := *b.all[i]
		if a.Open() {
			out.Open++
		} else if openOnly {
			continue
		}
		out.Alerts = append(out.Alerts, a)
	}
	return out
}

// alertingState says whether a backend condition is worth an alert: those
// a person must end, and a backend that is down or whose breaker opened.
// Rate and quota windows are fano working at full use; a stalled answer
// or a page being restarted passes by itself within seconds.
func alertingState(st gateway.State) bool {
	return gateway.NeedsPerson(st) || st == gateway.StateDown || st == gateway.StateCircuitOpen
}

// observeCondition takes a backend's recorded condition (a WAL event).
func (b *alertBook) observeCondition(c *pb.BackendConditionRecorded, at time.Time) *change {
	key := "backend/" + c.GetBackend()
	st := gateway.State(c.GetState())
	if !alertingState(st) {
		return b.resolve(key, at, "the backend "+cmp.Or(string(st), "takes work again"))
	}
	msg := c.GetBackend() + ": " + strings.ReplaceAll(string(st), "_", " ")
	if r := strings.TrimSpace(c.GetReason()); r != "" {
		msg += " — " + r
	}
	return b.raise(key, AlertView{Kind: "backend_" + string(st), Backend: c.GetBackend(), Message: msg,
		Action: cmp.Or(gateway.Action(st, c.GetBackend()), "none: fano checks it again by itself"),
		Person: gateway.NeedsPerson(st), Raised: at.UTC()})
}

// healthActions says what a person does about the health monitor's alerts.
var healthActions = map[string]string{
	"low_disk":        "free disk space on the data directory's disk; work resumes by itself",
	"disk_unreadable": "check the data directory's file system",
	"storage":         "check the disk holding the WAL (full, read-only, failing); fano resumes by itself",
	"no_llm":          "none at first: fano reconnects by itself; if it stays, see the backends' reasons",
	"queue_depth":     "none required: the queue drains as backends work; add backends or lower intake if it keeps growing",
}

// healthNeedsPerson: the health alerts nothing in fano ends.
var healthNeedsPerson = map[string]bool{"low_disk": true, "disk_unreadable": true, "storage": true}

// observeHealth takes a health update (not in the WAL: the health monitor
// and the storage watch publish them).
func (b *alertBook) observeHealth(u *pb.StateUpdate) *change {
	if u.GetComponent() != "health" {
		return nil
	}
	d := u.GetData()
	at := time.Unix(0, u.GetAt()).UTC()
	kind := d["kind"]
	switch u.GetUpdateType() {
	case "alert":
	case "stuck_task":
		// How a stuck run was handled ends its alert.
		return b.resolve("stuck/"+d["task_id"], at, fmt.Sprintf("%s: %s", cmp.Or(d["action"], "handled"), cmp.Or(d["outcome"], d["error"])))
	default:
		return nil // reconnect results, status: the alert that follows says it
	}
	if kind == "" {
		return nil
	}
	key := "health/" + kind
	if kind == "stuck_task" {
		key = "stuck/" + d["task_id"]
	}
	if d["resolved"] == "true" {
		return b.resolve(key, at, d["message"])
	}
	action := healthActions[kind]
	if kind == "stuck_task" {
		action = "none: fano " + cmp.Or(d["action"], "pauses") + "s it by itself; look at its timeline if it happens often"
	}
	return b.raise(key, AlertView{Kind: kind, TaskID: d["task_id"], Message: d["message"], Action: action,
		Person: healthNeedsPerson[kind], Raised: at})
}

// archivedAlerts is the archive record of the book.
type archivedAlerts struct {
	Alerts []AlertView `json:"alerts"`
}

func (b *alertBook) snapshot() archivedAlerts {
	out := archivedAlerts{Alerts: make([]AlertView, 0, len(b.all))}
	for _, a := range b.all {
		out.Alerts = append(out.Alerts, *a)
	}
	return out
}

// restore takes archived alerts back. An alert open when fano stopped
// stays open until its condition is seen to end (or is raised again,
// which updates it).
func (b *alertBook) restore(a archivedAlerts) {
	for _, v := range a.Alerts {
		v := v
		b.all = append(b.all, &v)
		b.next++
		if v.Open() {
			key := "health/" + v.Kind
			switch {
			case v.Backend != "":
				key = "backend/" + v.Backend
			case v.Kind == "stuck_task":
				key = "stuck/" + v.TaskID
			}
			b.open[key] = &v
		}
	}
}

// has says whether an alert raised at at under key's backend or kind is
// already in the book (a WAL event replayed after the archive was written).
func (b *alertBook) has(kind, backend string, at time.Time) bool {
	for _, a := range b.all {
		if a.Kind == kind && a.Backend == backend && a.Raised.Equal(at) {
			return true
		}
	}
	return false
}
