// Package verify is `fano verify` and `fano repair`: an integrity report over a data directory that
// fano is not running on, and the repairs that make it consistent again.
//
// Verify rebuilds the state offline (actors.Inspect: checkpoints plus the
// WAL, writing nothing) and checks it: tasks no configured module runs,
// tasks left RUNNING by a process that is gone, each module's own
// invariants (modules.Verifier: an insight blessed twice, a section
// incorporated twice), intents without a commit, and output files out of
// step with the state (modules.Exporter). Repair fixes what Verify found
// with the same machinery fano itself uses, each fix durable in the WAL
// before it takes effect: recovery (docs/architecture.md, State, WAL and
// recovery) pauses orphan and
// interrupted tasks and closes intents, modules decide their repair
// events (Verifier.DecideRepair), output files are rewritten atomically
// under an intent and commit; files nobody owns are moved aside, never
// deleted. Afterwards Verify is clean.
package verify

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"

	"fano/actors"
	"fano/modules"
	"fano/pb"
)

// Problem kinds found by Verify itself; module problems keep the kinds
// their Verifier gives (e.g. "blessed_twice", "incorporated_twice").
const (
	KindUnknownModuleTask = "unknown_module_task"
	KindInterruptedTask   = "interrupted_task"
	KindOpenIntent        = "open_intent"
	KindOutputMissing     = "output_missing"
	KindOutputStale       = "output_stale"
	KindOutputExtra       = "output_extra"
	KindExportFailed      = "export_failed"
)

// Problem is one inconsistency.
type Problem struct {
	Kind   string `json:"kind"`
	ID     string `json:"id"` // the task, intent seq, output path or module item it concerns
	Module string `json:"module,omitempty"`
	Detail string `json:"detail"`
	Fix    string `json:"fix"` // what repair does about it
}

// Report is the result of Verify.
type Report struct {
	DataDir  string    `json:"data_dir"`
	At       time.Time `json:"at"`
	LastSeq  uint64    `json:"last_seq"`
	Tasks    int       `json:"tasks"`
	Modules  []string  `json:"modules"`
	Checks   []string  `json:"checks"`
	Problems []Problem `json:"problems"`
	// Warnings are findings nothing can repair here (e.g. WAL entries of a
	// module that is not configured: kept, ignored).
	Warnings []string `json:"warnings"`
	Clean    bool     `json:"clean"`
}

// Kinds returns the problem kinds found, sorted, each once.
func (r *Report) Kinds() []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range r.Problems {
		if !seen[p.Kind] {
			seen[p.Kind] = true
			out = append(out, p.Kind)
		}
	}
	sort.Strings(out)
	return out
}

// DocumentChecker is a module whose document has reader-level checks
// (`fano doc check`: repeated sentences and titles, chat filler, broken
// anchors, empty sections).
type DocumentChecker interface {
	DocumentProblems() []modules.Problem
}

// Env is what Verify and Repair work on.
type Env struct {
	// Options returns actor options over the data directory's open WAL,
	// with fresh module instances on every call (each inspection restores
	// state into its modules).
	Options func() (actors.Options, error)
	// DataDir holds output/ and receives output-orphaned/.
	DataDir string
	Logger  zerolog.Logger
	// Now is the time repair events carry (default time.Now).
	Now func() time.Time
}

func (e Env) outputDir() string { return filepath.Join(e.DataDir, "output") }

func (e Env) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

// Verify checks the data directory and reports every problem it finds.
// It writes nothing.
func Verify(env Env) (*Report, error) {
	opts, err := env.Options()
	if err != nil {
		return nil, err
	}
	in, err := actors.Inspect(opts)
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	return check(env, in)
}

