package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// BenchmarkPipelineBesideRiver: the peers' workload (20,000 durable jobs,
// one zero-latency step, 64 at once) through a real `fano pipeline run`
// and through River (tuned: FetchCooldown 1 ms, InsertMany x1000, on a
// throw-away PostgreSQL) from the peers' own harness, in alternating
// rounds in one run, so a busy machine weighs on both alike. It reports
// the medians and the median of each round's ratio (goal: fano >= 1.5x).
//
// River runs from ../shared/peers/river/run.sh (FANO_PEERS_DIR names
// another peers directory); it needs PostgreSQL, which the script
// installs from Debian packages when missing, and root (it starts the
// cluster as the postgres user). FANO_BENCH_ROUNDS sets the rounds
// (default 3).
func BenchmarkPipelineBesideRiver(b *testing.B) {
	bin := fano.Require(b)
	peers, err := peersDir()
	if err != nil {
		b.Fatal(err)
	}
	rounds := 3
	if s := os.Getenv("FANO_BENCH_ROUNDS"); s != "" {
		if rounds, err = strconv.Atoi(s); err != nil || rounds < 1 {
			b.Fatalf("FANO_BENCH_ROUNDS: %q is not a count", s)
		}
	}
	const items = 20000
	var fanoRates, riverRates, ratios []float64
	for i := 0; i < b.N; i++ {
		for r := 0; r < rounds; r++ {
			var f, rv float64
			b.Run("fano-pipeline-run", func(b *testing.B) {
				for j := 0; j < b.N; j++ {
					f = runPipelineBench(b, bin, items)
				}
			})
			b.Run("river-tuned", func(b *testing.B) {
				for j := 0; j < b.N; j++ {
					rv = runRiver(b, peers, items)
					b.ReportMetric(rv, "jobs/s")
				}
			})
			fanoRates, riverRates = append(fanoRates, f), append(riverRates, rv)
			if rv > 0 {
				ratios = append(ratios, f/rv)
			}
		}
	}
	// The medians as a row of their own (a benchmark with sub-benchmarks
	// prints none of its own metrics).
	b.Run("median", func(b *testing.B) {
		b.ReportMetric(median(fanoRates), "fano-items/s")
		b.ReportMetric(median(riverRates), "river-jobs/s")
		b.ReportMetric(median(ratios), "x-river")
	})
	b.Logf("fano items/s %v; River jobs/s %v; fano ÷ River per round %v", rounded(fanoRates), rounded(riverRates), rounded2(ratios))
}

// peersDir finds the peers' harness: FANO_PEERS_DIR, else ../shared/peers
// beside the repository.
func peersDir() (string, error) {
	dir := os.Getenv("FANO_PEERS_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "..", "shared", "peers")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(dir, "river", "run.sh")); err != nil {
		return "", fmt.Errorf("River's harness: %w (set FANO_PEERS_DIR to the peers directory)", err)
	}
	return dir, nil
}

// runRiver runs the peers' River scenario "tuned" with n jobs and returns
// the jobs/s its harness measured (first submit to the last job durably
// completed in PostgreSQL).
func runRiver(b *testing.B, peers string, n int) float64 {
	results := filepath.Join(b.TempDir(), "river.jsonl")
	cmd := exec.Command("bash", filepath.Join(peers, "river", "run.sh"), "tuned")
	cmd.Env = append(os.Environ(), "N="+strconv.Itoa(n), "RESULTS="+results)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("River's harness: %v\n%s", err, out)
	}
	f, err := os.Open(results)
	if err != nil {
		b.Fatalf("River's harness wrote no results: %v", err)
	}
	defer f.Close()
	var last struct {
		Label     string  `json:"label"`
		N         int     `json:"n"`
		TasksPerS float64 `json:"tasks_per_s"`
		Completed int     `json:"completed"`
		Lost      int     `json:"lost_tasks"`
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if err := json.Unmarshal(sc.Bytes(), &last); err != nil {
			b.Fatalf("River's results %s: %v", results, err)
		}
	}
	if last.Label != "river/tuned" || last.N != n || last.Completed != n || last.Lost != 0 {
		b.Fatalf("River's run did not complete its %d jobs: %+v", n, last)
	}
	return last.TasksPerS
}

func rounded(xs []float64) []int {
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = int(x + 0.5)
	}
	return out
}

func rounded2(xs []float64) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = strconv.FormatFloat(x, 'f', 2, 64)
	}
	return out
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
