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

// simulationHead is the page's head and the panel's navigation: the
// simulation page looks and links like the panel's views.
const simulationHead = `<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><meta name="color-scheme" content="light dark">
<title>fano — simulation</title><link rel="icon" href="data:,">
<link rel="stylesheet" href="/vendor/uplot.min.css"><link rel="stylesheet" href="/style.css"></head><body>
<header class="top"><a class="brand" href="/#/">fano</a><nav id="nav" aria-label="views">
<a href="/#/">Overview</a><a href="/#/tasks">Tasks</a><a href="/#/backends">Backends</a><a href="/#/alerts">Alerts</a>
<a href="/#/document">Document</a><a href="/#/history">History</a><a href="/simulation" aria-current="page">Simulation</a></nav></header><main>`

// simulationCSP lets the page load the panel's style and scripts, and
// the report's own files.
const simulationCSP = "default-src 'none'; img-src 'self' data:; style-src 'self'; style-src-attr 'unsafe-inline'; script-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// handleSimulation is the page: the goals, charts across the days (drawn
// in the browser from report.json), a line per day and the day's chart.
func (s *Server) handleSimulation(w http.ResponseWriter, r *http.Request) {
	var sum simulationSummary
	data, err := os.ReadFile(filepath.Join(s.simulationDir(), "report.json"))
	if err == nil {
		err = json.Unmarshal(data, &sum)
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", simulationCSP)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	var b strings.Builder
	e := html.EscapeString
	b.WriteString(simulationHead)
	if err != nil || s.opts.DataDir == "" {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(&b, "<h1 class=\"view-title\">Simulation</h1><section class=\"card\"><p>No simulation report in this data directory: run <code>fano simulate --data-dir %s</code>.</p></section></main></body></html>",
			e(s.opts.DataDir))
		_, _ = w.Write([]byte(b.String()))
		return
	}
	fmt.Fprintf(&b, "<h1 class=\"view-title\">Simulation: %d days</h1><section class=\"card\">", len(sum.Days))
	fmt.Fprintf(&b, "<p>Config %s, faults %s, seed %d. <a href=\"/simulation/report.md\">report.md</a> · <a href=\"/simulation/report.json\">report.json</a></p><h2>Goals</h2><ul class=\"plain goals\">",
		e(sum.Config), e(sum.Schedule), sum.Seed)
	for _, g := range sum.Goals {
		mark := `<span class="badge good">met</span>`
		if !g.OK {
			mark = `<span class="badge bad">not met</span>`
		}
		fmt.Fprintf(&b, "<li>%s <b>%s</b> — %s</li>", mark, e(g.Name), e(g.Detail))
	}
	b.WriteString(`</ul></section><section class="card"><h2>Quota used per day, by backend</h2><div id="sim-quota" class="chart"></div>
<h2>Blessed insights and sections per day</h2><div id="sim-written" class="chart"></div>
<h2>Tasks completed and failed per day</h2><div id="sim-tasks" class="chart"></div></section>`)
	b.WriteString(`<section class="card"><h2>Days</h2><div class="scroll"><table><thead><tr><th>day</th><th>blessed</th><th>sections written</th><th>revised</th><th>tasks done</th><th>failed</th><th>alerts</th><th>outage</th></tr></thead><tbody>`)
	for _, d := range sum.Days {
		outage := ""
		if d.Outage {
			outage = "yes"
		}
		fmt.Fprintf(&b, "<tr><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%s</td></tr>",
			d.Day, d.Blessed, d.SectionsWritten, d.SectionsRevised, d.TasksCompleted, d.TasksFailed, d.Alerts, outage)
	}
	b.WriteString("</tbody></table></div></section><section class=\"card\"><h2>Each day in detail</h2>")
	for _, d := range sum.Days {
		fmt.Fprintf(&b, "<details><summary>Day %d</summary><img class=\"sim-day\" src=\"/simulation/day-%02d.svg\" alt=\"day %d\"></details>", d.Day, d.Day, d.Day)
	}
	b.WriteString(`</section></main><script src="/vendor/uplot.min.js"></script><script src="/simulation.js"></script></body></html>`)
	_, _ = w.Write([]byte(b.String()))
}
