// Command benchtable reads `go test -bench` output and prints fano's
// performance goals as one table: goal, measured, baseline, ratio.
package main

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
)

// results maps "BenchmarkName/sub" (without the -N suffix) to unit -> value.
type results map[string]map[string]float64

var line = regexp.MustCompile(`^(Benchmark\S+?)(-\d+)?\s+\d+\s+(.*)$`)

func parse(sc *bufio.Scanner) results {
	r := results{}
	for sc.Scan() {
		m := line.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		f := strings.Fields(m[3])
		vals := map[string]float64{}
		for i := 0; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				vals[f[i+1]] = v
			}
		}
		r[m[1]] = vals
	}
	return r
}

// row is one goal: what is measured, its baseline, and how to judge.
type row struct {
	goal            string
	name, unit      string // measured
	baseName, baseU string // baseline ("" = none)
	higherIsBetter  bool
	ratioLabel      string
}

var rows = []row{
	{"WAL, 64 writers >= 50% of raw 64-per-sync", "BenchmarkAppend/fano/writers=64", "entries/s", "BenchmarkAppend/raw/per-sync=64", "entries/s", true, "of raw"},
	{"WAL, 1 writer (info)", "BenchmarkAppend/fano/writers=1", "entries/s", "BenchmarkAppend/raw/per-sync=1", "entries/s", true, "of raw"},
	{"pick-next, 1k pending", "BenchmarkPick/fano/pending=1000", "ns/op", "BenchmarkPick/spec-resort/pending=1000", "ns/op", false, "x faster"},
	{"pick-next, 10k pending", "BenchmarkPick/fano/pending=10000", "ns/op", "BenchmarkPick/spec-resort/pending=10000", "ns/op", false, "x faster"},
	{"pick-next >= 100x faster at 100k", "BenchmarkPick/fano/pending=100000", "ns/op", "BenchmarkPick/spec-resort/pending=100000", "ns/op", false, "x faster"},
	{"tick + pick, 1k tasks", "BenchmarkTick/fano/tasks=1000", "ns/op", "BenchmarkTick/spec-resort/tasks=1000", "ns/op", false, "x faster"},
	{"tick + pick, 10k tasks", "BenchmarkTick/fano/tasks=10000", "ns/op", "BenchmarkTick/spec-resort/tasks=10000", "ns/op", false, "x faster"},
	{"tick + pick, 100k tasks", "BenchmarkTick/fano/tasks=100000", "ns/op", "BenchmarkTick/spec-resort/tasks=100000", "ns/op", false, "x faster"},
	{"tick + pick, 1M tasks", "BenchmarkTick/fano/tasks=1000000", "ns/op", "BenchmarkTick/spec-resort/tasks=1000000", "ns/op", false, "x faster"},
	{"end-to-end >= 5,000 tasks/s", "BenchmarkEndToEnd/fano", "tasks/s", "BenchmarkEndToEnd/wal-floor", "tasks/s", true, "of floor"},
	{"end-to-end, the WAL writer's short slice (info)", "BenchmarkEndToEnd/fano", "tasks/s", "BenchmarkEndToEnd/fano-kernel-slice", "tasks/s", true, "x the kernel's slice"},
	{"RSS for 20k tasks <= 60 MB", "BenchmarkEndToEnd/fano", "rss-MB", "", "", false, ""},
	{"RSS for 20k tasks, 64 MB soft memory limit", "BenchmarkEndToEndMemoryLimit/limit=64MB/fano", "rss-MB", "BenchmarkEndToEnd/fano", "rss-MB", false, "x without"},
	{"live heap for 20k tasks (info)", "BenchmarkEndToEnd/fano", "live-heap-MB", "", "", false, ""},
	{"recovery 100k tasks / ~1M entries <= 2 s", "BenchmarkRecovery/fano-recover", "s/recovery", "BenchmarkRecovery/decode-only", "s/recovery", false, "x decode-only"},
	{"SIGKILL at half-way: run again <= 1 s", "BenchmarkKillRestart", "s-to-run-again", "BenchmarkKillRestart", "s-cold-start(baseline)", false, "x cold start"},
	{"SIGKILL: tasks lost = 0", "BenchmarkKillRestart", "lost", "", "", false, ""},
	{"SIGKILL: ran twice <= in flight", "BenchmarkKillRestart", "ran-twice", "BenchmarkKillRestart", "in-flight-at-kill", false, "of in flight"},
	{"simulated day: hourly budget used >= 99%", "BenchmarkSimulatedDay", "hourly-used-%", "", "", true, ""},
	{"simulated day: deep budget used >= 99%", "BenchmarkSimulatedDay", "deep-used-%", "", "", true, ""},
	{"simulated day: rate-limit answers = 0", "BenchmarkSimulatedDay", "rate-limited", "", "", false, ""},
	{"429 incident: fano 429s <= 10", "BenchmarkIncident429", "fano-429s", "BenchmarkIncident429", "baseline-429s", false, "of baseline"},
	{"429 incident: >= 97% of 200 RPM", "BenchmarkIncident429", "fano-rpm-%", "BenchmarkIncident429", "baseline-rpm-%", true, "of baseline"},
	{"20% 503s: tasks FAILED = 0", "BenchmarkTransientFaults", "faulty-tasks-failed", "", "", false, ""},
	{"20% 503s: quota/s >= 95% of fault-free", "BenchmarkTransientFaults", "faulty-quota/s", "BenchmarkTransientFaults", "baseline-quota/s", true, "of fault-free"},
	{"1 of 3 backends out: tasks/s >= 2/3 of fault-free", "BenchmarkBackendOutage", "outage-tasks/s", "BenchmarkBackendOutage", "baseline-tasks/s", true, "of fault-free"},
	{"dedup check at 10k <= 1 ms", "BenchmarkCheck/stored=10000", "ns/op", "BenchmarkCheck/stored=10000", "baseline-ns/op", false, "x faster"},
	{"dedup check at 100k <= 1 ms", "BenchmarkCheck/stored=100000", "ns/op", "BenchmarkCheck/stored=100000", "baseline-ns/op", false, "x faster"},
	{"pipeline, 20k items, beside River tuned (median of rounds) >= 1.5x", "BenchmarkPipelineBesideRiver/median", "fano-items/s", "BenchmarkPipelineBesideRiver/median", "river-jobs/s", true, "x River"},
	{"pipeline, 20k items: median of per-round ratios >= 1.5x", "BenchmarkPipelineBesideRiver/median", "x-river", "", "", true, ""},
	{"pipeline curve: items/s at 100k within 20% of 10k", "BenchmarkPipelineCurve/items-100000", "items/s", "BenchmarkPipelineCurve/items-10000", "items/s", true, "of 10k"},
	{"pipeline curve: items/s at 1M within 20% of 10k", "BenchmarkPipelineCurve/items-1000000", "items/s", "BenchmarkPipelineCurve/items-10000", "items/s", true, "of 10k"},
	{"pipeline curve: peak RSS at 1M <= 256 MB", "BenchmarkPipelineCurve/items-1000000", "peak-rss-MB", "BenchmarkPipelineCurve/items-10000", "peak-rss-MB", false, "x 10k"},
	{"pipeline curve: status mid-run at 1M <= 100 ms", "BenchmarkPipelineCurve/items-1000000", "status-ms", "", "", false, ""},
	{"signal to exit, call in flight <= 2 s", "BenchmarkShutdown", "inflight-exit-ms", "BenchmarkShutdown", "idle-exit-ms", false, "x idle"},
}

