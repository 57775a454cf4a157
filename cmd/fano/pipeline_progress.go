package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"fano/modules/pipeline"
	"fano/pb"
)

// progressPath is where a running pipeline leaves its live count.
func progressPath(dataDir string) string { return filepath.Join(dataDir, "progress.json") }

func printSummary(w io.Writer, s pipeline.Summary, dir string) {
	fmt.Fprintf(w, "pipeline %s: %d of %d items done, %d failed; %d requests, cost $%.4f", s.Pipeline, s.ItemsDone, s.Items, s.ItemsFailed, s.Requests, s.CostUSD)
	if s.MaxCostUSD > 0 {
		fmt.Fprintf(w, " of max $%.4f", s.MaxCostUSD)
	}
	fmt.Fprintln(w)
	if s.Stop != nil {
		fmt.Fprintf(w, "stop: %s (exit %d)", s.Stop.Reason, s.Stop.ExitCode)
		if s.Stop.Detail != "" {
			fmt.Fprintf(w, ": %s", s.Stop.Detail)
		}
		fmt.Fprintln(w)
	} else if s.Stopped != "" {
		fmt.Fprintf(w, "stopped: %s\n", s.Stopped)
	}
	if s.Waiting != "" {
		fmt.Fprintf(w, "waiting: %s; goes on at %s\n", s.Waiting, s.WaitingUntil)
	}
	order := s.StepOrder
	if len(order) == 0 {
		order = sortedKeys(s.Steps)
	}
	for _, step := range order {
		for _, model := range sortedKeys(s.Steps[step]) {
			c := s.Steps[step][model]
			fmt.Fprintf(w, "  %-20s %-16s ok %6d  failed %6d  pending %6d  invalid %5d  $%.4f", step, model, c.OK, c.Failed, c.Pending, c.Invalid, c.CostUSD)
			if c.Skipped > 0 {
				fmt.Fprintf(w, "  skipped %d", c.Skipped)
			}
			fmt.Fprintln(w)
		}
	}
	if dir != "" {
		fmt.Fprintf(w, "results: %s\n", filepath.Join(dir, "output", pipeline.ResultsFile))
	}
}

// progressBar draws one line on a terminal: bar, count, rate, ETA.
type progressBar struct {
	w     io.Writer
	start time.Time
	first int
}

// runProgress is one look at a running pipeline.
type runProgress struct {
	done, total int
	waiting     bool // only the daily budget holds work back
	waitWhy     string
	waitUntil   time.Time
	// steps: each llm step and model's pairs, with rate and ETA (nil:
	// not counted at this look).
	steps []pipeline.StepProgress
}

// requests sums the steps' pairs: finished (done or failed) and all.
func (p runProgress) requests() (finished, all int) {
	for _, s := range p.steps {
		finished += s.Done + s.Failed
		all += s.Done + s.Failed + s.Pending
	}
	return finished, all
}

func (b *progressBar) draw(p runProgress) {
	done, total := p.done, p.total
	const width = 30
	frac := 0.0
	if total > 0 {
		frac = float64(done) / float64(total)
	}
	fill := int(frac * width)
	el := time.Since(b.start).Seconds()
	rate := 0.0
	if el > 0 {
		rate = float64(done-b.first) / el
	}
	eta := "--:--"
	if rate > 0 {
		eta = (time.Duration(float64(total-done)/rate) * time.Second).Round(time.Second).String()
	}
	if p.waiting {
		fmt.Fprintf(b.w, "\r[%s%s] %d/%d items  waiting for the daily budget until %s   ", strings.Repeat("#", fill), strings.Repeat(".", width-fill),
			done, total, p.waitUntil.Format("2006-01-02 15:04 MST"))
		return
	}
	if len(p.steps) > 1 {
		// Several steps or models: items finish late, the pairs show the
		// work; the step with the longest way to go sets the ETA.
		fin, all := p.requests()
		slow := p.steps[0]
		for _, s := range p.steps {
			if s.ETASeconds < 0 || s.ETASeconds > slow.ETASeconds && slow.ETASeconds >= 0 {
				slow = s
			}
		}
		frac = 0
		if all > 0 {
			frac = float64(fin) / float64(all)
		}
		fill = int(frac * width)
		eta = "--:--"
		if slow.ETASeconds >= 0 {
			eta = (time.Duration(slow.ETASeconds) * time.Second).Round(time.Second).String()
		}
		fmt.Fprintf(b.w, "\r[%s%s] %d/%d items  %d/%d pairs  slowest %s/%s %d/%d %.1f/s  ETA %s   ", strings.Repeat("#", fill), strings.Repeat(".", width-fill),
			done, total, fin, all, slow.Step, slow.Model, slow.Done+slow.Failed, slow.Done+slow.Failed+slow.Pending, slow.RatePerSec, eta)
		return
	}
	fmt.Fprintf(b.w, "\r[%s%s] %d/%d items  %.1f/s  ETA %s   ", strings.Repeat("#", fill), strings.Repeat(".", width-fill), done, total, rate, eta)
}

