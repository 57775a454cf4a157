package verify

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"fano/actors"
	"fano/modules"
)

// Fix is one repair made.
type Fix struct {
	Kind   string `json:"kind"` // the problem kind, or "recovery"
	ID     string `json:"id"`
	Module string `json:"module,omitempty"`
	Action string `json:"action"`
}

// RepairReport is what Repair found, did, and found afterwards.
type RepairReport struct {
	Before *Report `json:"before"`
	Fixes  []Fix   `json:"fixes"`
	After  *Report `json:"after"`
}

// Repair fixes what Verify finds, in an order where each step works on
// the state the previous one left: recovery first (orphan and interrupted
// tasks, open intents), then the modules' own repairs, then output files.
// Every fix is logged. It returns the report of a fresh Verify at the end;
// After.Clean says whether everything was repaired.
func Repair(env Env) (*RepairReport, error) {
	before, err := Verify(env)
	if err != nil {
		return nil, err
	}
	rr := &RepairReport{Before: before, Fixes: []Fix{}}
	if before.Clean {
		rr.After = before
		return rr, nil
	}
	log := env.Logger
	record := func(f Fix) {
		rr.Fixes = append(rr.Fixes, f)
		log.Info().Str("event", "verify.repair."+f.Kind).Str("id", f.ID).Str("module", f.Module).Msg(f.Action)
	}

	// 1. Recovery repairs tasks and intents as `fano run` would at
	// start, each repair an event in the WAL.
	if has(before, KindUnknownModuleTask, KindInterruptedTask, KindOpenIntent) {
		opts, err := env.Options()
		if err != nil {
			return nil, err
		}
		rep, err := actors.Recover(opts)
		if err != nil {
			return nil, fmt.Errorf("repair: recovery: %w", err)
		}
		for _, s := range rep.Repairs {
			record(Fix{Kind: "recovery", Action: s})
		}
	}

	// 2. Module invariants: each module decides its repair events.
	opts, err := env.Options()
	if err != nil {
		return nil, err
	}
	in, err := actors.Inspect(opts)
	if err != nil {
		return nil, fmt.Errorf("repair: %w", err)
	}
	rewrite := map[string]map[string]bool{} // module -> paths changed by repair events
	now := env.now()
	for _, name := range in.ModuleNames() {
		v, ok := in.Modules[name].(modules.Verifier)
		if !ok {
			continue
		}
		for _, p := range v.Verify() {
			evs, err := v.DecideRepair(p, now)
			if err != nil {
				return nil, fmt.Errorf("repair: module %s: %s %s: %w", name, p.Kind, p.ID, err)
			}
			paths, err := in.AppendModuleEvents(name, evs, now)
			if err != nil {
				return nil, fmt.Errorf("repair: module %s: %s %s: %w", name, p.Kind, p.ID, err)
			}
			for _, path := range paths {
				if rewrite[name] == nil {
					rewrite[name] = map[string]bool{}
				}
				rewrite[name][path] = true
			}
			record(Fix{Kind: p.Kind, ID: p.ID, Module: name, Action: fmt.Sprintf("%d repair events logged and applied", len(evs))})
		}
	}

	// 3. Output files: rewrite from the (repaired) state what is missing
	// or stale, move aside what nobody owns.
	outs, err := checkOutputs(env, in)
	if err != nil {
		return nil, err
	}
	var extras []string
	for _, p := range outs {
		switch p.Kind {
		case KindOutputMissing, KindOutputStale:
			if rewrite[p.Module] == nil {
				rewrite[p.Module] = map[string]bool{}
			}
			rewrite[p.Module][p.ID] = true
		case KindOutputExtra:
			extras = append(extras, p.ID)
		}
	}
	modNames := make([]string, 0, len(rewrite))
	for m := range rewrite {
		modNames = append(modNames, m)
	}
	sort.Strings(modNames)
	for _, m := range modNames {
		var paths []string
		for p := range rewrite[m] {
			paths = append(paths, p)
		}
		sort.Strings(paths)
		if err := in.WriteOutputs(m, paths); err != nil {
			return nil, fmt.Errorf("repair: %w", err)
		}
		for _, p := range paths {
			record(Fix{Kind: "output_write", ID: p, Module: m, Action: "output/" + p + " written from the state (atomic, under a WAL intent)"})
		}
	}
	if len(extras) > 0 {
		dest := filepath.Join(env.DataDir, "output-orphaned", now.UTC().Format("20060102T150405Z"))
		for _, rel := range extras {
			if err := moveAside(filepath.Join(env.outputDir(), rel), filepath.Join(dest, rel)); err != nil {
				return nil, fmt.Errorf("repair: %w", err)
			}
			record(Fix{Kind: KindOutputExtra, ID: rel, Action: "moved output/" + rel + " to " + filepath.Join(dest, rel)})
		}
	}

	rr.After, err = Verify(env)
	if err != nil {
		return nil, err
	}
	return rr, nil
}

func has(r *Report, kinds ...string) bool {
	for _, p := range r.Problems {
		for _, k := range kinds {
			if p.Kind == k {
				return true
			}
		}
	}
	return false
}

// moveAside renames src to dst (same file system), creating dst's
// directory; an existing dst is never overwritten.
func moveAside(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("move %s: %w", src, err)
	}
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("move %s: %s exists", src, dst)
	}
	if err := os.Rename(src, dst); err != nil {
		return fmt.Errorf("move %s: %w", src, err)
	}
	return nil
}