func main() {
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	r := parse(sc)
	rows = append(rows, extraRows(r)...)
	w := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "goal\tmeasured\tbaseline\tratio")
	for _, x := range rows {
		v, ok := r[x.name][x.unit]
		if !ok {
			fmt.Fprintf(w, "%s\t(not run)\t\t\n", x.goal)
			continue
		}
		base, ratio := "", ""
		if x.baseName != "" {
			if b, ok := r[x.baseName][x.baseU]; ok {
				base = fmt.Sprintf("%s %s", num(b), x.baseU)
				if b != 0 && v != 0 {
					q := v / b
					if !x.higherIsBetter && x.ratioLabel == "x faster" {
						q = b / v
					}
					if strings.HasPrefix(x.ratioLabel, "of") {
						ratio = fmt.Sprintf("%.0f%% %s", 100*q, x.ratioLabel)
					} else {
						ratio = fmt.Sprintf("%s%s", num(q), x.ratioLabel)
					}
				}
			}
		}
		fmt.Fprintf(w, "%s\t%s %s\t%s\t%s\n", x.goal, num(v), x.unit, base, ratio)
	}
	w.Flush()
}

// extraRows shows every other benchmark result as information.
func extraRows(r results) []row {
	known := map[string]bool{}
	for _, x := range rows {
		known[x.name], known[x.baseName] = true, true
	}
	var out []row
	for name, vals := range r {
		if known[name] {
			continue
		}
		for unit := range vals {
			if unit == "ns/op" && len(vals) > 1 {
				continue
			}
			out = append(out, row{goal: name + " (info)", name: name, unit: unit})
		}
	}
	return out
}

func num(v float64) string {
	switch {
	case v >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}
