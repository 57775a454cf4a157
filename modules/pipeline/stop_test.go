package pipeline

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/pb"
)

// finish records the run's end as the run command does and returns the
// stop it recorded; the stop survives a snapshot and restore.
func (h *harness) finish(loop string) *Stop {
	h.t.Helper()
	h.apply(h.m.DecideRunFinished(loop, h.now))
	snap, err := h.m.Snapshot()
	require.NoError(h.t, err)
	again := New(Config{Def: h.m.def, Items: h.m.items})
	require.NoError(h.t, again.Restore(snap))
	require.Equal(h.t, h.m.LastStop(), again.LastStop())
	return h.m.Summary().Stop
}

// Every way a run ends is named, with its exit code.
func TestStopReasonsAndExitCodes(t *testing.T) {
	t.Run("done", func(t *testing.T) {
		def, items := writeDef(t, fanout, 2)
		h := newHarness(t, def, items)
		h.runAll()
		s := h.finish(LoopFinished)
		assert.Equal(t, StopDone, s.Reason)
		assert.Equal(t, ExitDone, s.ExitCode)
	})
	t.Run("items failed", func(t *testing.T) {
		def, items := writeDef(t, fanout, 2)
		h := newHarness(t, def, items)
		h.answer = func(task *pb.Task, _ string) string {
			if strings.Contains(task.Id, "/m2/") {
				return "no json here"
			}
			return `{"verdict": true}`
		}
		h.runAll()
		s := h.finish(LoopFinished)
		assert.Equal(t, StopItemsFailed, s.Reason)
		assert.Equal(t, ExitItemsFailed, s.ExitCode)
		assert.Contains(t, s.Detail, "2 of 2 items failed")
	})
	t.Run("signal", func(t *testing.T) {
		def, items := writeDef(t, fanout, 2)
		h := newHarness(t, def, items)
		s := h.finish("interrupt")
		assert.Equal(t, StopSignal, s.Reason)
		assert.Equal(t, ExitStopped, s.ExitCode)
		assert.Contains(t, s.Detail, "interrupt; 2 items left")
	})
	t.Run("cost cap a request cannot afford", func(t *testing.T) {
		// 1,000 USD per million tokens and 50 answer tokens reserved: a
		// request may cost about 0.06, more than the whole cap.
		def, items := writeDef(t, strings.Replace(capped, "max_cost: 1.0", "max_cost: 0.01", 1), 3)
		h := newHarness(t, def, items)
		h.runAll()
		s := h.finish(LoopIdle)
		assert.Equal(t, StopCostCap, s.Reason)
		assert.Equal(t, ExitCostCap, s.ExitCode)
		assert.Contains(t, s.Detail, "limits.max_output_tokens 50 answer tokens")
		assert.Contains(t, s.Detail, "more than the 0.0100 left")
		assert.Contains(t, s.Detail, "3 items left")
	})
	t.Run("work left", func(t *testing.T) {
		def, items := writeDef(t, fanout, 2)
		h := newHarness(t, def, items)
		s := h.finish(LoopIdle)
		assert.Equal(t, StopWorkLeft, s.Reason)
		assert.Equal(t, ExitWorkLeft, s.ExitCode)
	})
	t.Run("a maintenance rewrite keeps the run's stop", func(t *testing.T) {
		def, items := writeDef(t, fanout, 1)
		h := newHarness(t, def, items)
		h.runAll()
		h.finish(LoopFinished)
		h.now = h.now.Add(time.Hour)
		assert.Equal(t, StopDone, h.finish("").Reason)
	})
}
