package e2e

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"fano/pb"
	"fano/wal"
)

// encodings counts the pipeline module's events in a run directory's WAL
// by type and encoding: "json" (runs before pb/pipeline.proto) or "pb".
func encodings(t *testing.T, data string, after uint64) map[string]map[string]int {
	t.Helper()
	log, err := wal.Open(filepath.Join(data, "fano.db"), wal.Options{LockTimeout: time.Second})
	require.NoError(t, err)
	defer log.Close()
	out := map[string]map[string]int{}
	require.NoError(t, log.Replay(after+1, func(ent wal.Entry) error {
		var ev pb.Event
		if ent.Owner != "module/pipeline" || proto.Unmarshal(ent.Payload, &ev) != nil {
			return nil
		}
		me := ev.GetModuleEvent()
		if me == nil || len(me.Data) == 0 {
			return nil
		}
		enc := "pb"
		if me.Data[0] == '{' {
			enc = "json"
		}
		if out[me.Type] == nil {
			out[me.Type] = map[string]int{}
		}
		out[me.Type][enc]++
		return nil
	}))
	return out
}

// A run directory written by fano before its pipeline events were pb
// messages (testdata/oldrun: 12 items x 3 models, stopped by its daily
// budget, then a --retry-failed run) still works: its state reads back
// as that fano left it, and a run resumes it without asking a finished
// pair again, writing its new events as pb.
func TestRunDirectoryWithJSONEventsStillWorks(t *testing.T) {
	fano.Require(t)
	dir := t.TempDir()
	for _, f := range []string{"fano.yaml", "items.jsonl"} {
		b, err := os.ReadFile(filepath.Join("testdata/oldrun", f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o644))
	}
	// The same pipeline without its daily budget, so the run can finish.
	def, err := os.ReadFile("testdata/oldrun/p.yaml")
	require.NoError(t, err)
	require.Contains(t, string(def), "limits: {daily_requests: 24}\n")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(strings.Replace(string(def), "limits: {daily_requests: 24}\n", "", 1)), 0o644))
	e := env{dir: dir, cfg: filepath.Join(dir, "fano.yaml"), def: filepath.Join(dir, "p.yaml"), data: filepath.Join(dir, "run")}
	require.NoError(t, os.MkdirAll(e.data, 0o755))
	gz, err := os.Open("testdata/oldrun/fano.db.gz")
	require.NoError(t, err)
	defer gz.Close()
	zr, err := gzip.NewReader(gz)
	require.NoError(t, err)
	db, err := os.Create(filepath.Join(e.data, "fano.db"))
	require.NoError(t, err)
	_, err = io.Copy(db, zr)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	old := encodings(t, e.data, 0)
	for _, typ := range []string{"answer_ok", "answer_invalid", "pair_failed", "retry_failed"} {
		assert.Positive(t, old[typ]["json"], "the fixture has %s events as JSON", typ)
		assert.Zero(t, old[typ]["pb"], typ)
	}
	before := readRun(t, e.data)

	// The state reads back as the old fano summed it up.
	ctx := context.Background()
	out, err := e.cmd(ctx, "pipeline", "export", "--what", "summary", e.def).CombinedOutput()
	require.NoError(t, err, "%s", out)
	type summary struct {
		ItemsDone   int                                                     `json:"items_done"`
		ItemsFailed int                                                     `json:"items_failed"`
		Requests    int                                                     `json:"requests"`
		Steps       map[string]map[string]struct{ OK, Failed, Pending int } `json:"steps"`
	}
	var want, got summary
	wb, err := os.ReadFile("testdata/oldrun/summary.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(wb, &want))
	require.NoError(t, json.Unmarshal(out, &got))
	assert.Equal(t, want, got)
	require.Positive(t, want.Steps["verdict"]["m1"].Pending, "the old run left work")

	// It resumes: every item finishes, no pair that had its answer is
	// asked again, and what is new is pb.
	run := e.cmd(ctx, "pipeline", "run", e.def, "--no-progress", "--json")
	var stderr strings.Builder
	run.Stderr = &stderr
	out, err = run.Output()
	code := exitCode(t, err)
	var end summary
	require.NoError(t, json.Unmarshal(out, &end), "%s", stderr.String())
	assert.Equal(t, 12, end.ItemsDone+end.ItemsFailed)
	if end.ItemsFailed > 0 {
		assert.Equal(t, 3, code, "failed items: %s", stderr.String())
	} else {
		assert.Zero(t, code, "%s", stderr.String())
	}
	after := readRun(t, e.data)
	for task, seq := range before.okAt {
		for _, r := range after.requests[task] {
			assert.LessOrEqual(t, r, seq, "task %s asked again after its answer", task)
		}
	}
	fresh := encodings(t, e.data, before.lastSeq)
	require.Positive(t, fresh["answer_ok"]["pb"])
	for typ, n := range fresh {
		assert.Zero(t, n["json"], "new %s events are pb", typ)
	}
	assert.Len(t, lines(t, filepath.Join(e.data, "output", "results.jsonl")), 12)
}
