package documenter

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/config"
	"fano/internal/fanotest"
)

// demoConfig is the built-in demo config (what `make run` runs) with
// the simulators' seeds shifted by seed, its data in dir and no panel.
func demoConfig(t *testing.T, dir string, seed int) string {
	t.Helper()
	y := regexp.MustCompile(`seed: (\d+)`).ReplaceAllStringFunc(string(config.DemoYAML()), func(s string) string {
		var n int
		fmt.Sscanf(s, "seed: %d", &n)
		return fmt.Sprintf("seed: %d", n+10*seed)
	})
	y = regexp.MustCompile(`(?m)^data_dir: .*$`).ReplaceAllString(y, "data_dir: "+filepath.Join(dir, "data"))
	// Quotas are not under test: a run that spends the hourly one would
	// wait for the next hour.
	y = regexp.MustCompile(`hourly_limit: \d+`).ReplaceAllString(y, "hourly_limit: 5000")
	y += "\ncontrol: {enabled: false}\n"
	path := filepath.Join(dir, "fano.yaml")
	require.NoError(t, os.WriteFile(path, []byte(y), 0o644))
	return path
}

// docCheckJSON is the part of `fano doc check --json` the test reads.
type docCheckJSON struct {
	Sections int            `json:"sections"`
	Counts   map[string]int `json:"counts"`
	Findings []Finding      `json:"findings"`
	Clean    bool           `json:"clean"`
}

// The demo pipeline (explorer and documenter on the simulated LLMs, whose
// drafts pad sections with facts of other sections and chat filler) run
// to the end over many seeds, some of them killed part way and resumed:
// `fano doc check` finds no repeated sentence or title, no filler, no
// broken anchor and no empty section, and `fano verify` agrees.
func TestDemoDocumentIsClean(t *testing.T) {
	bin := fano.Require(t)
	seeds := 20
	if testing.Short() {
		seeds = 3
	}
	for seed := range seeds {
		kill := seed%3 == 2
		t.Run(fmt.Sprintf("seed=%d/kill=%v", seed, kill), func(t *testing.T) {
			dir := t.TempDir()
			cfg := demoConfig(t, dir, seed)
			if kill {
				killAfterIncorporation(t, bin, cfg, filepath.Join(dir, "data", "logs", "fano.log"))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			out, err := exec.CommandContext(ctx, bin, "--config", cfg, "run", "--until-idle").CombinedOutput()
			require.NoError(t, err, "%s", out)

			out, err = exec.CommandContext(ctx, bin, "--config", cfg, "doc", "check", "--json").Output()
			var rep docCheckJSON
			require.NoError(t, json.Unmarshal(out, &rep), "%s", out)
			assert.NoError(t, err, "doc check exits 0 on a clean document")
			assert.GreaterOrEqual(t, rep.Sections, 2, "the demo writes a document")
			for _, k := range FindingKinds {
				assert.Zero(t, rep.Counts[k], "%s findings: %+v", k, rep.Findings)
			}
			assert.True(t, rep.Clean)

			// verify runs the same check; after a kill it may report what
			// the kill left behind elsewhere (a temp file), not this.
			out, _ = exec.CommandContext(ctx, bin, "--config", cfg, "verify", "--json").Output()
			var vr struct {
				Checks   []string `json:"checks"`
				Problems []struct {
					Kind string `json:"kind"`
				} `json:"problems"`
			}
			require.NoError(t, json.Unmarshal(out, &vr), "%s", out)
			assert.Contains(t, vr.Checks, "document")
			for _, p := range vr.Problems {
				assert.NotContains(t, p.Kind, "document_", "%s", out)
			}
			if !kill {
				assert.Empty(t, vr.Problems, "%s", out)
			}
		})
	}
}

// killAfterIncorporation starts `fano run` and SIGKILLs it once a
// section is incorporated.
func killAfterIncorporation(t *testing.T, bin, cfg, logFile string) {
	t.Helper()
	var out bytes.Buffer
	run := exec.Command(bin, "--config", cfg, "run")
	run.Stdout, run.Stderr = &out, &out
	require.NoError(t, run.Start())
	exited := make(chan error, 1)
	go func() { exited <- run.Wait() }()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(2 * time.Minute)
	for {
		select {
		case <-tick.C:
			if fanotest.LogHas(logFile, "modules.documenter.incorporated") {
				require.NoError(t, run.Process.Kill())
				<-exited
				return
			}
		case err := <-exited:
			t.Fatalf("fano run ended before any incorporation: %v\n%s", err, out.String())
		case <-deadline:
			require.NoError(t, run.Process.Kill())
			<-exited
			t.Fatalf("no incorporation within the deadline\n%s", out.String())
		}
	}
}
