package control

import (
	"net/http"
	"strconv"
	"strings"

	"fano/pb"
)

// The endpoints behind the panel's views that the first API did not have:
// alerts, history, a page of tasks with its total, a task's timeline.

// maxHistoryHours is the history kept: a fortnight.
const maxHistoryHours = 14 * 24

// handleAlerts serves GET /api/alerts[?open=true]: newest first.
func (s *Server) handleAlerts(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k := range q {
		if k != "open" {
			writeError(w, http.StatusBadRequest, "unknown query parameter %q (use open=true for the open alerts only)", k)
			return
		}
	}
	openOnly := false
	if v := q.Get("open"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, "query parameter \"open\": must be true or false (is %q)", v)
			return
		}
		openOnly = b
	}
	writeJSON(w, http.StatusOK, s.obs.alertList(openOnly))
}

// handleHistory serves GET /api/history?hours=N (default and most: 336).
func (s *Server) handleHistory(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k := range q {
		if k != "hours" {
			writeError(w, http.StatusBadRequest, "unknown query parameter %q (use hours)", k)
			return
		}
	}
	hours := maxHistoryHours
	if v := q.Get("hours"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxHistoryHours {
			writeError(w, http.StatusBadRequest, "query parameter \"hours\": must be a whole number from 1 to %d (is %q)", maxHistoryHours, v)
			return
		}
		hours = n
	}
	var names []string
	for _, b := range s.sys.Quotas() {
		names = append(names, b.Name)
	}
	writeJSON(w, http.StatusOK, s.obs.historyView(hours, names))
}

// TaskPage is GET /api/tasks: one page of the tasks that match, newest
// first, with how many match in all.
type TaskPage struct {
	Total  int        `json:"total"`
	Offset int        `json:"offset"`
	Limit  int        `json:"limit"`
	Tasks  []TaskView `json:"tasks"`
}

// handleTaskPage serves GET /api/tasks?module=&state=&q=&offset=&limit=.
// q matches the task id or subject (case-insensitive).
func (s *Server) handleTaskPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k := range q {
		switch k {
		case "module", "state", "q", "offset", "limit":
		default:
			writeError(w, http.StatusBadRequest, "unknown query parameter %q (use module, state, q, offset, limit)", k)
			return
		}
	}
	module, text := q.Get("module"), strings.ToLower(strings.TrimSpace(q.Get("q")))
	var state pb.TaskState
	if v := q.Get("state"); v != "" {
		st, ok := ParseState(v)
		if !ok {
			writeError(w, http.StatusBadRequest, "query parameter \"state\": unknown task state %q (use pending, ready, running, paused, completed, failed or cancelled)", v)
			return
		}
		state = st
	}
	limit, offset := defaultLimit, 0
	for name, dst := range map[string]*int{"limit": &limit, "offset": &offset} {
		v := q.Get(name)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		lo, hi := 0, maxLimit*100
		if name == "limit" {
			lo, hi = 1, maxLimit
		}
		if err != nil || n < lo || n > hi {
			writeError(w, http.StatusBadRequest, "query parameter %q: must be a whole number from %d to %d (is %q)", name, lo, hi, v)
			return
		}
		*dst = n
	}
	match := func(t *pb.Task) bool {
		if (module != "" && t.GetModule() != module) || (state != 0 && t.GetState() != state) {
			return false
		}
		return text == "" || strings.Contains(strings.ToLower(t.GetId()), text) || strings.Contains(strings.ToLower(t.GetSubject()), text)
	}
	tasks, total := s.pageOfTasks(match, offset, limit)
	writeJSON(w, http.StatusOK, TaskPage{Total: total, Offset: offset, Limit: limit, Tasks: tasks})
}

// TaskDetail is GET /api/orchestrator/task/{id}: the task with its
// conversation and, while the panel remembers it, its timeline.
type TaskDetail struct {
	TaskView
	Timeline []Step `json:"timeline"`
	// TimelineDropped counts steps left out of the middle of a long one.
	TimelineDropped int `json:"timeline_dropped,omitempty"`
}
