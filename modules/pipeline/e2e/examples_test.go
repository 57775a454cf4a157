package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The examples for seeds 000 and 003 run as shipped, on simulated models
// slow enough to be killed mid-run (also with the cores busy): killed with SIGKILL twice, they are
// run again until done, and every (item, step, model) pair has exactly
// one answer, none asked again after it had one.
func TestSeedExamplesSurviveKill9(t *testing.T) {
	fano.Require(t)
	for _, ex := range []struct {
		dir                string
		items, pairs, most int // pairs at least, at most (a repair round adds two)
	}{
		{"seed000-papers", 60, 60 * 7, 60 * 9},
		{"seed003-verdicts", 36, 36 * 3, 36 * 3},
	} {
		t.Run(ex.dir, func(t *testing.T) {
			def, err := filepath.Abs(filepath.Join("..", "..", "..", "examples", ex.dir, "pipeline.yaml"))
			require.NoError(t, err)
			dir := t.TempDir()
			e := env{dir: dir, cfg: filepath.Join(dir, "fano.yaml"), def: def, data: filepath.Join(dir, "run")}
			cfg := ""
			for i, name := range []string{"sim-a", "sim-b", "sim-c"} {
				cfg += fmt.Sprintf("  %s: {type: sim, hourly_limit: 1000000, max_concurrency: 2, sim: {seed: %d, style: api, latency_ms: 40}}\n", name, i+1)
			}
			require.NoError(t, os.WriteFile(e.cfg, []byte("backends:\n"+cfg+"control: {enabled: false}\nlogging: {level: info, console: json}\n"), 0o644))

			killMidRun(t, e, 3)
			first := readRun(t, e.data)
			killMidRun(t, e, len(first.okAt)/7+4)
			second := readRun(t, e.data)
			require.Less(t, len(second.okAt), ex.pairs, "the second kill came mid-run")

			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			out, err := e.cmd(ctx, "pipeline", "run", e.def, "--no-progress", "--json").Output()
			require.NoError(t, err, "%s", out)
			var sum struct {
				ItemsDone int `json:"items_done"`
				Stop      struct{ Reason string }
			}
			require.NoError(t, json.Unmarshal(out, &sum), "%s", out)
			assert.Equal(t, ex.items, sum.ItemsDone)
			assert.Equal(t, "done", sum.Stop.Reason)

			after := readRun(t, e.data)
			assert.GreaterOrEqual(t, len(after.okAt), ex.pairs)
			assert.LessOrEqual(t, len(after.okAt), ex.most)
			for id, n := range after.okCount {
				assert.Equal(t, 1, n, "pair %s answered once", id)
			}
			for _, before := range []walPipeline{first, second} {
				for id, at := range before.okAt {
					for _, seq := range after.requests[id] {
						assert.LessOrEqual(t, seq, at, "pair %s asked again after its answer", id)
					}
				}
			}
		})
	}
}
