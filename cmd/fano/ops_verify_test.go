package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"fano/modules"
	"fano/pb"
	"fano/verify"
	"fano/wal"
)

// ledger is a small module with the optional interfaces verify and repair
// work through: it blesses items (an item blessed twice is a problem it
// can repair), and exports one file per item. It runs only where the test
// asks for it (FANO_TEST_LEDGER=1), in process or in a fano subprocess.
type ledger struct {
	Blessed map[string]int    `json:"blessed"`
	Texts   map[string]string `json:"texts"`
}

// testModules are the modules the test binary's fano runs beside the
// config's (executeWith, in process and as FANO_BE_MAIN).
func testModules() []modules.Module {
	if os.Getenv("FANO_TEST_LEDGER") != "1" {
		return nil
	}
	return []modules.Module{newLedger()}
}

func newLedger() *ledger { return &ledger{Blessed: map[string]int{}, Texts: map[string]string{}} }

type ledgerItem struct {
	ID   string `json:"id"`
	Text string `json:"text,omitempty"`
}

func (l *ledger) Name() string                 { return "ledger" }
func (l *ledger) TaskTypes() []string          { return []string{"note"} }
func (l *ledger) Propose(time.Time) []*pb.Task { return nil }
func (l *ledger) NextAction(*pb.Task) (modules.Action, error) {
	return modules.Action{Kind: modules.ActionDone}, nil
}
func (l *ledger) DecideResponse(*pb.Task, string, time.Time) ([]*pb.ModuleEvent, error) {
	return nil, nil
}
func (l *ledger) DecideCompletion(*pb.Task, time.Time) ([]*pb.ModuleEvent, error) { return nil, nil }
func (l *ledger) DecideFailure(*pb.Task, string, time.Time) ([]*pb.ModuleEvent, error) {
	return nil, nil
}

func (l *ledger) Apply(e *pb.ModuleEvent, _ time.Time) error {
	var it ledgerItem
	if err := json.Unmarshal(e.Data, &it); err != nil {
		return fmt.Errorf("ledger: %s: %w", e.Type, err)
	}
	switch e.Type {
	case "blessed":
		l.Blessed[it.ID]++
		l.Texts[it.ID] = it.Text
	case "duplicate_resolved":
		l.Blessed[it.ID] = 1
	default:
		return fmt.Errorf("ledger: unknown event %q", e.Type)
	}
	return nil
}

func (l *ledger) Snapshot() ([]byte, error) { return json.Marshal(l) }
func (l *ledger) Restore(b []byte) error {
	n := newLedger()
	if err := json.Unmarshal(b, n); err != nil {
		return err
	}
	*l = *n
	return nil
}

func (l *ledger) Exports(e *pb.ModuleEvent) []string {
	var it ledgerItem
	if json.Unmarshal(e.Data, &it) != nil {
		return nil
	}
	return []string{"ledger/" + it.ID + ".json"}
}

func (l *ledger) Export(path string) ([]byte, error) {
	id := strings.TrimSuffix(strings.TrimPrefix(path, "ledger/"), ".json")
	if _, ok := l.Blessed[id]; !ok {
		return nil, fmt.Errorf("ledger: no item %q", id)
	}
	return json.Marshal(ledgerItem{ID: id, Text: l.Texts[id]})
}

func (l *ledger) ExportPaths() []string {
	var out []string
	for id := range l.Blessed {
		out = append(out, "ledger/"+id+".json")
	}
	sort.Strings(out)
	return out
}

