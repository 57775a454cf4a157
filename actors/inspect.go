package actors

import (
	"context"
	"fmt"
	"sort"
	"time"

	"fano/modules"
	"fano/pb"
	"fano/wal"
)

// Inspection is the state a data directory holds, rebuilt offline from
// checkpoints and the WAL exactly as recovery rebuilds it, but before any
// of recovery's repairs: what `fano verify` checks. Building one writes
// nothing; the Append and Write methods do write, for `fano repair`.
//
// Not safe for concurrent use.
type Inspection struct {
	// Tasks are the scheduler's tasks in memory, in id order.
	Tasks []*pb.Task
	// Modules are the configured modules with their state restored, by name.
	Modules map[string]modules.Module
	// TaskTypes lists each configured module's task types.
	TaskTypes map[string]map[string]bool
	// Uncommitted are the WAL intents that have no commit, in seq order.
	Uncommitted []wal.Entry
	// LastSeq is the WAL's last sequence number.
	LastSeq uint64
	// Problems are replay findings: entries that do not apply, entries of
	// owners nobody configured.
	Problems []string

	rec *recovery
}

// Inspect rebuilds the state of opts.Log without writing to it. opts.Modules
// must be fresh instances: their state is restored into them.
func Inspect(opts Options) (*Inspection, error) {
	s, err := newSystem(opts)
	if err != nil {
		return nil, err
	}
	rep := &RecoveryReport{Checkpoints: map[string]uint64{}}
	owners := map[string]*owned{}
	so, sst, err := s.recovery.newScheduler()
	if err != nil {
		return nil, err
	}
	owners[ownerScheduler] = so
	ao, _, err := s.recovery.newAllocator()
	if err != nil {
		return nil, err
	}
	owners[ownerAllocator] = ao
	in := &Inspection{Modules: map[string]modules.Module{}, TaskTypes: s.recovery.taskTypes, rec: s.recovery}
	for _, m := range s.opts.Modules {
		mo, err := s.recovery.newModule(m)
		if err != nil {
			return nil, err
		}
		owners[moduleOwner(m.Name())] = mo
		in.Modules[m.Name()] = m
	}
	if err := replay(s.log, owners, rep); err != nil {
		return nil, err
	}
	in.Tasks = sst.state.Tasks(nil, 0)
	in.Problems = rep.Problems
	in.LastSeq = s.log.LastSeq()
	if in.Uncommitted, err = s.log.Uncommitted(); err != nil {
		return nil, fmt.Errorf("inspect: list intents: %w", err)
	}
	return in, nil
}

// CheckTask says why no configured module runs t (nil: one does).
func (in *Inspection) CheckTask(t *pb.Task) error { return in.rec.checkTask(t) }

// OwnerEffects is the WAL owner of output-file intents (payload
// "<module>\x00<path>").
const OwnerEffects = ownerEffects

// ModuleNames lists the configured modules in name order.
func (in *Inspection) ModuleNames() []string {
	names := make([]string, 0, len(in.Modules))
	for n := range in.Modules {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// AppendModuleEvents persists events a module decided offline (`fano
// repair`: Verifier.DecideRepair) under the module's WAL owner, durable
// on return, then applies them to the inspected module. It returns the
// output files the events changed, for WriteOutputs.
func (in *Inspection) AppendModuleEvents(module string, evs []*pb.ModuleEvent, at time.Time) ([]string, error) {
	m, ok := in.Modules[module]
	if !ok {
		return nil, fmt.Errorf("no module %q", module)
	}
	if len(evs) == 0 {
		return nil, nil
	}
	owner := moduleOwner(module)
	events := make([]*pb.Event, len(evs))
	entries := make([]wal.Entry, len(evs))
	for i, me := range evs {
		me.Module = module
		events[i] = &pb.Event{At: nanos(at), Body: &pb.Event_ModuleEvent{ModuleEvent: me}}
		ent, err := encodeEvent(owner, events[i])
		if err != nil {
			return nil, err
		}
		entries[i] = ent
	}
	seqs, err := in.rec.log.Append(context.Background(), entries...)
	if err != nil {
		return nil, fmt.Errorf("%s: persist %d repair events: %w", owner, len(evs), err)
	}
	for i, e := range events {
		if err := m.Apply(e.GetModuleEvent(), at); err != nil {
			return nil, fmt.Errorf("%s: apply repair event %d (%s): %w", owner, seqs[i], e.GetModuleEvent().GetType(), err)
		}
	}
	return exportsOf(m, events), nil
}

// WriteOutputs rewrites a module's output files from the inspected state,
// each under a WAL intent and commit with an atomic file write, exactly
// as a running module host does.
func (in *Inspection) WriteOutputs(module string, paths []string) error {
	m, ok := in.Modules[module]
	if !ok {
		return fmt.Errorf("no module %q", module)
	}
	if in.rec.opts.OutputDir == "" {
		return fmt.Errorf("%s: no output directory configured", module)
	}
	return in.rec.writeExports(m, paths)
}

// OutputPath is where a module's relative output path lives on disk; a
// path that would leave the output directory is an error.
func (in *Inspection) OutputPath(rel string) (string, error) {
	return outputPath(in.rec.opts.OutputDir, rel)
}
