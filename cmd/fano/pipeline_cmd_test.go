package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The progress bar shows the count, the rate since the run started (not
// counting what an earlier run finished) and the time left at that rate.
func TestProgressBarShowsRateAndETA(t *testing.T) {
	var buf bytes.Buffer
	b := &progressBar{w: &buf, start: time.Now().Add(-10 * time.Second), first: 100}
	b.draw(runProgress{done: 600, total: 1100})
	line := buf.String()
	assert.True(t, strings.HasPrefix(line, "\r["), line)
	assert.Contains(t, line, "600/1100 items")
	assert.Contains(t, line, "50.0/s")
	assert.Contains(t, line, "ETA 10s")
}

// While only the daily budget holds work back, the line says so and until
// when, instead of a rate and an ETA.
func TestProgressBarShowsTheWaitForTheBudget(t *testing.T) {
	var buf bytes.Buffer
	b := &progressBar{w: &buf, start: time.Now().Add(-10 * time.Second)}
	b.draw(runProgress{done: 7, total: 20, waiting: true, waitUntil: time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)})
	line := buf.String()
	assert.Contains(t, line, "7/20 items")
	assert.Contains(t, line, "waiting for the daily budget until 2026-11-24 00:00 UTC")
	assert.NotContains(t, line, "ETA")
}

// An unknown pipeline subcommand is a usage error (exit 2) naming it,
// not the help with exit 0.
func TestUnknownPipelineSubcommandExitsNonZero(t *testing.T) {
	var out, errb bytes.Buffer
	code := executeWith([]string{"pipeline", "bogus"}, &out, &errb, nil)
	assert.Equal(t, 2, code)
	assert.Contains(t, errb.String(), `unknown command "bogus" for "fano pipeline"`)
	assert.Empty(t, out.String())

	out.Reset()
	errb.Reset()
	assert.Zero(t, executeWith([]string{"pipeline"}, &out, &errb, nil), "no subcommand: the help")
	assert.Contains(t, out.String(), "fano pipeline init")
}
