package actors

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"fano/modules"
	"fano/modules/explorer"
	"fano/pb"
	"fano/wal"
)

func seedCommand(module, text string) *pb.ModuleCommand {
	return &pb.ModuleCommand{Module: module, Command: &pb.ModuleCommand_AddSeed{AddSeed: &pb.AddSeed{Text: text, Priority: 2}}}
}

// A command reaches the module's host as a message: the module decides
// on its own state, the host persists exactly those events under the
// module's owner and answers once they are applied; a refused command
// names the module and the command and writes nothing.
func TestCommandPersistsExactlyItsEvents(t *testing.T) {
	ex, err := explorer.New(explorer.Config{})
	require.NoError(t, err)
	b := setup(t, setupOpts{noSync: true, mutate: func(o *Options) { o.Modules = append(o.Modules, ex) }})
	sys := b.start()
	sys.SetAccepting(false) // no tasks for the seed: the WAL holds only the command's events
	const question = "How many lines pass through each point of the Fano plane?"

	r, err := sys.Command(seedCommand(explorer.Name, question))
	require.NoError(t, err)
	require.Equal(t, []string{"seed_added"}, r.GetEventTypes())
	evs := moduleEvents(t, b.log, explorer.Name, "")
	require.Len(t, evs, 1, "the command's events and nothing else")
	require.Equal(t, "seed_added", evs[0].GetModuleEvent().GetType())
	require.Equal(t, explorer.Name, evs[0].GetModuleEvent().GetModule())
	require.Equal(t, question, field(t, evs[0], "text"))
	seeds := 0
	require.NoError(t, sys.WithModule(explorer.Name, func(m modules.Module) { seeds = len(m.(*explorer.Module).Seeds()) }))
	require.Equal(t, 1, seeds, "applied before the reply")

	last := b.log.LastSeq()
	refused := []struct {
		name        string
		cmd         *pb.ModuleCommand
		command     string
		unsupported bool
	}{
		{"empty text", seedCommand(explorer.Name, "  "), "add_seed", false},
		{"the same seed again", seedCommand(explorer.Name, question), "add_seed", false},
		{"a command the module does not take", &pb.ModuleCommand{Module: explorer.Name,
			Command: &pb.ModuleCommand_AddComment{AddComment: &pb.AddComment{SectionId: "s1", Text: "more"}}}, "add_comment", true},
		{"no command", &pb.ModuleCommand{Module: explorer.Name}, "none", false},
	}
	for _, tc := range refused {
		_, err := sys.Command(tc.cmd)
		var ce *CommandError
		require.ErrorAs(t, err, &ce, tc.name)
		require.Equal(t, explorer.Name, ce.Module, tc.name)
		require.Equal(t, tc.command, ce.Command, tc.name)
		require.ErrorContains(t, err, "module explorer: command "+tc.command+": ", tc.name)
		require.Equal(t, tc.unsupported, errors.Is(err, modules.ErrUnsupportedCommand), tc.name)
	}
	_, err = sys.Command(seedCommand("nowhere", question))
	require.ErrorContains(t, err, `command add_seed: no module "nowhere"`)
	// A refused command writes nothing; the allocator's hourly window
	// resets may land meanwhile (the clock is real here), nothing else.
	require.NoError(t, b.log.Replay(last+1, func(e wal.Entry) error {
		if e.Owner != ownerAllocator {
			t.Errorf("a refused command wrote entry %d of %s (%s)", e.Seq, e.Owner, e.Type)
		}
		return nil
	}))
	require.Len(t, moduleEvents(t, b.log, explorer.Name, ""), 1)
}

// A read the control panel makes is a pb query answered by the module's
// host with a pb view of the state as it is after every earlier message.
func TestQueryAnswersWithTheModulesView(t *testing.T) {
	ex, err := explorer.New(explorer.Config{})
	require.NoError(t, err)
	b := setup(t, setupOpts{noSync: true, mutate: func(o *Options) { o.Modules = append(o.Modules, ex) }})
	sys := b.start()
	sys.SetAccepting(false)

	v, err := sys.Query(&pb.ModuleQuery{Module: explorer.Name, Report: true, Document: true})
	require.NoError(t, err)
	require.Equal(t, explorer.Name, v.GetModule())
	require.Equal(t, []string{modules.CapSeeds}, v.GetCapabilities())
	require.Empty(t, v.GetDocumentMarkdown(), "the explorer renders no document")

	v, err = sys.Query(&pb.ModuleQuery{Module: b.probe.Name()})
	require.NoError(t, err)
	require.Empty(t, v.GetCapabilities())

	_, err = sys.Query(&pb.ModuleQuery{Module: "nowhere"})
	require.ErrorContains(t, err, `no module "nowhere"`)
}
