package modules

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"fano/pb"
)

// ErrUnsupportedCommand says a module does not take a command.
var ErrUnsupportedCommand = errors.New("command not supported by this module")

// Commander is implemented by modules that take commands beyond the ones
// the optional interfaces below cover (the pipeline: retry failed pairs,
// finish a run, revalidate). A command it does not take is
// ErrUnsupportedCommand.
type Commander interface {
	DecideCommand(cmd *pb.ModuleCommand, now time.Time) ([]*pb.ModuleEvent, *pb.CommandResult, error)
}

// CommandName is the name of a command's kind ("add_seed"), as errors
// and logs call it.
func CommandName(cmd *pb.ModuleCommand) string {
	if cmd == nil {
		return "none"
	}
	m := cmd.ProtoReflect()
	if f := m.WhichOneof(m.Descriptor().Oneofs().ByName("command")); f != nil {
		return string(f.Name())
	}
	return "none"
}

// DecideCommand has m decide the events of cmd on its current state:
// add_seed through SeedTaker, add_comment through Commenter,
// repair_problem through Verifier, any other through Commander. A module
// without the interface answers ErrUnsupportedCommand.
func DecideCommand(m Module, cmd *pb.ModuleCommand, now time.Time) ([]*pb.ModuleEvent, *pb.CommandResult, error) {
	unsupported := ErrUnsupportedCommand
	switch c := cmd.GetCommand().(type) {
	case *pb.ModuleCommand_AddSeed:
		st, ok := m.(SeedTaker)
		if !ok {
			return nil, nil, unsupported
		}
		evs, err := st.DecideAddSeed(c.AddSeed.GetText(), int(c.AddSeed.GetPriority()), now)
		return evs, nil, err
	case *pb.ModuleCommand_AddComment:
		cm, ok := m.(Commenter)
		if !ok {
			return nil, nil, unsupported
		}
		evs, err := cm.DecideAddComment(c.AddComment.GetSectionId(), c.AddComment.GetText(), now)
		return evs, nil, err
	case *pb.ModuleCommand_RepairProblem:
		v, ok := m.(Verifier)
		if !ok {
			return nil, nil, unsupported
		}
		p := c.RepairProblem
		evs, err := v.DecideRepair(Problem{Kind: p.GetKind(), ID: p.GetId(), Detail: p.GetDetail()}, now)
		return evs, nil, err
	case nil:
		return nil, nil, errors.New("empty command")
	}
	if cm, ok := m.(Commander); ok {
		return cm.DecideCommand(cmd, now)
	}
	return nil, nil, unsupported
}

// SectionLister is implemented by a document module so that people (and
// the control panel's comment form) can name a section: the ids
// DecideAddComment accepts.
type SectionLister interface {
	SectionIDs() []string
}

// Capabilities a ModuleView names.
const (
	CapSeeds    = "seeds"    // SeedTaker
	CapComments = "comments" // Commenter
	CapDocument = "document" // DocumentReader
	CapSections = "sections" // SectionLister
)

// View answers q from m's current state.
func View(m Module, q *pb.ModuleQuery) *pb.ModuleView {
	v := &pb.ModuleView{Module: m.Name(), Capabilities: []string{}}
	if _, ok := m.(SeedTaker); ok {
		v.Capabilities = append(v.Capabilities, CapSeeds)
	}
	if _, ok := m.(Commenter); ok {
		v.Capabilities = append(v.Capabilities, CapComments)
	}
	d, isDoc := m.(DocumentReader)
	if isDoc {
		v.Capabilities = append(v.Capabilities, CapDocument)
	}
	sl, hasSections := m.(SectionLister)
	if hasSections {
		v.Capabilities = append(v.Capabilities, CapSections)
	}
	if q.GetDocument() {
		if isDoc {
			v.DocumentMarkdown = d.DocumentMarkdown()
		}
		if hasSections {
			v.SectionIds = sl.SectionIDs()
		}
	}
	if r, ok := m.(Reporter); ok && q.GetReport() {
		data, err := json.Marshal(r.Report())
		if err != nil {
			v.Error = fmt.Sprintf("module %s: report: %v", m.Name(), err)
		} else {
			v.ReportJson = data
		}
	}
	return v
}