// printStepProgress writes one line per step and model, in pipeline order.
func printStepProgress(w io.Writer, steps []pipeline.StepProgress) {
	for _, s := range steps {
		eta := "--"
		if s.ETASeconds >= 0 {
			eta = (time.Duration(s.ETASeconds) * time.Second).Round(time.Second).String()
		}
		fmt.Fprintf(w, "  %-20s %-16s done %6d  failed %6d  pending %6d  %7.2f/s  ETA %s\n", s.Step, s.Model, s.Done, s.Failed, s.Pending, s.RatePerSec, eta)
	}
}

type progressFile struct {
	PID          int    `json:"pid"`
	Done         int    `json:"items_finished"`
	Total        int    `json:"items"`
	Updated      string `json:"updated"`
	Waiting      string `json:"waiting,omitempty"`
	WaitingUntil string `json:"waiting_until,omitempty"`
	// Steps: each llm step and model, in pipeline order.
	Steps []pipeline.StepProgress `json:"steps"`
}

// writeProgress leaves the live count where `fano pipeline status` finds
// it while the run holds the WAL (best effort: the WAL is the truth).
func writeProgress(dir string, p runProgress) {
	f := progressFile{PID: os.Getpid(), Done: p.done, Total: p.total, Updated: time.Now().UTC().Format(time.RFC3339), Steps: p.steps}
	if p.waiting {
		f.Waiting, f.WaitingUntil = p.waitWhy, p.waitUntil.Format(time.RFC3339)
	}
	b, err := json.Marshal(f)
	if err != nil {
		return
	}
	// Renamed into place whole, but not synced: four times a second two
	// fsyncs would compete with the WAL's for the disk, and after a crash
	// the file is not read (the run no longer holds the WAL).
	path := progressPath(dir)
	tmp := path + ".tmp"
	if os.WriteFile(tmp, b, 0o644) == nil {
		_ = os.Rename(tmp, path)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// startProfiles starts a CPU profile of the run into the file
// FANO_PIPELINE_CPUPROFILE names, if any (for tuning the pipeline path);
// the returned func stops it.
func startProfiles() func() {
	p := os.Getenv("FANO_PIPELINE_CPUPROFILE")
	if p == "" {
		return func() {}
	}
	f, err := os.Create(p)
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

// writeHeapProfile writes the heap as of now into the file
// FANO_PIPELINE_HEAPPROFILE names, if any, with the moment's name
// appended ("<file>.idle").
func writeHeapProfile(moment string) {
	p := os.Getenv("FANO_PIPELINE_HEAPPROFILE")
	if p == "" {
		return
	}
	if f, err := os.Create(p + "." + moment); err == nil {
		_ = pprof.WriteHeapProfile(f)
		f.Close()
	}
}

// finishRun has the pipeline write its output files from its state.
// loop is why the run's loop ended ("" for a maintenance command).
func finishRun(loop string) *pb.ModuleCommand {
	return &pb.ModuleCommand{Module: pipeline.Name, Command: &pb.ModuleCommand_FinishRun{FinishRun: &pb.FinishRun{Reason: loop}}}
}
