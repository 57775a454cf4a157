package pipeline

import (
	"math"
	"testing"

	"fano/pb"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The binary snapshot restores every part of the state the JSON one
// held: pairs of the grid with their outputs, failed pairs' notes,
// attempts, generations, costs and tokens, pairs outside the grid (names
// that need escaping or hold the keys' separator), requests per day, the
// finished count and the last stop. It is smaller than the JSON, the
// same state gives the same bytes, and a JSON snapshot of an older run
// still restores.
func TestBinarySnapshotRestoresTheWholeState(t *testing.T) {
	def, items, h := mixedAnswers(t)
	h.runAll()
	h.apply(h.m.DecideRetryFailed(""))
	h.m.pairOf("verdict", "i07", "m1").Cost = 1.5e-9
	h.m.pairOf("verdict", "i05", "m1").Tokens = 1 << 40
	h.m.st.Requests["2026-11-22"] = 3
	h.m.st.Finished = 2
	h.m.st.LastStop = &Stop{Reason: "max_cost", ExitCode: 3, Detail: "the cap", At: "2026-11-22T10:00:00Z"}
	for _, name := range []string{"gone step", "a\x00b", "ä"} {
		p := h.m.ensure(pairID{name, "i01", "m1"})
		p.status, p.Output, p.Gen = statusOK, outText(`{"v":1}`), 4
		q := h.m.ensure(pairID{"verdict", "no such item " + name, "m9"})
		q.status, q.Attempts = statusFailed, 3
		q.setNotes("rules", "rule 1 does not hold", "raw\x00")
	}
	want, err := h.m.snapshotJSON()
	require.NoError(t, err)
	bin, err := h.m.Snapshot()
	require.NoError(t, err)
	assert.Less(t, len(bin), len(want)*2/3, "binary is smaller")
	again, err := h.m.Snapshot()
	require.NoError(t, err)
	assert.Equal(t, bin, again, "the same state, the same bytes")

	m := New(Config{Def: def, Items: items})
	require.NoError(t, m.Restore(bin))
	got, err := m.snapshotJSON()
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(got))
	assert.Equal(t, h.m.Summary(), m.Summary())
	assert.Equal(t, h.m.npairs, m.npairs)
	spent := 0.0
	h.m.eachPair(func(_ pairID, p *pair) { spent += p.Cost })
	assert.InDelta(t, spent, m.spent, 1e-15)
	rebin, err := m.Snapshot()
	require.NoError(t, err)
	assert.Equal(t, bin, rebin, "restored, it writes the same bytes")

	fromJSON := New(Config{Def: def, Items: items})
	require.NoError(t, fromJSON.Restore(want), "a JSON snapshot still restores")
	viaJSON, err := fromJSON.snapshotJSON()
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(viaJSON))
	assert.Equal(t, h.m.Summary(), fromJSON.Summary())
}

// A binary snapshot cut short, or with a count larger than it could
// hold, is refused with an error, never a panic nor a huge allocation.
func TestBinarySnapshotCutShortIsRefused(t *testing.T) {
	def, items := writeDef(t, strict, 4)
	h := newHarness(t, def, items)
	h.answer = func(*pb.Task, string) string { return `{"verdict": true, "confidence": 0.95}` }
	h.runAll()
	bin, err := h.m.Snapshot()
	require.NoError(t, err)
	for cut := len(snapshotMagic); cut < len(bin); cut++ {
		m := New(Config{Def: def, Items: items})
		assert.Error(t, m.Restore(bin[:cut]), "cut at %d of %d", cut, len(bin))
	}
	huge := append([]byte(snapshotMagic), 0xff, 0xff, 0xff, 0xff, 0x0f)
	err = New(Config{Def: def, Items: items}).Restore(huge)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "more than the snapshot holds")
	trailing := append(append([]byte{}, bin...), 0)
	assert.ErrorContains(t, New(Config{Def: def, Items: items}).Restore(trailing), "after its end")
}

// A pair's attempts stop at their type's bound, counted or restored: they
// never wrap round to a count that would ask again.
func TestAttemptsStopAtTheirBound(t *testing.T) {
	p := pair{Attempts: math.MaxInt16 - 1}
	p.addAttempt()
	p.addAttempt()
	assert.Equal(t, int16(math.MaxInt16), p.Attempts)
	assert.Equal(t, int16(math.MaxInt16), attemptsOf(1<<40))
	assert.Equal(t, int16(0), attemptsOf(-3))
}
