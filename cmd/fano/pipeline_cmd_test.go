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
	b.draw(600, 1100)
	line := buf.String()
	assert.True(t, strings.HasPrefix(line, "\r["), line)
	assert.Contains(t, line, "600/1100 items")
	assert.Contains(t, line, "50.0/s")
	assert.Contains(t, line, "ETA 10s")
}