func check(env Env, in *actors.Inspection) (*Report, error) {
	r := &Report{DataDir: env.DataDir, At: env.now().UTC(), LastSeq: in.LastSeq, Tasks: len(in.Tasks),
		Modules: in.ModuleNames(), Problems: []Problem{}, Warnings: append([]string{}, in.Problems...)}
	r.Checks = append(r.Checks, "tasks")
	byID := map[string]*pb.Task{}
	for _, t := range in.Tasks {
		byID[t.Id] = t
		if finished(t) {
			continue
		}
		orphanPaused := t.State == pb.TaskState_TASK_STATE_PAUSED && t.PauseReason == "orphan"
		if err := in.CheckTask(t); err != nil && !orphanPaused {
			r.Problems = append(r.Problems, Problem{Kind: KindUnknownModuleTask, ID: t.Id, Module: t.Module,
				Detail: fmt.Sprintf("%v (%s)", err, stateName(t.State)),
				Fix:    "pause it (reason orphan) until its module is configured"})
			continue
		}
		if t.State == pb.TaskState_TASK_STATE_RUNNING || t.State == pb.TaskState_TASK_STATE_READY {
			detail := fmt.Sprintf("%s on %s although fano is not running", stateName(t.State), t.LlmAssigned)
			if t.Conversation.GetAwaitingResponse() {
				detail += "; a request was in flight"
			}
			r.Problems = append(r.Problems, Problem{Kind: KindInterruptedTask, ID: t.Id, Module: t.Module, Detail: detail,
				Fix: "pause it (recovery); an unanswered request is asked again, once, when it resumes"})
		}
	}

	r.Checks = append(r.Checks, "intents")
	for _, ent := range in.Uncommitted {
		p := Problem{Kind: KindOpenIntent, ID: fmt.Sprint(ent.Seq)}
		switch {
		case ent.Owner == actors.OwnerEffects:
			module, path, _ := strings.Cut(string(ent.Payload), "\x00")
			p.Module = module
			p.Detail = fmt.Sprintf("output/%s of module %s: file write (seq %d) has no commit", path, module, ent.Seq)
			p.Fix = "write the file again from the state, then commit"
		default:
			p.Detail = fmt.Sprintf("%s of %s (seq %d) has no commit", ent.Type, ent.Owner, ent.Seq)
			var e pb.Event
			if proto.Unmarshal(ent.Payload, &e) == nil {
				if rs := e.GetLlmRequestStarted(); rs != nil {
					p.Detail = fmt.Sprintf("request of task %s (turn %d, %s, seq %d) has no answer or failure recorded", rs.TaskId, rs.Turn, rs.Llm, ent.Seq)
					if t := byID[rs.TaskId]; t != nil {
						p.Module = t.Module
					}
				}
			}
			p.Fix = "record the request as interrupted where no answer was saved, then commit"
		}
		r.Problems = append(r.Problems, p)
	}

	r.Checks = append(r.Checks, "modules")
	for _, name := range in.ModuleNames() {
		v, ok := in.Modules[name].(modules.Verifier)
		if !ok {
			continue
		}
		for _, mp := range v.Verify() {
			r.Problems = append(r.Problems, Problem{Kind: mp.Kind, ID: mp.ID, Module: name, Detail: mp.Detail,
				Fix: "module " + name + " decides repair events (logged, then applied)"})
		}
	}

	r.Checks = append(r.Checks, "document")
	for _, name := range in.ModuleNames() {
		dc, ok := in.Modules[name].(DocumentChecker)
		if !ok {
			continue
		}
		for _, mp := range dc.DocumentProblems() {
			r.Problems = append(r.Problems, Problem{Kind: mp.Kind, ID: mp.ID, Module: name, Detail: mp.Detail,
				Fix: "none automatic: comment on the section in the panel, and the documenter revises it"})
		}
	}

	r.Checks = append(r.Checks, "outputs")
	outs, err := checkOutputs(env, in)
	if err != nil {
		return nil, err
	}
	r.Problems = append(r.Problems, outs...)
	r.Clean = len(r.Problems) == 0
	return r, nil
}

// expected maps each output path (relative, cleaned) to its module.
func expected(in *actors.Inspection) map[string]string {
	out := map[string]string{}
	for _, name := range in.ModuleNames() {
		ex, ok := in.Modules[name].(modules.Exporter)
		if !ok {
			continue
		}
		for _, p := range ex.ExportPaths() {
			out[filepath.Clean(p)] = name
		}
	}
	return out
}

// checkOutputs compares the files the state implies with the disk.
func checkOutputs(env Env, in *actors.Inspection) ([]Problem, error) {
	var probs []Problem
	want := expected(in)
	paths := make([]string, 0, len(want))
	for p := range want {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, rel := range paths {
		module := want[rel]
		full, err := in.OutputPath(rel)
		if err != nil {
			probs = append(probs, Problem{Kind: KindExportFailed, ID: rel, Module: module, Detail: err.Error(), Fix: "none: the module names a path outside output/"})
			continue
		}
		data, err := in.Modules[module].(modules.Exporter).Export(rel)
		if err != nil {
			probs = append(probs, Problem{Kind: KindExportFailed, ID: rel, Module: module,
				Detail: fmt.Sprintf("module %s cannot render output/%s: %v", module, rel, err), Fix: "none: a module bug"})
			continue
		}
		have, err := os.ReadFile(full)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			probs = append(probs, Problem{Kind: KindOutputMissing, ID: rel, Module: module,
				Detail: fmt.Sprintf("output/%s is missing; the state implies it", rel), Fix: "write it from the state"})
		case err != nil:
			return nil, fmt.Errorf("verify: read %s: %w", full, err)
		case !bytes.Equal(have, data):
			probs = append(probs, Problem{Kind: KindOutputStale, ID: rel, Module: module,
				Detail: fmt.Sprintf("output/%s differs from the state (%d bytes on disk, %d from the state)", rel, len(have), len(data)),
				Fix:    "write it again from the state"})
		}
	}
	extras, err := extraFiles(env.outputDir(), want)
	if err != nil {
		return nil, err
	}
	for _, rel := range extras {
		probs = append(probs, Problem{Kind: KindOutputExtra, ID: rel,
			Detail: fmt.Sprintf("output/%s is not implied by the state of any module", rel),
			Fix:    "move it to output-orphaned/ (never deleted)"})
	}
	return probs, nil
}

// extraFiles lists the files under dir that want does not name.
func extraFiles(dir string, want map[string]string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && path == dir {
				return filepath.SkipDir
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		if _, ok := want[rel]; !ok {
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("verify: list %s: %w", dir, err)
	}
	sort.Strings(out)
	return out, nil
}

func finished(t *pb.Task) bool {
	switch t.State {
	case pb.TaskState_TASK_STATE_COMPLETED, pb.TaskState_TASK_STATE_FAILED, pb.TaskState_TASK_STATE_CANCELLED:
		return true
	}
	return false
}

func stateName(st pb.TaskState) string { return strings.TrimPrefix(st.String(), "TASK_STATE_") }
