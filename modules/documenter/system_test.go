package documenter

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/internal/fanotest"
	"fano/internal/testbundle"
	"fano/modules"
	"fano/modules/dedup"
	"fano/pb"
)

// bundle is the shared test bundle with the documenter alone (insights
// are fed by command here; in fano they come from the explorer as module
// messages). The log is in memory: these tests are about the flow, not
// the file (crash_test.go keeps the real WAL).
type bundle struct {
	*testbundle.Bundle
	t   *testing.T
	cfg Config
	mod *Module
}

func setup(t *testing.T, cfg Config) *bundle {
	t.Helper()
	names := []string{"chatgpt", "claude", "gemini"}
	cfg.Backends, cfg.Title = names, "Finite Projective Planes"
	cfg.MinBless = 1 // the sim's verdicts are random: the flow is under test
	cfg.Checker = dedup.New(dedup.Config{Threshold: 0.6, BorderlineLow: 0.4})
	m, err := New(cfg)
	require.NoError(t, err)
	b := &bundle{t: t, cfg: cfg, mod: m}
	b.Bundle = testbundle.Setup(t, testbundle.Options{
		Sims:   fanotest.Sims{Names: names, DeepAll: 100},
		Memory: true, MaxRequests: func(string) int { return 5 }, Modules: []modules.Module{m},
	})
	b.Start()
	return b
}

// note hands the documenter a blessed insight as the explorer's host would.
func (b *bundle) note(id, text string) {
	b.t.Helper()
	require.NoError(b.t, b.Sys.Deliver(&pb.ModuleMessage{Id: "explorer/insight/" + id, From: "explorer", To: Name,
		Body: &pb.ModuleMessage_InsightBlessed{InsightBlessed: &pb.InsightBlessed{InsightId: id, Text: text}}}))
}

// waitFor waits until cond holds inside the documenter's host.
func (b *bundle) waitFor(what string, cond func(m *Module) bool) {
	b.t.Helper()
	b.WaitModule(Name, what, func(m modules.Module) bool { return cond(m.(*Module)) })
}

func settled(m *Module) bool {
	if m.Backlog() > 0 {
		return false
	}
	for _, c := range m.Comments() {
		if c.Status == CommentOpen {
			return false
		}
	}
	return true
}

// A comment added while incorporation work waits is started before any
// of that work (spec §6.5: unresolved comments first), and the document
// files are written after every change; replaying the WAL rebuilds the
// same state.
func TestCommentAddressedBeforePendingIncorporation(t *testing.T) {
	b := setup(t, Config{})
	b.note("in-1", factPoints)
	b.waitFor("the first section", func(m *Module) bool { return len(m.SectionIDs()) == 1 && settled(m) })
	var sec string
	require.NoError(t, b.Sys.WithModule(Name, func(m modules.Module) { sec = m.(*Module).SectionIDs()[0] }))

	// Pending work and a comment arrive while no new work starts.
	b.Sys.SetAccepting(false)
	b.note("in-2", factGroup)
	b.note("in-3", factOrder6)
	b.Command(&pb.ModuleCommand{Module: Name,
		Command: &pb.ModuleCommand_AddComment{AddComment: &pb.AddComment{SectionId: sec, Text: "Please add a picture of the plane."}}})
	b.Sys.SetAccepting(true)
	b.waitFor("everything incorporated and the comment addressed", func(m *Module) bool {
		return settled(m) && len(m.Opportunities()) == 3 // each in a section of its own or extending one
	})

	var order []string
	for _, e := range b.Events("scheduler") {
		if ts := e.GetTaskStarted(); ts != nil {
			order = append(order, ts.TaskId)
		}
	}
	ci := slices.IndexFunc(order, func(id string) bool { return strings.Contains(id, "/"+TypeAddressComment+"/") })
	require.GreaterOrEqual(t, ci, 0, "the comment task started: %v", order)
	for i, id := range order {
		if strings.Contains(id, "/in-2/") || strings.Contains(id, "/in-3/") {
			assert.Less(t, ci, i, "the comment started before %s (order %v)", id, order)
		}
	}

	var md string
	var snap []byte
	require.NoError(t, b.Sys.WithModule(Name, func(mm modules.Module) {
		m := mm.(*Module)
		md = m.DocumentMarkdown()
		snap, _ = m.Snapshot()
		assert.Equal(t, CommentAddressed, m.Comments()[0].Status)
	}))
	b.waitFor("DOCUMENT.md written", func(m *Module) bool {
		disk, err := os.ReadFile(filepath.Join(b.Dir, "output", DocumentMD))
		return err == nil && string(disk) == md
	})

	// Replay of the module's WAL events alone rebuilds the same state.
	r, err := New(Config{Backends: b.cfg.Backends, Title: b.cfg.Title, MinBless: 1, Checker: dedup.New(dedup.Config{})})
	require.NoError(t, err)
	for _, e := range b.Events("module/" + Name) {
		require.NoError(t, r.Apply(e.GetModuleEvent(), time.Unix(0, e.At)))
	}
	assert.JSONEq(t, string(snap), snapshot(t, r))
}
