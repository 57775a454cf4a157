package modules_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"fano/modules"
	"fano/modules/documenter"
	"fano/modules/explorer"
	"fano/pb"
)

func TestDecideCommandRoutesToTheModulesInterface(t *testing.T) {
	ex, err := explorer.New(explorer.Config{})
	require.NoError(t, err)
	now := time.Unix(1_800_000_000, 0)

	seed := &pb.ModuleCommand{Module: explorer.Name, Command: &pb.ModuleCommand_AddSeed{AddSeed: &pb.AddSeed{Text: "Why seven points?", Priority: 1}}}
	require.Equal(t, "add_seed", modules.CommandName(seed))
	evs, _, err := modules.DecideCommand(ex, seed, now)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	require.Equal(t, "seed_added", evs[0].GetType())

	comment := &pb.ModuleCommand{Module: explorer.Name, Command: &pb.ModuleCommand_AddComment{AddComment: &pb.AddComment{SectionId: "s", Text: "x"}}}
	_, _, err = modules.DecideCommand(ex, comment, now)
	require.True(t, errors.Is(err, modules.ErrUnsupportedCommand), "the explorer takes no comments: %v", err)

	_, _, err = modules.DecideCommand(ex, &pb.ModuleCommand{Module: explorer.Name}, now)
	require.ErrorContains(t, err, "empty command")
	require.Equal(t, "none", modules.CommandName(&pb.ModuleCommand{}))
}

func TestViewListsCapabilitiesAndTheDocument(t *testing.T) {
	doc, err := documenter.New(documenter.Config{})
	require.NoError(t, err)
	v := modules.View(doc, &pb.ModuleQuery{Module: documenter.Name})
	require.Equal(t, []string{modules.CapComments, modules.CapDocument, modules.CapSections}, v.GetCapabilities())
	require.Empty(t, v.GetDocumentMarkdown(), "not asked for")

	v = modules.View(doc, &pb.ModuleQuery{Module: documenter.Name, Document: true})
	require.Equal(t, doc.DocumentMarkdown(), v.GetDocumentMarkdown())
	require.NotEmpty(t, v.GetDocumentMarkdown())
}
