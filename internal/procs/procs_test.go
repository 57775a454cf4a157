package procs

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestForAddsOneUnlessTheEnvironmentChose(t *testing.T) {
	assert.Equal(t, 3, For(2, ""))
	assert.Equal(t, 2, For(1, ""))
	assert.Equal(t, 2, For(2, "2"), "GOMAXPROCS in the environment was applied by the runtime and wins")
}

func TestSetOnce(t *testing.T) {
	t.Setenv("GOMAXPROCS", "")
	before := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(before) })

	n, from := Set()
	assert.Equal(t, before+1, n)
	assert.Equal(t, "fano: the CPUs + 1", from)
	assert.Equal(t, before+1, runtime.GOMAXPROCS(0), "the runtime runs with it")

	// A second call (fano pipeline run after fano run's code path, or a
	// test that starts two apps) does not add another.
	n, _ = Set()
	assert.Equal(t, before+1, n)
	assert.Equal(t, before+1, runtime.GOMAXPROCS(0))
}
