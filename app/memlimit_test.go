package app

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })

	t.Setenv("GOMEMLIMIT", "")
	debug.SetMemoryLimit(math.MaxInt64)
	b, from := memoryLimit(64)
	assert.Equal(t, int64(64<<20), b)
	assert.Equal(t, "orchestrator.state.memory_limit_mb", from)
	assert.Equal(t, int64(64<<20), debug.SetMemoryLimit(-1), "the runtime's limit is set")

	debug.SetMemoryLimit(math.MaxInt64)
	b, from = memoryLimit(0)
	assert.Equal(t, "none", from)
	assert.Zero(t, b)
	assert.Equal(t, int64(math.MaxInt64), debug.SetMemoryLimit(-1), "0 leaves the runtime alone")

	// The environment's GOMEMLIMIT was applied by the runtime at start
	// (here: by hand) and is not overridden.
	t.Setenv("GOMEMLIMIT", "300MiB")
	debug.SetMemoryLimit(300 << 20)
	b, from = memoryLimit(64)
	assert.Equal(t, "GOMEMLIMIT", from)
	assert.Equal(t, int64(300<<20), b)
	assert.Equal(t, int64(300<<20), debug.SetMemoryLimit(-1))
}