func (l *ledger) Verify() []modules.Problem {
	var out []modules.Problem
	for id, n := range l.Blessed {
		if n > 1 {
			out = append(out, modules.Problem{Kind: "blessed_twice", ID: id, Detail: fmt.Sprintf("item %s blessed %d times", id, n)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (l *ledger) DecideRepair(p modules.Problem, _ time.Time) ([]*pb.ModuleEvent, error) {
	if p.Kind != "blessed_twice" {
		return nil, fmt.Errorf("ledger: cannot repair %s", p.Kind)
	}
	data, _ := json.Marshal(ledgerItem{ID: p.ID})
	return []*pb.ModuleEvent{{Type: "duplicate_resolved", Data: data}}, nil
}

const verifyConfig = `
backends:
  alpha: {type: sim, hourly_limit: 100, sim: {seed: 1, latency_ms: 5}}
explorer: {enabled: false}
documenter: {enabled: false}
researcher: {enabled: false}
control: {enabled: false}
logging: {level: info, console: json}
`

// entry encodes an event as the actors write it.
func entry(t *testing.T, owner string, at time.Time, e *pb.Event, intent bool) wal.Entry {
	t.Helper()
	e.At = at.UnixNano()
	data, err := proto.Marshal(e)
	require.NoError(t, err)
	name := string(e.ProtoReflect().WhichOneof(e.ProtoReflect().Descriptor().Oneofs().ByName("body")).Name())
	return wal.Entry{Time: at, Owner: owner, Type: name, Intent: intent, Payload: data}
}

func moduleEvent(t *testing.T, typ string, it ledgerItem) *pb.Event {
	data, err := json.Marshal(it)
	require.NoError(t, err)
	return &pb.Event{Body: &pb.Event_ModuleEvent{ModuleEvent: &pb.ModuleEvent{Module: "ledger", Type: typ, Data: data}}}
}

// runVerify runs a verify/repair command in process and returns stdout,
// stderr and the exit code.
func runCmd(args ...string) (string, string, int) {
	var out, errb bytes.Buffer
	code := executeWith(args, &out, &errb, testModules)
	return out.String(), errb.String(), code
}

// Each injected inconsistency is found by `fano verify`; `fano repair
// --yes` fixes them, logging each fix; afterwards verify is clean.
func TestVerifyFindsAndRepairFixes(t *testing.T) {
	t.Setenv("FANO_TEST_LEDGER", "1")
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	cfg := writeConfig(t, dir, verifyConfig)
	args := func(a ...string) []string { return append(a, "--config", cfg, "--data-dir", dataDir) }

	_, errOut, code := runCmd(args("verify")...)
	require.Equal(t, 0, code, "an empty data directory is clean: %s", errOut)

	// Inject: a task of a module nobody runs; a task left RUNNING with its
	// request intent open (a crash mid-call); an item blessed twice; a
	// file write whose intent has no commit and whose file is missing; a
	// stale output file; a file nobody owns.
	at := time.Now().Add(-time.Minute)
	require.NoDirExists(t, dataDir, "verify only reads: it creates nothing")
	require.NoError(t, os.MkdirAll(dataDir, 0o700))
	log, err := wal.Open(filepath.Join(dataDir, "fano.db"), wal.Options{})
	require.NoError(t, err)
	ghost := &pb.Task{Id: "ghost/scan/x", Module: "ghost", TaskType: "scan", Subject: "x", State: pb.TaskState_TASK_STATE_PENDING, CreatedAt: at.UnixNano()}
	note := &pb.Task{Id: "ledger/note/n1", Module: "ledger", TaskType: "note", Subject: "n1", State: pb.TaskState_TASK_STATE_PENDING, CreatedAt: at.UnixNano(), MaxRequests: 3}
	_, err = log.Append(context.Background(),
		entry(t, "scheduler", at, &pb.Event{Body: &pb.Event_TaskSubmitted{TaskSubmitted: &pb.TaskSubmitted{Task: ghost}}}, false),
		entry(t, "scheduler", at, &pb.Event{Body: &pb.Event_TaskSubmitted{TaskSubmitted: &pb.TaskSubmitted{Task: note}}}, false),
		entry(t, "scheduler", at, &pb.Event{Body: &pb.Event_TaskStarted{TaskStarted: &pb.TaskStarted{TaskId: note.Id, Llm: "alpha"}}}, false),
		entry(t, "scheduler", at, &pb.Event{Body: &pb.Event_LlmRequestStarted{LlmRequestStarted: &pb.LLMRequestStarted{TaskId: note.Id, Llm: "alpha", Prompt: "p"}}}, true),
		entry(t, "module/ledger", at, moduleEvent(t, "blessed", ledgerItem{ID: "a", Text: "alpha"}), false),
		entry(t, "module/ledger", at, moduleEvent(t, "blessed", ledgerItem{ID: "a", Text: "alpha"}), false),
		entry(t, "module/ledger", at, moduleEvent(t, "blessed", ledgerItem{ID: "b", Text: "beta"}), false),
		wal.Entry{Time: at, Owner: "effects", Type: "file_write", Intent: true, Payload: []byte("ledger\x00ledger/b.json")},
	)
	require.NoError(t, err)
	require.NoError(t, log.Close())
	out := filepath.Join(dataDir, "output", "ledger")
	require.NoError(t, os.MkdirAll(out, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(out, "a.json"), []byte(`{"id":"a","text":"tampered"}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(out, "zzz.json"), []byte(`{}`), 0o644))

	stdout, errOut, code := runCmd(args("verify", "--json")...)
	require.Equal(t, 1, code, "problems exit 1")
	require.Contains(t, errOut, "fano repair --yes")
	var rep verify.Report
	require.NoError(t, json.Unmarshal([]byte(stdout), &rep), stdout)
	require.False(t, rep.Clean)
	require.Equal(t, []string{"blessed_twice", "interrupted_task", "open_intent", "output_extra", "output_missing", "output_stale", "unknown_module_task"}, rep.Kinds())
	byKind := map[string][]string{}
	for _, p := range rep.Problems {
		byKind[p.Kind] = append(byKind[p.Kind], p.ID)
	}
	require.Equal(t, []string{"ghost/scan/x"}, byKind["unknown_module_task"])
	require.Equal(t, []string{"ledger/note/n1"}, byKind["interrupted_task"])
	require.Equal(t, []string{"a"}, byKind["blessed_twice"])
	require.Len(t, byKind["open_intent"], 2)
	require.Equal(t, []string{"ledger/b.json"}, byKind["output_missing"])
	require.Equal(t, []string{"ledger/a.json"}, byKind["output_stale"])
	require.Equal(t, []string{"ledger/zzz.json"}, byKind["output_extra"])

	// Text report too; without --yes repair changes nothing.
	stdout, _, code = runCmd(args("verify")...)
	require.Equal(t, 1, code)
	require.Contains(t, stdout, "8 problems")
	require.Contains(t, stdout, "blessed_twice")
	_, errOut, code = runCmd(args("repair")...)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "--yes")
	stdout, _, _ = runCmd(args("verify", "--json")...)
	var again verify.Report
	require.NoError(t, json.Unmarshal([]byte(stdout), &again))
	require.Len(t, again.Problems, len(rep.Problems), "repair without --yes wrote nothing")

	stdout, errOut, code = runCmd(args("repair", "--yes", "--json")...)
	require.Equal(t, 0, code, "%s\n%s", stdout, errOut)
	var rr verify.RepairReport
	require.NoError(t, json.Unmarshal([]byte(stdout), &rr), stdout)
	require.True(t, rr.After.Clean, "%+v", rr.After.Problems)
	kinds := map[string]int{}
	for _, f := range rr.Fixes {
		kinds[f.Kind]++
	}
	require.Equal(t, 1, kinds["blessed_twice"])
	require.Equal(t, 1, kinds["output_extra"])
	require.GreaterOrEqual(t, kinds["recovery"], 2)
	require.GreaterOrEqual(t, kinds["output_write"], 1)

	// The repaired state: files match, the extra one was moved aside, the
	// orphan is paused, nothing left open.
	got, err := os.ReadFile(filepath.Join(out, "a.json"))
	require.NoError(t, err)
	require.JSONEq(t, `{"id":"a","text":"alpha"}`, string(got))
	got, err = os.ReadFile(filepath.Join(out, "b.json"))
	require.NoError(t, err)
	require.JSONEq(t, `{"id":"b","text":"beta"}`, string(got))
	require.NoFileExists(t, filepath.Join(out, "zzz.json"))
	moved, _ := filepath.Glob(filepath.Join(dataDir, "output-orphaned", "*", "ledger", "zzz.json"))
	require.Len(t, moved, 1)

	stdout, errOut, code = runCmd(args("verify")...)
	require.Equal(t, 0, code, "%s\n%s", stdout, errOut)
	require.Contains(t, stdout, "clean")
	logText, err := os.ReadFile(filepath.Join(dataDir, "logs", "fano.log"))
	require.NoError(t, err)
	require.Contains(t, string(logText), `"event":"verify.repair.blessed_twice"`)
	require.Contains(t, string(logText), `"event":"verify.repair.output_extra"`)

	stdout, _, code = runCmd(args("repair", "--yes")...)
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "nothing to repair")

	stdout, errOut, code = runCmd(args("status", "--json")...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, stdout, `"PAUSED": 2`, "the orphan and the interrupted task are paused")
}

// verify and repair refuse a data directory a running fano holds, naming
// its pid, and change nothing.
func TestVerifyRefusesWhileRunning(t *testing.T) {
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	cfg := writeConfig(t, dir, verifyConfig)
	require.NoError(t, os.MkdirAll(dataDir, 0o700))
	log, err := wal.Open(filepath.Join(dataDir, "fano.db"), wal.Options{PIDFile: filepath.Join(dataDir, "fano.pid")})
	require.NoError(t, err)
	defer log.Close()
	for _, cmd := range []string{"verify", "repair"} {
		_, errOut, code := runCmd(cmd, "--yes", "--config", cfg, "--data-dir", dataDir)
		if cmd == "verify" {
			_, errOut, code = runCmd(cmd, "--config", cfg, "--data-dir", dataDir)
		}
		require.Equal(t, 1, code)
		require.Contains(t, errOut, fmt.Sprintf("in use by pid %d", os.Getpid()))
		require.Contains(t, errOut, cmd+" works on a stopped fano")
	}
}
