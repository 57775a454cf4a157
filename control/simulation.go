package control

import (
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// The report of `fano simulate` in DataDir/simulation, read-only: a page
// with the goals and the days, and the report's own files.

// simulationFile names the files the panel serves from DataDir/simulation.
var simulationFile = regexp.MustCompile(`^(report\.md|report\.json|day-[0-9]{2,3}\.svg)$`)

func (s *Server) simulationDir() string { return filepath.Join(s.opts.DataDir, "simulation") }

// handleSimulationFile serves report.md, report.json or a day's chart.
func (s *Server) handleSimulationFile(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !simulationFile.MatchString(name) || s.opts.DataDir == "" {
		writeError(w, http.StatusNotFound, "no simulation file %q (report.md, report.json, day-NN.svg)", name)
		return
	}
	data, err := os.ReadFile(filepath.Join(s.simulationDir(), name))
	if err != nil {
		writeError(w, http.StatusNotFound, "simulation file %s: %v", name, err)
		return
	}
	switch filepath.Ext(name) {
	case ".svg":
		w.Header().Set("Content-Type", "image/svg+xml")
	case ".json":
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
	default:
		w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	_, _ = w.Write(data)
}

// simulationSummary is what the page needs of report.json.
type simulationSummary struct {
	Config   string `json:"config"`
	Schedule string `json:"schedule"`
	Seed     int64  `json:"seed"`
	Goals    []struct {
		Name   string `json:"name"`
		OK     bool   `json:"ok"`
		Detail string `json:"detail"`
	} `json:"goals"`
	Days []struct {
		Day             int  `json:"day"`
		Blessed         int  `json:"insights_blessed"`
		SectionsWritten int  `json:"sections_written"`
		SectionsRevised int  `json:"sections_revised"`
		TasksCompleted  int  `json:"tasks_completed"`
		TasksFailed     int  `json:"tasks_failed"`
		Alerts          int  `json:"alerts"`
		Outage          bool `json:"outage"`
	} `json:"days"`
}

// handleSimulation is the page: the goals, a line per day and its chart.
func (s *Server) handleSimulation(w http.ResponseWriter, r *http.Request) {
	var sum simulationSummary
	data, err := os.ReadFile(filepath.Join(s.simulationDir(), "report.json"))
	if err == nil {
		err = json.Unmarshal(data, &sum)
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; img-src 'self'; style-src 'unsafe-inline'")
	if err != nil || s.opts.DataDir == "" {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, "<!doctype html><title>fano simulate</title><p>No simulation report in this data directory: run <code>fano simulate --data-dir %s</code>.</p>",
			html.EscapeString(s.opts.DataDir))
		return
	}
	var b strings.Builder
	e := html.EscapeString
	fmt.Fprintf(&b, "<!doctype html><meta charset=utf-8><title>fano simulate</title><body style=\"font-family:sans-serif\"><h1>fano simulate: %d days</h1>", len(sum.Days))
	fmt.Fprintf(&b, "<p>Config %s, faults %s, seed %d. <a href=\"/simulation/report.md\">report.md</a> · <a href=\"/simulation/report.json\">report.json</a></p><h2>Goals</h2><ul>",
		e(sum.Config), e(sum.Schedule), sum.Seed)
	for _, g := range sum.Goals {
		mark := "ok"
		if !g.OK {
			mark = "<b>FAILED</b>"
		}
		fmt.Fprintf(&b, "<li>%s: %s — %s</li>", e(g.Name), mark, e(g.Detail))
	}
	b.WriteString("</ul><h2>Days</h2><table border=1 cellpadding=3><tr><th>day</th><th>blessed</th><th>sections written</th><th>revised</th><th>tasks done</th><th>failed</th><th>alerts</th><th>outage</th></tr>")
	for _, d := range sum.Days {
		fmt.Fprintf(&b, "<tr><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%v</td></tr>",
			d.Day, d.Blessed, d.SectionsWritten, d.SectionsRevised, d.TasksCompleted, d.TasksFailed, d.Alerts, d.Outage)
	}
	b.WriteString("</table>")
	for _, d := range sum.Days {
		fmt.Fprintf(&b, "<h3>Day %d</h3><img src=\"/simulation/day-%02d.svg\" alt=\"day %d\">", d.Day, d.Day, d.Day)
	}
	b.WriteString("</body>")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write([]byte(b.String()))
}
